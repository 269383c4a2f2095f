"""The ports of the core: what it needs from the outside world, and the contract each side keeps.

Adapters implement these Protocols (``adapters/``); ``tests/fakes.py`` holds in-memory versions that
keep the same contracts, checked by contract tests run against fake and real alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Protocol

from community_api.model import (
    Account,
    ApiKey,
    AuditEvent,
    Comment,
    Connection,
    Conversation,
    DmQuota,
    Group,
    IdempotencyRecord,
    KeyUsage,
    LinkedAccount,
    Message,
    MessagePage,
    PlatformSession,
    PlatformUser,
    Post,
    PostDetail,
    ReadPace,
    WebSession,
)
from community_api.oauth_model import AuthorizationCode, OAuthClient, OAuthToken


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...


class PlatformGateway(Protocol):
    """The community platform, as the connected account sees it.

    Every method acts as the account behind ``session`` and raises only core errors:
    - ``NotFound`` when an id (group, post, comment, conversation, user) does not exist for that account,
      including a group it is not a member of;
    - ``InvalidRequest`` when the platform refuses the input (unknown label, a parent comment of another
      post, a content the platform rejects);
    - ``Forbidden`` when the account may not do it (deleting someone else's post);
    - ``ConnectionExpired`` when the platform session is no longer valid;
    - ``PlatformError`` for an answer it cannot use, ``PlatformUnavailable`` for no answer in time.
    Nothing private of the account (payment data, keys of other services) ever leaves the gateway.
    A group may be named by its id or by its slug wherever a ``group`` is taken.
    """

    def login(self, email: str, password: str) -> LinkedAccount:
        """Log in with the platform's own form. The password is used once and never kept.
        Wrong credentials, a two-factor prompt or a captcha raise ``InvalidRequest`` with a clear message."""
        ...

    def adopt_session(self, session_token: str) -> LinkedAccount:
        """Check an existing platform session token and say whose it is (``InvalidRequest`` if invalid)."""
        ...

    def whoami(self, session: PlatformSession) -> PlatformUser: ...

    def list_groups(self, session: PlatformSession) -> list[Group]: ...

    def get_group(self, session: PlatformSession, group: str) -> Group:
        """Group metadata with its labels (categories)."""
        ...

    def feed_pages(self, session: PlatformSession, group: str, sort: str, pages: Sequence[int]) -> list[list[Post]]:
        """Fetch the given 1-based feed pages of ``group`` at once, in ``sort`` (one of ``feed.SORTS``).

        Answers one list per requested page, in the order asked; an empty list means the page lies past
        the end of the feed. Pinned posts that the platform repeats on page 1 are listed once.
        """
        ...

    def post_detail(self, session: PlatformSession, post_id: str, group: str | None) -> PostDetail:
        """A post and all its comments (flat, every depth).
        ``NotFound`` for an unknown post or a comment id."""
        ...

    def create_post(self, session: PlatformSession, group: str, title: str, content: str, label_id: str | None) -> Post:
        """Publish a post. The answer's author fields are None: the platform does not return them."""
        ...

    def delete_post(self, session: PlatformSession, post_id: str) -> None:
        """``NotFound`` when there is no such post (a comment id is not a post)."""
        ...

    def create_comment(
        self,
        session: PlatformSession,
        post_id: str,
        content: str,
        parent_id: str | None,
        group: str | None,
    ) -> Comment:
        """Comment on a post, or reply to ``parent_id``, which must be a comment of that post."""
        ...

    def delete_comment(self, session: PlatformSession, comment_id: str) -> None:
        """``NotFound`` when there is no such comment (a post id is not a comment)."""
        ...

    def list_conversations(self, session: PlatformSession, offset: int, limit: int) -> list[Conversation]:
        """One page of the inbox, newest activity first; fewer than ``limit`` (or none) at the end.
        ``awaiting_reply`` is left False: the core decides it from ``last_message.sender_id``."""
        ...

    def get_messages(self, session: PlatformSession, conversation_id: str, before: str | None) -> MessagePage:
        """The newest messages of a thread (``before`` None) or those older than message ``before``."""
        ...

    def open_conversation(self, session: PlatformSession, user_id: str, group: str | None) -> Conversation:
        """The conversation with a member (existing or new). ``group`` is a group both belong to;
        None lets the gateway pick one they share."""
        ...

    def send_message(self, session: PlatformSession, conversation_id: str, content: str) -> Message: ...


class UnitOfWork(Protocol):
    """Reads and writes of the store that are one step (cosmicpython's unit of work): no other step's
    writes land between this one's reads and its writes, and its writes land all together at
    ``commit()`` or not at all. Leaving the block without ``commit()``, or by an exception, discards them.

    ``store`` is the store as the step sees it: do the step's reads and writes through it, on the thread
    that opened the block. A block opened inside another joins it: only the outermost ``commit()`` counts."""

    store: KeyStore

    def commit(self) -> None: ...


class KeyStore(Protocol):
    """Durable records of the service: accounts, web sessions, connections, API keys, usage, the audit
    trail, idempotency records, and OAuth clients, codes and tokens. Look-ups answer None when nothing
    matches; they never raise for that.
    ``Conflict`` is raised where a uniqueness rule is broken.

    Every use case that reads and then writes runs in ``unit_of_work()``. The SQLite store makes it one
    ``BEGIN IMMEDIATE`` transaction; the in-memory fake holds its lock and applies the writes at commit."""

    def unit_of_work(self) -> AbstractContextManager[UnitOfWork]:
        """A block whose reads and writes are one step (``UnitOfWork``)."""
        ...

    # accounts and web sessions
    def add_account(self, account: Account, password_hash: str) -> None:
        """``Conflict`` if the email (compared case-insensitively) is taken."""
        ...

    def get_account(self, account_id: str) -> Account | None: ...

    def find_account_by_email(self, email: str) -> tuple[Account, str] | None:
        """The account and its password hash."""
        ...

    def count_accounts(self) -> int: ...

    def add_web_session(self, session: WebSession) -> None: ...

    def get_web_session(self, token_hash: str) -> WebSession | None: ...

    def delete_web_session(self, token_hash: str) -> None: ...

    # connections
    def save_connection(self, connection: Connection, platform_session: str) -> Connection:
        """Insert, or refresh in place when the account already links that platform user: the stored
        record keeps its id and created_at, takes the new handle, name, status and session. Answers the
        stored record. The platform session is kept encrypted at rest by real stores."""
        ...

    def get_connection(self, connection_id: str) -> Connection | None: ...

    def list_connections(self, account_id: str) -> list[Connection]:
        """Oldest first."""
        ...

    def get_platform_session(self, connection_id: str) -> str | None: ...

    def one_check(self) -> AbstractContextManager[None]:
        """A block whose look-ups may all answer as the store stood at the block's start (the look-ups of
        one request: its key, then its connection). A store that must ask whether its cache is still
        fresh may then ask once for the block rather than once per look-up. Writes made inside the block
        are seen by the block's later look-ups."""
        ...

    def load_connection(self, account_id: str, connection_id: str | None) -> tuple[Connection, str | None] | None:
        """One look-up for the hot path of every data request: the connection ``connection_id`` (of any
        account: the caller checks ownership) or, when it is None, the account's active connection (its
        oldest when none is active), with its platform session (None if it cannot be read). None when
        nothing matches."""
        ...

    def set_active_connection(self, account_id: str, connection_id: str) -> None:
        """Make one connection the active one; every other connection of the account becomes inactive."""
        ...

    def set_connection_status(self, connection_id: str, status: str) -> None: ...

    # API keys
    def add_key(self, key: ApiKey, secret_hash: str) -> None:
        """``secret_hash`` is the hex SHA-256 of the full key value; unique."""
        ...

    def get_key(self, key_id: str) -> ApiKey | None: ...

    def find_keys_by_prefix(self, prefix: str) -> list[tuple[ApiKey, str]]:
        """Every key whose ``prefix`` matches, each with its stored secret hash, so that the caller
        compares hashes in constant time rather than letting an index compare secrets."""
        ...

    def list_keys(self, account_id: str) -> list[ApiKey]:
        """Every key of the account, revoked and expired ones too, oldest first."""
        ...

    def end_key(self, key_id: str, *, expires_at: datetime | None = None, revoked_at: datetime | None = None) -> None:
        """End a key, never bring it back: ``expires_at`` becomes the earlier of the stored one and the given
        one; ``revoked_at`` is set only where it is still empty. A write states the change, not the row,
        so a stale copy of a key can never make it live again. No-op for an unknown key."""
        ...

    # usage
    def add_usage(self, counts: Mapping[tuple[str, str], int], last_used: Mapping[str, datetime]) -> None:
        """Add request counts per (key id, UTC day ``YYYY-MM-DD``) and move ``last_used_at`` forward."""
        ...

    def key_usage(self, key_id: str, day: str) -> KeyUsage:
        """Requests of the key on ``day``, in that day's month, and in all."""
        ...

    # audit
    def add_audit(self, event: AuditEvent) -> None: ...

    def count_audit(self, event: str, subject: str, since: datetime) -> int:
        """How many ``event`` rows with that ``subject`` were written at or after ``since``."""
        ...

    def list_audit(self, account_id: str) -> list[AuditEvent]:
        """Oldest first."""
        ...

    # idempotency
    def claim_idempotency(self, record: IdempotencyRecord) -> IdempotencyRecord | None:
        """Insert ``record`` (status 0: in flight) unless one with the same key exists and is younger
        than 24 hours. Answers None when the claim succeeded, else the existing record. Atomic across
        processes: of two concurrent claims exactly one succeeds."""
        ...

    def complete_idempotency(self, key: str, status: int, body: str) -> None: ...

    def release_idempotency(self, key: str) -> None:
        """Forget an in-flight claim (the request failed before acting), so a retry may act."""
        ...

    # OAuth for MCP connectors (``oauth.py``): clients, codes and tokens; secrets only as hex SHA-256
    def add_oauth_client(self, client: OAuthClient) -> None:
        """``Conflict`` if the id is taken. ``redirect_uris`` keep their order."""
        ...

    def get_oauth_client(self, client_id: str) -> OAuthClient | None: ...

    def add_authorization_code(self, code: AuthorizationCode) -> None:
        """``code_hash`` is unique (``Conflict``)."""
        ...

    def use_authorization_code(self, code_hash: str, at: datetime) -> AuthorizationCode | None:
        """Mark the code used at ``at`` (unless it already was) and answer the record as it was before
        this call: ``used_at`` None means this call used it. None for an unknown code. Atomic across
        processes: of concurrent calls for one code exactly one sees ``used_at`` None."""
        ...

    def set_authorization_code_key(self, code_hash: str, key_id: str) -> None:
        """Record the grant (connector key) that redeeming the code created. No-op for an unknown code."""
        ...

    def add_oauth_token(self, token: OAuthToken) -> None:
        """``token_hash`` is unique (``Conflict``). The store may forget tokens of the same grant whose
        ``expires_at`` has passed ``token.created_at``: they can never be accepted again."""
        ...

    def get_oauth_token(self, token_hash: str) -> OAuthToken | None: ...

    def use_oauth_token(self, token_hash: str, at: datetime) -> OAuthToken | None:
        """As ``use_authorization_code``, for a refresh token being rotated: answers the record as it was
        before (``used_at`` None: this call used it), None when unknown; atomic across processes."""
        ...

    def delete_oauth_tokens(self, key_id: str) -> None:
        """Forget every token of the grant (on revocation of its connector key). No-op when none."""
        ...


class Throttle(Protocol):
    """The per-connection DM throttle: one send per drawn gap of 30-45 s (drawn anew after each send),
    20 per rolling hour, 100 per rolling day. Shared by every worker process of the service.

    A send is ``reserve``d before it goes to the platform, then ``commit``ted when the platform took it (or
    may have: no answer in time) or ``cancel``led when the platform refused it (a refused send uses no
    quota). Both follow ``reserve`` within seconds: a reservation left unsettled holds the pace gap only.
    Windows exclude their end point: a send exactly one gap (or one hour, one day) later is allowed.
    Of concurrent ``reserve`` calls for one connection, no more succeed than the limits allow."""

    def reserve(self, connection_id: str) -> object:
        """Answer an opaque reservation, or raise ``RateLimited`` with the seconds until the next
        allowed send."""
        ...

    def commit(self, reservation: object) -> None: ...

    def cancel(self, reservation: object) -> None: ...

    def quota(self, connection_id: str) -> DmQuota: ...


class PlatformPace(Protocol):
    """How fast one connected account may call the platform, shared by every worker process. It keeps
    the account safe: the platform answers 429 to accounts that read too fast, and restricts them.

    - ``hold``: after the platform's own 429, no platform call of that connection is made for the
      seconds it asked; the longer of two holds wins;
    - reads: at most ``reads_per_minute`` platform requests in any 60 s (a moving window; a request
      exactly 60 s old still counts);
    - ``admit(connection_id, reads)`` raises ``RateLimited`` when the connection is held, or when
      ``reads`` more would pass the limit, and then counts nothing. Its ``retry_after`` is exact: after
      that many whole seconds the same call is admitted (if nothing else was), one second less is not.
      Otherwise it counts ``reads``; 0 (a write) only checks the hold. A call of more reads than the
      whole limit counts as the whole limit, so that it can ever pass."""

    def admit(self, connection_id: str, reads: int) -> None: ...

    def hold(self, connection_id: str, seconds: int) -> None: ...

    def status(self, connection_id: str) -> ReadPace: ...
