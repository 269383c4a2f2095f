"""Value types of the service. Frozen and slotted; field names are snake_case here and become camelCase
on the wire through the one converter in ``adapters/wire.py``.

Timestamps are timezone-aware UTC ``datetime`` objects.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import attrs

# --- platform data -------------------------------------------------------------------------------


@attrs.frozen
class PlatformUser:
    """A member of the platform as clients may see it: never more than id, handle and name. ``handle`` is
    empty where the platform did not send it (a DM conversation's other member: PLATFORM.md promises only
    their first and last name there, and their id among the channel's members)."""

    id: str
    handle: str
    name: str


@attrs.frozen
class Label:
    id: str
    name: str
    post_count: int = 0


@attrs.frozen
class Group:
    id: str
    slug: str
    name: str
    description: str = ""
    member_count: int | None = None
    labels: tuple[Label, ...] = ()


@attrs.frozen
class Post:
    id: str
    group_id: str
    title: str
    content: str
    label_id: str | None
    author_id: str | None
    author: PlatformUser | None
    created_at: datetime
    updated_at: datetime | None = None
    upvotes: int = 0
    comment_count: int = 0
    pinned: bool = False
    url: str | None = None


@attrs.frozen
class Comment:
    id: str
    post_id: str
    parent_id: str | None
    author_id: str | None
    author: PlatformUser | None
    content: str
    created_at: datetime
    upvotes: int = 0
    pinned: bool = False


@attrs.frozen
class PostDetail:
    post: Post
    comments: tuple[Comment, ...]


@attrs.frozen
class Message:
    id: str
    conversation_id: str
    sender_id: str
    content: str
    created_at: datetime


@attrs.frozen
class Conversation:
    id: str
    with_: PlatformUser | None
    last_message: Message | None
    unread_count: int = 0
    awaiting_reply: bool = False
    updated_at: datetime | None = None


@attrs.frozen
class MessagePage:
    """One page of a thread: ``messages`` oldest to newest; ``has_older`` when more lie before them."""

    conversation: Conversation
    messages: tuple[Message, ...]
    has_older: bool


@attrs.frozen
class LinkedAccount:
    """What logging in to the platform yields: who we are there and the session that proves it.

    ``session_expires_at``: when the platform says the session ends (its token's own expiry), or None when
    the token does not say. Shown to the account so that it can link again in time; never trusted to
    mean the session is still good before then (the platform may end it earlier)."""

    user: PlatformUser
    session_token: str
    session_expires_at: datetime | None = None


@attrs.frozen
class PlatformSession:
    """Handed to every gateway call: which connection (for the browser pool) and its session."""

    connection_id: str
    token: str


# --- the service's own records ------------------------------------------------------------------


@attrs.frozen
class Account:
    id: str
    email: str
    created_at: datetime


@attrs.frozen
class WebSession:
    """A signed-in browser. Only a hash of the cookie value is stored."""

    token_hash: str
    account_id: str
    csrf_token: str
    created_at: datetime
    expires_at: datetime


CONNECTION_ACTIVE = "active"
CONNECTION_EXPIRED = "expired"


@attrs.frozen
class Connection:
    id: str
    account_id: str
    platform_user_id: str
    handle: str
    name: str
    active: bool
    status: str  # CONNECTION_ACTIVE or CONNECTION_EXPIRED
    created_at: datetime
    # When the platform session ends by its own token (``LinkedAccount.session_expires_at``); None when the
    # token did not say, or the connection was linked before the service read it.
    session_expires_at: datetime | None = None


KEY_STANDARD = "standard"
KEY_CONNECTOR = "connector"


@attrs.frozen
class ApiKey:
    """A key record. The secret itself is never kept: only its SHA-256 (see ``keys.py``).

    ``lineage_id`` is shared by a key and every key that rotation made from it, so that rotation can
    end a predecessor still in its grace window (at most two live secrets per lineage).
    """

    id: str
    account_id: str
    name: str
    prefix: str
    scopes: tuple[str, ...]
    connection_id: str | None
    kind: str
    created_at: datetime
    lineage_id: str
    last_used_at: datetime | None = None
    expires_at: datetime | None = None
    revoked_at: datetime | None = None

    def is_live(self, now: datetime) -> bool:
        if self.revoked_at is not None:
            return False
        return self.expires_at is None or now < self.expires_at


@attrs.frozen
class AuditEvent:
    """One line of the append-only audit table. Never holds a secret."""

    at: datetime
    event: str  # key.minted, key.rotated, key.revoked, key.refused, login.failed, ...
    account_id: str | None = None
    key_id: str | None = None
    subject: str | None = None  # e.g. the email or client address of a failed login
    detail: str | None = None


@attrs.frozen
class KeyUsage:
    requests_today: int
    requests_this_month: int
    requests_total: int


@attrs.frozen
class DmQuota:
    sent_last_hour: int
    sent_today: int
    hourly_limit: int
    daily_limit: int
    next_allowed_at: datetime | None


@attrs.frozen
class ReadPace:
    """Where a connection stands with the platform: its read budget over the last minute, and the hold
    the platform's own 429 put on it (``held_until``, None when not held)."""

    reads_per_minute: int
    reads_last_minute: int
    reads_left: int
    next_read_at: datetime | None  # when a read is allowed again, None when one is allowed now
    held_until: datetime | None


@attrs.frozen
class WritePace:
    """A connection's write budget over the last minute (posts, comments, deletions, DMs)."""

    writes_per_minute: int
    writes_last_minute: int
    writes_left: int
    next_write_at: datetime | None  # when a write is allowed again (a hold included), None when one is now


# An idempotency record answers retries for this long; status IN_FLIGHT marks a first request not done yet.
IDEMPOTENCY_WINDOW = timedelta(hours=24)
IN_FLIGHT = 0


@attrs.frozen
class IdempotencyRecord:
    """The first answer to a creating POST, kept so that a retry gets it again instead of acting twice.

    ``status`` is 0 while the first request is still in flight.
    """

    key: str  # namespaced: key id + method + path + client key
    fingerprint: str  # SHA-256 of the request body
    status: int
    body: str
    created_at: datetime
