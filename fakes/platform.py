"""``FakePlatformGateway``: an honest in-memory community platform behind the ``PlatformGateway`` port.

It keeps state and enforces the platform's rules as the Selenium gateway reports them (the contract suite
in ``tests/contract`` runs the same cases against both). Seed facts: ``fakes/platform_seed.py``; what it
answers is made from the records by ``fakes/platform_views.py``; its sessions: ``fakes/platform_sessions.py``.

Rules worth knowing:
- a session token comes from ``login``; an unknown or expired one raises ``ConnectionExpired`` on every call
  (``adopt_session`` answers ``InvalidRequest`` instead); ``expire_sessions`` ends a user's sessions;
- a group the user is not a member of is ``NotFound``, like an unknown id; a deleted post is gone
  (feeds, detail, comments); only the author may delete (``Forbidden``);
- a reply to a reply is attached to the top-level comment it belongs to (threads are two deep);
- feeds: 30 posts a page, page 1 led by the pinned posts (their repeat in place on page 1 removed; on
  later pages they stay in place, as the platform serves them); windows of ``best-*`` use the clock;
- opening a conversation needs a shared group; a conversation without messages is not in the inbox.
"""

from __future__ import annotations

import functools
import secrets
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar, cast

import attrs

from community_api import platform_meter
from community_api.clock import SystemClock
from community_api.connections import session_token_ended
from community_api.errors import ConnectionExpired, Forbidden, InvalidRequest, NotFound
from community_api.feed import SORTS
from community_api.model import (
    Comment,
    Conversation,
    Group,
    LinkedAccount,
    Message,
    MessagePage,
    PlatformSession,
    PlatformUser,
    Post,
    PostDetail,
)
from community_api.ports import Clock
from fakes import platform_views as views
from fakes.platform_seed import (
    CommentRec,
    ConversationRec,
    GroupRec,
    PostRec,
    UserRec,
    build_world,
)
from fakes.platform_sessions import SESSION_LIFETIME, FakeSessions

PAGE_SIZE = 30
INBOX_LIMIT = 30
THREAD_PAGE = 30
WINDOWS = {"best-1d": 1, "best-1w": 7, "best-1m": 30, "best-1y": 365}
GATEWAY_METHODS = frozenset(
    {
        "login",
        "adopt_session",
        "whoami",
        "list_groups",
        "get_group",
        "feed_pages",
        "post_detail",
        "create_post",
        "delete_post",
        "create_comment",
        "delete_comment",
        "list_conversations",
        "get_messages",
        "open_conversation",
        "send_message",
    }
)

F = TypeVar("F", bound=Callable[..., Any])


# The requests each call sends the platform (reads, writes), spent on the call's meter before it runs
# (``community_api.platform_meter``). A list of groups is one request, then one per group for its labels
# (PLATFORM.md, "Groups"), and a feed one per page: those two spend what they send themselves.
REQUESTS = {
    "whoami": (1, 0),
    "get_group": (2, 0),  # the group, and its labels
    "post_detail": (2, 0),  # its comments, and its page (which marks it read)
    "create_post": (0, 1),
    "delete_post": (0, 1),
    "create_comment": (0, 1),
    "delete_comment": (0, 1),
    "list_conversations": (1, 0),
    "get_messages": (2, 0),  # the thread, and the inbox page beside it
    "open_conversation": (0, 1),
    "send_message": (0, 1),
}


def _platform_call(method: F) -> F:
    """Count the call, spend its requests on the pace's meter, then raise an error injected by
    ``fail_next`` for it, if one is due (the platform's answer to what was sent)."""
    reads, writes = REQUESTS.get(method.__name__, (0, 0))

    @functools.wraps(method)
    def wrapper(self: FakePlatformGateway, *args: Any, **kwargs: Any) -> Any:
        self.calls[method.__name__] += 1
        platform_meter.spend(reads=reads, writes=writes)
        self._raise_injected(method.__name__)
        return method(self, *args, **kwargs)

    return cast(F, wrapper)


FEED_REQUESTS_KEPT = 1000


class FakePlatformGateway:
    def __init__(self, clock: Clock | None = None, seed: int = 1, signing_key: bytes | None = None) -> None:
        """``signing_key`` makes session tokens self-contained and signed (as the platform's JWT is), so
        several instances — one per gunicorn worker in end-to-end tests — accept each other's sessions."""
        self.clock: Clock = clock or SystemClock()
        self.world = build_world(seed, self.clock.now())
        self.calls: Counter[str] = Counter()
        # The pages asked for, one tuple per feed_pages call: the latest FEED_REQUESTS_KEPT of them, so that a
        # bench serving millions of feeds from this fake measures the service's memory and not this log's.
        self.feed_requests: list[tuple[int, ...]] = []
        self._pages_asked = 0
        self._sessions = FakeSessions(signing_key)
        self.session_lifetime = SESSION_LIFETIME  # of sessions signed in from then on (the stand-in's ``ttl``)
        self._faults: dict[str, list[tuple[BaseException, int]]] = {}
        self._created_posts: list[Post] = []
        self._created_comments: list[Comment] = []
        self._sent: list[Message] = []
        self.not_ready: str | None = None  # tests set a reason to make ``ready`` answer it
        # Groups (slugs) whose pinned posts also lead every later non-empty page, as repeats without their
        # pinned mark: one reported variant (PLATFORM.md; the stand-in serves it in night-owls).
        self.pinned_on_every_page: set[str] = set()
        # Users (handles) whose conversations name the other member without a handle: the platform promises
        # a channel's member only as first and last name beside ``user_ids`` (PLATFORM.md; the stand-in
        # serves carol so, and the gateway then reports an empty handle).
        self.members_without_handle: set[str] = set()

    def ready(self) -> str | None:
        return self.not_ready

    # --- helpers for tests --------------------------------------------------------------------------
    def fail_next(self, method_name: str, error: BaseException, times: int = 1) -> None:
        """Raise ``error`` on the next ``times`` calls of ``method_name`` (after any already queued)."""
        if method_name not in GATEWAY_METHODS:
            raise ValueError(f"not a PlatformGateway method: {method_name}")
        self._faults.setdefault(method_name, []).append((error, times))

    def _raise_injected(self, name: str) -> None:
        queue = self._faults.get(name)
        if not queue:
            return
        error, remaining = queue[0]
        if remaining <= 1:
            queue.pop(0)
        else:
            queue[0] = (error, remaining - 1)
        raise error

    def expire_sessions(self, user_id: str) -> None:
        """End every session of a user (an id, or a handle for convenience)."""
        uid = self._user_rec(user_id).id
        self._sessions.expire(uid)

    def session_for(self, handle: str, connection_id: str = "con_fake") -> PlatformSession:
        """A fresh session of a seeded user, as ``login`` would give, for tests that skip the login."""
        return PlatformSession(connection_id=connection_id, token=self.token_for(handle))

    def token_for(self, handle: str, lifetime: timedelta = SESSION_LIFETIME) -> str:
        """A session token of a seeded user issued now, ending ``lifetime`` later (negative: already ended)."""
        return self._sessions.new(self._user_rec(handle).id, self.clock.now(), lifetime)

    def user(self, handle_or_id: str) -> PlatformUser:
        return views.public_user(self.world, self._user_rec(handle_or_id).id)

    def created_posts(self) -> list[Post]:
        """Posts created through the gateway, in order, as the platform stored them (with author)."""
        return list(self._created_posts)

    def created_comments(self) -> list[Comment]:
        return list(self._created_comments)

    def sent_messages(self) -> list[Message]:
        return list(self._sent)

    def pages_asked(self) -> int:
        """Feed pages asked for since the fake was made, all of them."""
        return self._pages_asked

    # --- sessions -----------------------------------------------------------------------------------
    @_platform_call
    def login(self, email: str, password: str) -> LinkedAccount:
        wanted = email.strip().casefold()
        user = next((u for u in self.world.users.values() if u.email == wanted), None)
        if user is None or not secrets.compare_digest(user.password.encode(), password.encode()):
            raise InvalidRequest("the platform refused the login: wrong email or password")
        token = self._sessions.new(user.id, self.clock.now(), self.session_lifetime)
        return LinkedAccount(views.public_user(self.world, user.id), token, self._sessions.ends(token))

    @_platform_call
    def adopt_session(self, session_token: str) -> LinkedAccount:
        now, ends = self.clock.now(), self._sessions.ends(session_token)
        if ends is not None and ends <= now:
            raise session_token_ended(ends)  # as the real gateway: the token itself says it is over
        user_id = self._sessions.user_of(session_token, now)
        if user_id is None:
            raise InvalidRequest("the platform session token is not valid (unknown or expired)")
        return LinkedAccount(views.public_user(self.world, user_id), session_token, ends)

    @_platform_call
    def whoami(self, session: PlatformSession) -> PlatformUser:
        return views.public_user(self.world, self._me(session))

    # --- groups -------------------------------------------------------------------------------------
    @_platform_call
    def list_groups(self, session: PlatformSession) -> list[Group]:
        platform_meter.spend(reads=1)  # the list
        me = self._me(session)
        groups = [g for g in self.world.groups.values() if me in g.members]
        platform_meter.spend(reads=len(groups))  # each group's labels
        return [views.group_view(self.world, g) for g in groups]

    @_platform_call
    def get_group(self, session: PlatformSession, group: str) -> Group:
        return views.group_view(self.world, self._group_rec(self._me(session), group))

    # --- feed ---------------------------------------------------------------------------------------
    @_platform_call
    def feed_pages(self, session: PlatformSession, group: str, sort: str, pages: Sequence[int]) -> list[list[Post]]:
        me = self._me(session)
        grp = self._group_rec(me, group)
        if sort not in SORTS:
            raise InvalidRequest(f"unknown sort: {sort}")
        if any(page < 1 for page in pages):
            raise InvalidRequest("pages are numbered from 1")
        platform_meter.spend(reads=len(pages))
        self.feed_requests.append(tuple(pages))
        self._pages_asked += len(pages)
        if len(self.feed_requests) > FEED_REQUESTS_KEPT:
            del self.feed_requests[: len(self.feed_requests) - FEED_REQUESTS_KEPT]
        pinned, ordered = self._ordered(me, grp, sort)
        answer: list[list[Post]] = []
        for page in pages:
            chunk = ordered[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
            if page == 1:
                chunk = pinned + [p for p in chunk if not p.pinned]
            posts = [views.post_view(self.world, p) for p in chunk]
            if page > 1 and posts and grp.slug in self.pinned_on_every_page:
                posts = [attrs.evolve(views.post_view(self.world, p), pinned=False) for p in pinned] + posts
            answer.append(posts)
        return answer

    def _ordered(self, me: str, grp: GroupRec, sort: str) -> tuple[list[PostRec], list[PostRec]]:
        read = self.world.reads.get(me, set())
        posts = [p for p in self.world.posts.values() if p.group_id == grp.id and not p.deleted]
        if sort == "unread":
            posts = [p for p in posts if p.id not in read]
        pinned = sorted((p for p in posts if p.pinned), key=lambda p: (p.created_at, p.id), reverse=True)
        if sort in WINDOWS:
            start = self.clock.now() - timedelta(days=WINDOWS[sort])
            posts = [p for p in posts if p.created_at >= start]
        if sort in ("newest", "unread"):
            posts.sort(key=lambda p: (p.created_at, p.id), reverse=True)
        elif sort == "newest-cm":
            posts.sort(key=lambda p: (self._activity(p), p.created_at, p.id), reverse=True)
        else:
            posts.sort(key=lambda p: (p.upvotes, p.created_at, p.id), reverse=True)
        return pinned, posts

    def _activity(self, post: PostRec) -> datetime:
        times = [c.created_at for c in views.live_comments(self.world, post.id)]
        return max(times, default=post.created_at)

    # --- posts and comments -------------------------------------------------------------------------
    @_platform_call
    def post_detail(self, session: PlatformSession, post_id: str, group: str | None) -> PostDetail:
        me = self._me(session)
        post = self._post_rec(me, post_id, group)
        self.world.reads.setdefault(me, set()).add(post.id)
        comments = tuple(views.comment_view(self.world, c) for c in views.live_comments(self.world, post.id))
        return PostDetail(post=views.post_view(self.world, post), comments=comments)

    @_platform_call
    def create_post(self, session: PlatformSession, group: str, title: str, content: str, label_id: str | None) -> Post:
        me = self._me(session)
        grp = self._group_rec(me, group)
        if not title.strip():
            raise InvalidRequest("a post needs a title")
        if label_id is None:
            label_id = grp.labels[0].id  # the group's default category
        elif label_id not in {label.id for label in grp.labels}:
            raise InvalidRequest("cannot post to this label")
        post = PostRec(
            id=self.world.next_id("pst"),
            group_id=grp.id,
            author_id=me,
            title=title.strip(),
            content=content.strip(),
            label_id=label_id,
            created_at=self.clock.now(),
        )
        self.world.posts[post.id] = post
        self.world.reads.setdefault(me, set()).add(post.id)  # one has read what one wrote
        stored = views.post_view(self.world, post)
        self._created_posts.append(stored)
        return attrs.evolve(stored, author=None, author_id=None)

    @_platform_call
    def delete_post(self, session: PlatformSession, post_id: str) -> None:
        me = self._me(session)
        post = self._post_rec(me, post_id, None)
        if post.author_id != me:
            raise Forbidden("must be admin or level 5 to do this")
        post.deleted = True

    @_platform_call
    def create_comment(
        self,
        session: PlatformSession,
        post_id: str,
        content: str,
        parent_id: str | None,
        group: str | None,
    ) -> Comment:
        me = self._me(session)
        post = self._post_rec(me, post_id, group)
        if not content.strip():
            raise InvalidRequest("a comment needs content")
        if parent_id is not None:
            parent = self.world.comments.get(parent_id)
            if parent is None or parent.deleted or parent.post_id != post.id or not views.is_live(self.world, parent):
                raise InvalidRequest("invalid parent: not a comment of this post", field="parentId")
            parent_id = parent.parent_id or parent.id  # two deep: a reply to a reply joins its thread
        comment = CommentRec(
            id=self.world.next_id("cmt"),
            post_id=post.id,
            parent_id=parent_id,
            author_id=me,
            content=content.strip(),
            created_at=self.clock.now(),
        )
        self.world.add_comment(comment)
        view = views.comment_view(self.world, comment)
        self._created_comments.append(view)
        return view

    @_platform_call
    def delete_comment(self, session: PlatformSession, comment_id: str) -> None:
        me = self._me(session)
        comment = self.world.comments.get(comment_id)
        if comment is None or not views.is_live(self.world, comment):
            raise NotFound(f"no comment {comment_id}")
        self._post_rec(me, comment.post_id, None)  # membership, and the post must still be there
        if comment.author_id != me:
            raise Forbidden("must be admin or level 5 to do this")
        comment.deleted = True  # its replies go with it (see ``_is_live``)

    def _post_rec(self, me: str, post_id: str, group: str | None) -> PostRec:
        post = self.world.posts.get(post_id)
        if post is None or post.deleted:
            raise NotFound(f"no post {post_id}")
        grp = self.world.groups[post.group_id]
        if me not in grp.members or (group is not None and group not in (grp.id, grp.slug)):
            raise NotFound(f"no post {post_id}")
        return post

    # --- direct messages ----------------------------------------------------------------------------
    @_platform_call
    def list_conversations(self, session: PlatformSession, offset: int, limit: int) -> list[Conversation]:
        me = self._me(session)
        if limit < 1 or limit > INBOX_LIMIT:
            raise InvalidRequest("invalid limit")
        if offset < 0:
            raise InvalidRequest("invalid offset")
        mine = [c for c in self.world.conversations.values() if me in c.user_ids and c.messages]
        mine.sort(key=lambda c: (c.messages[-1].created_at, c.id), reverse=True)
        return [self._conversation_view(c, me) for c in mine[offset : offset + limit]]

    @_platform_call
    def get_messages(self, session: PlatformSession, conversation_id: str, before: str | None) -> MessagePage:
        me = self._me(session)
        conv = self._conversation_rec(me, conversation_id)
        end = len(conv.messages)
        if before is not None:
            end = next((i for i, m in enumerate(conv.messages) if m.id == before), -1)
            if end < 0:
                raise NotFound(f"message {before} in conversation {conversation_id} not found")
        start = max(0, end - THREAD_PAGE)
        messages = tuple(views.message_view(m) for m in conv.messages[start:end])
        return MessagePage(self._conversation_view(conv, me), messages, has_older=start > 0)

    @_platform_call
    def open_conversation(self, session: PlatformSession, user_id: str, group: str | None) -> Conversation:
        me = self._me(session)
        other = self.world.users.get(user_id)
        if other is None:
            raise NotFound(f"no user {user_id}")
        if other.id == me:
            raise InvalidRequest("cannot open a conversation with yourself", field="to")
        shared = [self._group_rec(me, group)] if group is not None else list(self.world.groups.values())
        if not any(me in g.members and other.id in g.members for g in shared):
            raise NotFound(f"no user {user_id} in a group you share")
        conv = next((c for c in self.world.conversations.values() if set(c.user_ids) == {me, other.id}), None)
        if conv is None:
            conv = self.world.add_conversation(me, other.id, self.clock.now())
        return self._conversation_view(conv, me)

    @_platform_call
    def send_message(self, session: PlatformSession, conversation_id: str, content: str) -> Message:
        me = self._me(session)
        conv = self._conversation_rec(me, conversation_id)
        if not content.strip():
            raise InvalidRequest("a message needs content")
        message = views.message_view(self.world.add_message(conv, me, content, self.clock.now()))
        self._sent.append(message)
        return message

    def _conversation_rec(self, me: str, conversation_id: str) -> ConversationRec:
        conv = self.world.conversations.get(conversation_id)
        if conv is None or me not in conv.user_ids:
            raise NotFound(f"no conversation {conversation_id}")
        return conv

    # --- look-ups and views -------------------------------------------------------------------------
    def _me(self, session: PlatformSession) -> str:
        user_id = self._sessions.user_of(session.token, self.clock.now())
        if user_id is None:
            raise ConnectionExpired("the platform session has expired: link the account again")
        return user_id

    def _user_rec(self, handle_or_id: str) -> UserRec:
        users = self.world.users
        found = users.get(handle_or_id) or next((u for u in users.values() if u.handle == handle_or_id), None)
        if found is None:
            raise KeyError(f"no seeded user {handle_or_id}")
        return found

    def _group_rec(self, me: str, group: str) -> GroupRec:
        grp = self.world.groups.get(group) or next((g for g in self.world.groups.values() if g.slug == group), None)
        if grp is None or me not in grp.members:
            raise NotFound(f"no group {group}")
        return grp

    def _conversation_view(self, conv: ConversationRec, me: str) -> Conversation:
        return views.conversation_view(self.world, conv, me, self.members_without_handle)
