"""``SeleniumPlatformGateway``: the ``PlatformGateway`` port served by headless Chromium (DESIGN §4).

The platform has no public API and its firewall only lets real browsers through, so every call is a
``fetch`` made inside a page of the platform, in a browser kept warm per connection (``browser_pool``),
with the connection's session cookie. Pieces: ``page_scripts`` (the JavaScript), ``page_fetch`` (running
it, firewall and build-id renewal, statuses → errors), ``platform_mapping`` (platform JSON → our model),
``platform_client`` (sign-in, retries, caches), ``platform_posts`` (posts and comments),
``platform_dms`` (chat).

Quirks of the real platform handled here (PLATFORM.md):
- feed sorts: our ``newest-cm`` is the site's default (no ``s``); ``unread`` is ``s=newest&fl=unr``;
- every requested feed page is fetched in one script (``Promise.all`` over ``/_next/data``), and the
  pinned posts that lead page 1 and reappear in their own place on page 1 are listed once;
- posts and comments (the comments route's paging, its group, telling a post from a comment before a
  deletion, marking a post read) are ``platform_posts``'s; direct messages ``platform_dms``'s.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import requests
from selenium.webdriver.remote.webdriver import WebDriver

from adapters.platform import platform_mapping as m
from adapters.platform.browser import Browser, local_browser, ready_driver, remote_browser
from adapters.platform.browser_pool import BrowserPool
from adapters.platform.deadline import bounded, within
from adapters.platform.memory_room import MemoryRoom
from adapters.platform.page_fetch import PageRunner, Req
from adapters.platform.platform_answers import Resp, checked_json
from adapters.platform.platform_client import PlatformClient
from adapters.platform.platform_dms import PlatformDms
from adapters.platform.platform_posts import PlatformPosts
from adapters.settings import Settings
from community_api.errors import InvalidRequest, NotFound, PlatformError
from community_api.feed import repeat_keys
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

log = logging.getLogger(__name__)

SORT_QUERY: dict[str, dict[str, str]] = {
    "newest-cm": {},  # the site's own default: recent activity
    "newest": {"s": "newest"},
    "unread": {"s": "newest", "fl": "unr"},  # the site's unread tab only exists with newest
    "best-1d": {"s": "best-1d"},
    "best-1w": {"s": "best-1w"},
    "best-1m": {"s": "best-1m"},
    "best-1y": {"s": "best-1y"},
    "best": {"s": "best"},
}


class SeleniumPlatformGateway:
    def __init__(
        self,
        platform_url: str,
        api_url: str,
        *,
        pool_size: int = 4,
        browser_idle: float = 0.0,
        remote_url: str | None = None,
        timeout: float = 20.0,
        driver_factory: Callable[[], WebDriver] | None = None,
        trusted_spki: tuple[str, ...] = (),
        linked: Callable[[str], bool] | None = None,
    ) -> None:
        """``timeout`` bounds each platform request and each wait for a page; a browser is started by
        ``driver_factory`` when given, else from the Selenium Grid at ``remote_url``, else locally.
        ``trusted_spki``: certificate keys the browser trusts besides the system's (the stand-in's).
        ``browser_idle``: seconds after which an unused browser is closed (0: never).
        ``linked``: whether a connection id is still linked; the unused browser of one that is not (unlinked,
        its account deleted) is closed within about 10 s, its profile holding an erased session."""
        self.platform_url = platform_url.rstrip("/")
        factory: Callable[[], Browser]
        if driver_factory is not None:
            factory = lambda: _custom_browser(driver_factory, timeout)  # noqa: E731
        elif remote_url:
            factory = lambda: remote_browser(remote_url, timeout, trusted_spki)  # noqa: E731
        else:
            factory = lambda: local_browser(timeout, trusted_spki)  # noqa: E731
        # A call waits for the connection's earlier calls, or for a free browser, at most ``timeout``.
        # Local browsers share this machine's memory with the service: none is started that it has no
        # room for (``memory_room.py``). A Grid's browsers live on its nodes, which keep their own count.
        room = MemoryRoom() if driver_factory is None and not remote_url else None
        self._pool = BrowserPool(factory, pool_size, wait=timeout, idle=browser_idle, linked=linked, room=room)
        self._factory, self._remote_url, self._timeout, self._room = factory, remote_url, timeout, room
        self._ready_lock = threading.Lock()
        self._started_fine_at: float | None = None  # when ``ready`` last started a browser that worked
        self._client = PlatformClient(PageRunner(platform_url, api_url, timeout), self._pool, timeout)
        self._posts = PlatformPosts(self._client, self.platform_url)
        self._dms = PlatformDms(self._client)

    @classmethod
    def from_settings(cls, settings: Settings, linked: Callable[[str], bool] | None = None) -> SeleniumPlatformGateway:
        gateway = cls(
            settings.platform_url,
            settings.platform_api_url,
            pool_size=settings.browser_pool_size,
            browser_idle=settings.browser_idle_seconds,
            remote_url=settings.selenium_remote_url or None,
            trusted_spki=settings.browser_trusted_spki,
            linked=linked,
        )
        atexit.register(gateway.close)  # no Chromium outlives the worker process
        return gateway

    def close(self) -> None:
        """Quit every browser of the pool."""
        self._pool.close()

    def ready(self) -> str | None:
        """The Grid's own ``/status`` says ready; locally, a browser is running, or one was started (and
        closed again) within the last ten minutes, or one can be started now."""
        if self._remote_url:
            return grid_ready(self._remote_url, self._timeout)
        if self._pool.live():
            return None
        with self._ready_lock:
            if self._started_fine_at is not None and time.monotonic() - self._started_fine_at < READY_FOR:
                return None
            # Started whatever the memory says (it is the worker's only one), but counted by other starts.
            reservation = self._room(first=True) if self._room is not None else None
            try:
                self._factory().quit()
            except Exception as error:  # noqa: BLE001 - whatever stops a browser from starting
                log.warning("readiness: no browser could be started", exc_info=True)
                return f"no browser could be started ({type(error).__name__})"
            finally:
                if reservation is not None:
                    reservation.release()
            self._started_fine_at = time.monotonic()
            return None

    def browser_pids(self, connection_id: str) -> list[int]:
        """The Chromium processes of a connection's browser ([] if none is running or it is remote)."""
        return self._pool.pids(connection_id)

    def live_browsers(self) -> int:
        return self._pool.live()

    # -- sessions --------------------------------------------------------------------------------------
    # Signing in loads two pages and waits for the platform's answer in between: twice the time-out.
    def login(self, email: str, password: str) -> LinkedAccount:
        with within(2 * self._timeout):
            return self._client.login(email, password)

    def adopt_session(self, session_token: str) -> LinkedAccount:
        with within(2 * self._timeout):
            return self._client.adopt(session_token)

    @bounded
    def whoami(self, session: PlatformSession) -> PlatformUser:
        return self._client.me(session, fresh=True)

    # -- groups ----------------------------------------------------------------------------------------
    @bounded
    def list_groups(self, session: PlatformSession) -> list[Group]:
        records = self._client.my_groups(session)
        label_reqs = [Req("GET", self._client.api("groups", m.text(r, "id"), "labels")) for r in records]
        resps = self._client.call(session, label_reqs) if label_reqs else []
        return [m.group(record, labels=_labels(resp, record)) for record, resp in zip(records, resps, strict=True)]

    @bounded
    def get_group(self, session: PlatformSession, group: str) -> Group:
        ref = self._client.group_ref(session, group)
        info, labels = self._client.call(
            session,
            [Req("GET", self._client.api("groups", ref.id)), Req("GET", self._client.api("groups", ref.id, "labels"))],
        )
        record = m.obj(checked_json(info, f"group {group}"), "group")
        self._client.remember_group(record)
        return m.group(record, labels=_labels(labels, record))

    # -- feed ------------------------------------------------------------------------------------------
    @bounded
    def feed_pages(self, session: PlatformSession, group: str, sort: str, pages: Sequence[int]) -> list[list[Post]]:
        query = SORT_QUERY.get(sort)
        if query is None:
            raise InvalidRequest(f"unknown sort: {sort}")
        if any(page < 1 for page in pages):
            raise InvalidRequest("pages are numbered from 1")
        if not pages:
            return []
        ref = self._client.group_ref(session, group)
        reqs = [Req.data([ref.slug], {"group": ref.slug, "p": page, **query}) for page in pages]
        answer: list[list[Post]] = []
        authors: dict[tuple[Any, ...], PlatformUser] = {}  # a few authors write most posts of a feed
        for page, resp in zip(pages, self._client.call(session, reqs), strict=True):
            props = m.page_props(checked_json(resp, f"group {group}"), f"group {group}")
            about = m.is_about_page(props)
            if about or m.is_signed_out_view(props):
                # Expired, or not a member: ask who the session is. A dead session raises
                # ConnectionExpired here; a live one is not a member of the group.
                self._client.me(session, fresh=True)
                if about:
                    raise NotFound(f"group {group} not found")
                raise PlatformError("the platform showed the feed as to a signed-out visitor, yet the session is alive")
            if "self" not in props:
                # Not a shape we know: a clean 502 rather than marking every connection expired.
                raise PlatformError("unexpected answer from the platform (page data without self)")
            trees = m.items(props.get("postTrees") or [], "postTrees")
            posts = [m.post(tree.get("post"), self.platform_url, ref.slug, authors=authors) for tree in trees]
            if page == 1:  # the pinned posts lead page 1 and may repeat in their own place on it
                posts = _once(posts)
            answer.append(posts)
        self._client.post_groups.put_many((post.id, post.group_id) for posts in answer for post in posts)
        return answer

    # -- posts and comments ----------------------------------------------------------------------------
    @bounded
    def post_detail(self, session: PlatformSession, post_id: str, group: str | None) -> PostDetail:
        return self._posts.post_detail(session, post_id, group)

    @bounded
    def create_post(self, session: PlatformSession, group: str, title: str, content: str, label_id: str | None) -> Post:
        return self._posts.create_post(session, group, title, content, label_id)

    @bounded
    def delete_post(self, session: PlatformSession, post_id: str) -> None:
        self._posts.delete_post(session, post_id)

    @bounded
    def create_comment(
        self,
        session: PlatformSession,
        post_id: str,
        content: str,
        parent_id: str | None,
        group: str | None,
    ) -> Comment:
        return self._posts.create_comment(session, post_id, content, parent_id, group)

    @bounded
    def delete_comment(self, session: PlatformSession, comment_id: str) -> None:
        self._posts.delete_comment(session, comment_id)

    # -- direct messages -------------------------------------------------------------------------------
    @bounded
    def list_conversations(self, session: PlatformSession, offset: int, limit: int) -> list[Conversation]:
        return self._dms.list_conversations(session, offset, limit)

    @bounded
    def get_messages(self, session: PlatformSession, conversation_id: str, before: str | None) -> MessagePage:
        return self._dms.get_messages(session, conversation_id, before)

    @bounded
    def open_conversation(self, session: PlatformSession, user_id: str, group: str | None) -> Conversation:
        return self._dms.open_conversation(session, user_id, group)

    @bounded
    def send_message(self, session: PlatformSession, conversation_id: str, content: str) -> Message:
        return self._dms.send_message(session, conversation_id, content)


# Seconds a browser that started fine vouches for ``ready``: a probe every few seconds on a quiet service,
# whose browsers are closed when idle, starts one at most this often (a second or two of CPU each).
READY_FOR = 600.0


def grid_ready(remote_url: str, timeout: float) -> str | None:
    """A Selenium Grid's ``GET /status``: ``{"value": {"ready": true, …}}`` when a node can take a session."""
    try:
        answer = requests.get(remote_url.rstrip("/") + "/status", timeout=min(timeout, 5.0))
        ready = answer.json().get("value", {}).get("ready") is True
    except (requests.RequestException, ValueError, AttributeError) as error:
        return f"the Selenium Grid does not answer ({type(error).__name__})"
    return None if ready else "the Selenium Grid answers but has no node ready"


def _custom_browser(driver_factory: Callable[[], WebDriver], timeout: float) -> Browser:
    driver = driver_factory()
    ready_driver(driver, timeout)
    return Browser(driver)


def _labels(resp: Resp, group: dict[str, Any]) -> list[dict[str, Any]]:
    data = checked_json(resp, f"group {group.get('id')}")
    return m.items(m.obj(data, "labels").get("labels"), "labels")


def _once(posts: list[Post]) -> list[Post]:
    """Each post once (``feed.repeat_keys``: a pinned post's repeat, under its own id or its slug)."""
    seen: set[str] = set()
    unique = []
    for post in posts:
        keys = repeat_keys(post)
        if not keys & seen:
            unique.append(post)
        seen |= keys
    return unique
