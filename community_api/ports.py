"""The ports of the core: what it needs from the outside world, and the contract each side keeps.

Adapters implement these Protocols (``adapters/``); ``fakes/`` holds in-memory versions that
keep the same contracts, checked by contract tests run against fake and real alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from community_api.model import (
    Comment,
    Conversation,
    DmQuota,
    Group,
    LinkedAccount,
    Message,
    MessagePage,
    PlatformSession,
    PlatformUser,
    Post,
    PostDetail,
    ReadPace,
    WritePace,
)
from community_api.store_ports import KeyStore, UnitOfWork

__all__ = ["Clock", "KeyStore", "PlatformGateway", "PlatformPace", "Throttle", "UnitOfWork"]


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
        """Check an existing platform session token and say whose it is (``InvalidRequest`` if invalid).
        A token that says it has already ended raises ``connections.session_token_ended`` without asking
        the platform. Here and in ``login``, ``LinkedAccount.session_expires_at`` is when the token says
        the session ends, or None when it does not say."""
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
        ``awaiting_reply`` is left False: the core decides it from ``last_message.sender_id``. ``with_`` is
        the other member: their id and name, their handle when the platform sends it (else empty), or None
        when the platform does not say who it is."""
        ...

    def get_messages(self, session: PlatformSession, conversation_id: str, before: str | None) -> MessagePage:
        """The newest messages of a thread (``before`` None) or those older than message ``before``."""
        ...

    def open_conversation(self, session: PlatformSession, user_id: str, group: str | None) -> Conversation:
        """The conversation with a member (existing or new). ``group`` is a group both belong to;
        None lets the gateway pick one they share. Its ``with_`` is that member (``user_id``), never None:
        their handle and name as far as the platform told them (else empty)."""
        ...

    def send_message(self, session: PlatformSession, conversation_id: str, content: str) -> Message: ...

    def ready(self) -> str | None:
        """None when a browser can be had (one is running, one can be started, or the Grid answers ready);
        else a short reason for an operator, with nothing secret in it. For ``GET /readyz``."""
        ...


# ``details.reason`` of the DM throttle's refusal: POST /v1/dms may also be refused by the write pace (for a
# shorter wait), and a client tells the two apart by it.
DM_THROTTLE = "dm_throttle"


class Throttle(Protocol):
    """The DM throttle of a platform account: one send per drawn gap of 30-45 s (drawn anew after each
    send), 20 per rolling hour, 100 per rolling day. Shared by every worker process of the service.

    It is keyed by the platform account (``platform_user_id``), not by the connection: the platform
    counts by account, and one platform account may be linked by several service accounts (teammates, or
    an account deleted and made again), each link a connection of its own.

    A send is ``reserve``d before it goes to the platform, then ``commit``ted when the platform took it (or
    may have: no answer in time) or ``cancel``led when the platform refused it (a refused send uses no
    quota). Both follow ``reserve`` within seconds: a reservation left unsettled holds the pace gap only.
    Windows exclude their end point: a send exactly one gap (or one hour, one day) later is allowed.
    Of concurrent ``reserve`` calls for one platform account, no more succeed than the limits allow."""

    def reserve(self, platform_user_id: str) -> object:
        """Answer an opaque reservation, or raise ``RateLimited`` with the seconds until the next
        allowed send and ``details.reason`` ``DM_THROTTLE``."""
        ...

    def commit(self, reservation: object) -> None: ...

    def cancel(self, reservation: object) -> None: ...

    def quota(self, platform_user_id: str) -> DmQuota: ...

    def ready(self) -> str | None:
        """None when its shared storage answers; else a short reason (``GET /readyz``)."""
        ...


class PlatformPace(Protocol):
    """How fast one connected account may call the platform, shared by every worker process. It keeps
    the account safe: the platform answers 429 to accounts that read or write too fast, and restricts them.
    Keyed by the platform account (``platform_user_id``), as the platform counts, whatever connection
    (of whichever service account) the call goes through.

    - ``hold``: after the platform's own 429, no platform call of that account is made for the
      seconds it asked; the longer of two holds wins;
    - reads: at most ``reads_per_minute`` platform reads in any 60 s, and writes: at most
      ``writes_per_minute`` in any 60 s, each its own moving window (a request exactly 60 s old still
      counts);
    - ``admit(platform_user_id, reads, writes=0)`` raises ``RateLimited`` when the account is held, or when
      ``reads`` (or ``writes``) more would pass their limit, and then counts nothing. Its ``retry_after`` is
      exact: after that many whole seconds the same call is admitted (if nothing else was), one second
      less is not. Otherwise it counts them; both 0 only checks the hold. A call is reads or writes, never
      both (``ValueError``). A call of more than the whole limit counts as the whole limit, so that it
      can ever pass;
    - ``counted``: the requests of the same kind this platform call has already counted (admitted before
      the call, or sent since: ``platform_meter``). The call as a whole still counts at most the limit:
      once it holds the whole budget, more of it is admitted without counting (the hold still checked).
      A refusal's ``retry_after`` is the wait for the whole call, ``counted`` plus these, since a retry
      sends them all again."""

    def admit(self, platform_user_id: str, reads: int, writes: int = 0, *, counted: int = 0) -> None: ...

    def hold(self, platform_user_id: str, seconds: int) -> None: ...

    def status(self, platform_user_id: str) -> ReadPace: ...

    def write_status(self, platform_user_id: str) -> WritePace: ...

    def ready(self) -> str | None:
        """None when its shared storage answers; else a short reason (``GET /readyz``)."""
        ...
