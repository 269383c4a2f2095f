"""In-memory records of the stand-in platform.

Times are kept as integer microseconds since the epoch (the comment cursor ``created-gt`` is microseconds
too); the serializers turn them into ISO 8601 strings ending in Z, and ``lastComment`` into integer
nanoseconds, as PLATFORM.md reports.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, TypeVar

T = TypeVar("T")

US = 1_000_000
HOUR_US = 3600 * US
DAY_US = 24 * HOUR_US


@lru_cache(maxsize=1 << 16)
def iso(us: int) -> str:
    """ISO 8601 UTC with a Z, as the platform writes ``createdAt``: 1 to 6 fraction digits, trailing zeros
    trimmed (``2024-11-08T12:14:36.1163Z``). Integer arithmetic, so the microsecond is exact. Memoised:
    the same few thousand times are written for every feed page."""
    seconds, fraction = divmod(us, US)
    whole = (EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{whole}.{f'{fraction:06d}'.rstrip('0') or '0'}Z"


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(slots=True)
class User:
    id: str
    handle: str
    first_name: str
    last_name: str
    email: str | None  # None: a chat-only member who cannot sign in here
    password: str | None
    points: int
    level: int
    picture: str
    requires_2fa: bool = False
    requires_captcha: bool = False  # set through the control API (``captcha``); a reset clears it
    private: dict[str, object] = field(default_factory=dict)  # paymentMethods, apiKeys, stripeCustomerId


@dataclass(slots=True)
class Label:
    id: str
    group_id: str
    display_name: str


@dataclass(slots=True)
class Group:
    id: str
    slug: str
    display_name: str
    description: str
    created_us: int
    labels: list[Label]
    members: set[str]

    def label(self, label_id: str) -> Label | None:
        return next((lb for lb in self.labels if lb.id == label_id), None)


@dataclass(slots=True)
class Post:
    """A root post (``post_type`` generic) or a comment/reply (``post_type`` comment)."""

    id: str
    name: str
    post_type: str
    group_id: str
    user_id: str
    root_id: str
    parent_id: str  # "" for a root post
    label_id: str
    created_us: int
    updated_us: int
    title: str
    content: str
    upvotes: int = 0
    pinned: bool = False
    image_preview: str = ""
    deleted: bool = False
    children: list[str] = field(default_factory=list)  # top-level comments of a post, replies of a comment
    # Cached on root posts only, kept up to date when comments come and go.
    num_comments: int = 0
    last_comment_us: int = 0
    last_comment_id: str = ""

    @property
    def is_root(self) -> bool:
        return self.post_type != "comment"

    @property
    def activity_us(self) -> int:
        """The key of the default sort (recent activity): the last comment, else the creation time."""
        return self.last_comment_us or self.created_us


@dataclass(slots=True)
class Message:
    id: str
    channel_id: str
    src: str
    dst: str
    content: str
    created_us: int
    attachments: list[object] = field(default_factory=list)


@dataclass(slots=True)
class Channel:
    id: str
    user_ids: tuple[str, str]
    created_us: int
    messages: list[Message] = field(default_factory=list)
    index: dict[str, int] = field(default_factory=dict)  # message id -> position in ``messages``
    read_upto: dict[str, int] = field(default_factory=dict)  # user id -> messages read (a count)

    @property
    def updated_us(self) -> int:
        return self.messages[-1].created_us if self.messages else self.created_us

    def other(self, user_id: str) -> str:
        a, b = self.user_ids
        return b if a == user_id else a

    def append(self, msg: Message) -> None:
        self.index[msg.id] = len(self.messages)
        self.messages.append(msg)

    def num_unread(self, user_id: str) -> int:
        start = self.read_upto.get(user_id, 0)
        return sum(1 for m in self.messages[start:] if m.src != user_id)


@dataclass(slots=True)
class World:
    """Everything the seed builds and the API changes.

    ``version`` counts the changes to posts (created, commented, deleted): whatever is derived from the
    posts alone (a feed's order, label counts) is kept in ``memo`` for the current version only. Read
    state is not part of it: what depends on the viewer is applied on top of the memoised results.
    """

    seed: int
    now_us: int
    build_id: str
    users: dict[str, User] = field(default_factory=dict)
    groups: dict[str, Group] = field(default_factory=dict)
    posts: dict[str, Post] = field(default_factory=dict)
    group_posts: dict[str, list[str]] = field(default_factory=dict)  # group id -> root post ids
    reads: dict[str, dict[str, int]] = field(default_factory=dict)  # user id -> post id -> read at (us)
    channels: dict[str, Channel] = field(default_factory=dict)
    user_channels: dict[str, list[str]] = field(default_factory=dict)
    pair_channel: dict[frozenset[str], str] = field(default_factory=dict)
    version: int = 0
    _memo: dict[object, Any] = field(default_factory=dict, repr=False)
    _memo_version: int = field(default=0, repr=False)

    def posts_changed(self) -> None:
        """Call after any change to a post (new post or comment, deletion, counts): drops the memo."""
        self.version += 1

    def memo(self, key: object, compute: Callable[[], T]) -> T:
        """``compute()`` for the posts as they are now, computed once per ``version``."""
        if self._memo_version != self.version:
            self._memo.clear()
            self._memo_version = self.version
        try:
            return self._memo[key]
        except KeyError:
            value = self._memo[key] = compute()
            return value

    def user_by_email(self, email: str) -> User | None:
        email = email.strip().lower()
        return next((u for u in self.users.values() if u.email == email), None)

    def user_by_handle_or_id(self, key: str) -> User | None:
        if key in self.users:
            return self.users[key]
        return next((u for u in self.users.values() if u.handle == key), None)

    def group_by_slug(self, slug: str) -> Group | None:
        return next((g for g in self.groups.values() if g.slug == slug), None)

    def add_post(self, post: Post) -> None:
        self.posts_changed()
        self.posts[post.id] = post
        if post.is_root:
            self.group_posts.setdefault(post.group_id, []).append(post.id)
            return
        self.posts[post.parent_id].children.append(post.id)
        root = self.posts[post.root_id]
        if post.parent_id == post.root_id:  # ``metadata.comments`` counts top-level comments (PLATFORM.md)
            root.num_comments += 1
        if post.created_us >= root.last_comment_us:
            root.last_comment_us, root.last_comment_id = post.created_us, post.id

    def add_channel(self, channel: Channel) -> None:
        self.channels[channel.id] = channel
        for uid in channel.user_ids:
            self.user_channels.setdefault(uid, []).append(channel.id)
        self.pair_channel[frozenset(channel.user_ids)] = channel.id
