"""``SeleniumPlatformGateway``: the ``PlatformGateway`` port served by headless Chromium (DESIGN §4).

The platform has no public API and its firewall only lets real browsers through, so every call is a
``fetch`` made inside a page of the platform, in a browser kept warm per connection (``browser_pool``),
with the connection's session cookie. Pieces: ``page_scripts`` (the JavaScript), ``page_fetch`` (running
it, firewall and build-id renewal, statuses → errors), ``platform_mapping`` (platform JSON → our model),
``platform_client`` (sign-in, retries, caches), ``platform_dms`` (chat).

Quirks of the real platform handled here (PLATFORM.md):
- feed sorts: our ``newest-cm`` is the site's default (no ``s``); ``unread`` is ``s=newest&fl=unr``;
- every requested feed page is fetched in one script (``Promise.all`` over ``/_next/data``), and the
  pinned posts that lead page 1 and reappear in their own place on page 1 are listed once;
- comments come as a snake_case tree from ``posts/{id}/comments``, 30 top-level comments a call, walked
  with the ``created-gt`` cursor (microseconds); a reply's ``parent_id`` equal to the post means top level;
- that route may need the group (``group-id``). When the caller names none: the group the gateway saw
  the post in (feeds, details), else the route is asked without it, and if the platform refuses that
  (400, 404, or 401 "action not permitted": what it answers without a group is not known) every group of
  the account is asked at once and the one that answers is the post's group;
- ``DELETE posts/{id}`` deletes posts and comments alike, so the kind is checked first with the comments
  route, which answers a post's tree and refuses (404) a comment id; an id already seen as a comment (in a
  post's tree, or made here) is known to be no post, and is deleted without that look;
- reading a post marks it read on the real site only when its page is opened, so ``post_detail`` also
  loads the post's page data (``/_next/data/…/{group}/{post}.json``), as the site's reader does; the
  ``unread`` feed then behaves as on the site.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import requests
from selenium.webdriver.remote.webdriver import WebDriver

from adapters.platform import platform_mapping as m
from adapters.platform.browser import Browser, local_browser, ready_driver, remote_browser
from adapters.platform.browser_pool import BrowserPool
from adapters.platform.deadline import bounded, within
from adapters.platform.page_fetch import PageRunner, Req
from adapters.platform.platform_answers import Resp, checked_json
from adapters.platform.platform_client import PlatformClient
from adapters.platform.platform_created import created_comment, created_post
from adapters.platform.platform_dms import PlatformDms
from adapters.settings import Settings
from community_api.errors import InvalidRequest, NotFound, PlatformError, ServiceError, before_the_write
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
COMMENTS_PAGE = 25  # what every client asks for; 50 and 100 are refused ("invalid limit"; PLATFORM.md)


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
        self._pool = BrowserPool(factory, pool_size, wait=timeout, idle=browser_idle, linked=linked)
        self._factory, self._remote_url, self._timeout = factory, remote_url, timeout
        self._ready_lock = threading.Lock()
        self._started_fine_at: float | None = None  # when ``ready`` last started a browser that worked
        self._client = PlatformClient(PageRunner(platform_url, api_url, timeout), self._pool, timeout)
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
            try:
                self._factory().quit()
            except Exception as error:  # noqa: BLE001 - whatever stops a browser from starting
                log.warning("readiness: no browser could be started", exc_info=True)
                return f"no browser could be started ({type(error).__name__})"
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
            if m.is_about_page(props):
                # Expired, or not a member: ask who the session is. A dead session raises
                # ConnectionExpired here; a live one is not a member of the group.
                self._client.me(session, fresh=True)
                raise NotFound(f"group {group} not found")
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
    def _comments_req(self, post_id: str, group_id: str | None, limit: int, after: int | None = None) -> Req:
        """A page of a post's comments: the first asks for the pinned comment too (``pinned=true``, as
        PLATFORM.md's clients do: it may come apart from the pages), later ones start after ``after``."""
        query: dict[str, object] = {"limit": limit}
        if group_id:
            query["group-id"] = group_id
        if after is None:
            query["pinned"] = "true"
        else:
            query["created-gt"] = after
        return Req("GET", self._client.api("posts", post_id, "comments", query=query))

    def _post_tree(
        self, session: PlatformSession, post_id: str, group: str | None, limit: int = COMMENTS_PAGE
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The first page of a post's tree, and the whole answer it came in (its paging fields); ``NotFound``
        for an unknown post or a comment id."""
        if self._client.comment_posts.get(post_id) is not None:
            raise NotFound(f"post {post_id} not found")  # seen as a comment: no post, and no read to say so
        group_id = self._client.group_ref(session, group).id if group else self._client.post_groups.get(post_id)
        resp = self._client.call(session, [self._comments_req(post_id, group_id, limit)])[0]
        if group_id is None and _refused_without_a_group(resp):
            found = self._ask_every_group(session, post_id, limit)
            if found is None:
                raise NotFound(f"post {post_id} not found")
            resp = found
        data = m.obj(checked_json(resp, f"post {post_id}"), "comments")
        tree = m.obj(data.get("post_tree", data.get("postTree")), "post_tree")
        root = m.obj(tree.get("post"), "post")
        if m.is_comment(root) or m.text(root, "id") != post_id:
            raise NotFound(f"post {post_id} not found")
        self._client.post_groups.put(post_id, m.text(root, "groupId", "group_id"))
        return tree, data

    def _ask_every_group(self, session: PlatformSession, post_id: str, limit: int) -> Resp | None:
        groups = [m.text(g, "id") for g in self._client.my_groups(session)]
        resps = self._client.call(session, [self._comments_req(post_id, g, limit) for g in groups])
        return next((r for r in resps if r.status == 200), None)

    @bounded
    def post_detail(self, session: PlatformSession, post_id: str, group: str | None) -> PostDetail:
        tree, data = self._post_tree(session, post_id, group)
        root = tree["post"]
        slug = self._client.group_ref(session, m.text(root, "groupId", "group_id")).slug
        post = m.post(root, self.platform_url, slug)
        tops = m.items(tree.get("children"), "children")
        pinned = m.pinned_trees(data)
        # Opening the post's page is what marks it read on the site; sent along with the next call.
        name = m.text(root, "name", default="")
        pending = [Req.data([slug, name], {"group": slug, "post": name})] if name else []
        cursor = _next_page(data, tree, post_id)
        while cursor is not None:
            resps = self._client.call(
                session, [self._comments_req(post_id, post.group_id, COMMENTS_PAGE, cursor), *pending]
            )
            pending = []
            data = m.obj(checked_json(resps[0], f"post {post_id}"), "comments")
            page = m.obj(data.get("post_tree", data.get("postTree")), "post_tree")
            tops += m.items(page.get("children"), "children")
            cursor = _next_page(data, page, post_id)
        if pending:
            try:
                self._client.call(session, pending)
            except ServiceError as error:  # the post was read; failing to mark it so is not the client's
                log.info("marking post read failed: %s", error.code)
        comments = tuple(m.flat_comments(tops, pinned, post_id))
        self._client.comment_posts.put_many((c.id, post_id) for c in comments)
        return PostDetail(post=post, comments=comments)

    @bounded
    def create_post(self, session: PlatformSession, group: str, title: str, content: str, label_id: str | None) -> Post:
        with before_the_write():
            ref = self._client.group_ref(session, group)
        body = {
            "post_type": "generic",
            "group_id": ref.id,
            "metadata": {
                "title": title,
                "content": content,
                "labels": label_id or "",
                "attachments": "",
                "action": 0,
                "video_ids": "",
            },
        }
        req = Req("POST", self._client.api("posts", query={"follow": "true"}), body=body)

        def read_answer(data: object) -> Post:  # ``{id, name, …}``, no author
            return created_post(
                data,
                platform_url=self.platform_url,
                slug=ref.slug,
                group_id=ref.id,
                title=title,
                content=content,
                label_id=label_id,
                now=datetime.now(UTC),
            )

        post = self._client.write(session, req, f"group {group}", read_answer)
        self._client.post_groups.put(post.id, post.group_id)
        return post

    @bounded
    def delete_post(self, session: PlatformSession, post_id: str) -> None:
        self._post_tree(session, post_id, None, limit=1)  # NotFound for a comment id
        self._client.act(session, Req("DELETE", self._client.api("posts", post_id)), f"post {post_id}")
        self._client.post_groups.pop(post_id)

    @bounded
    def create_comment(
        self,
        session: PlatformSession,
        post_id: str,
        content: str,
        parent_id: str | None,
        group: str | None,
    ) -> Comment:
        # Checked first: the platform answers a comment id or a post of another group with a 400, which
        # to our clients is an unknown post; this also finds the group the platform wants in the body.
        with before_the_write():
            tree, _ = self._post_tree(session, post_id, group, limit=1)
            me = self._client.me(session)
        if parent_id is not None and self._client.comment_posts.get(parent_id) not in (None, post_id):
            # Seen as a comment of another post: refused here, not left to the platform (which may or may
            # not check it) to file the reply under a thread of another post.
            raise InvalidRequest("invalid parent: not a comment of this post", field="parentId")
        body = {
            "post_type": "comment",
            "group_id": m.text(tree["post"], "groupId", "group_id"),
            "root_id": post_id,
            "parent_id": parent_id or post_id,
            "metadata": {"content": content, "attachments": "", "action": 0, "video_ids": ""},
        }
        req = Req("POST", self._client.api("posts", query={"follow": "true"}), body=body)
        # The answer carries no author; it is the signed-in user.
        comment = self._client.write(
            session,
            req,
            f"post {post_id}",
            lambda data: created_comment(
                data, post_id=post_id, parent_id=parent_id, content=content, author=me, now=datetime.now(UTC)
            ),
        )
        self._client.comment_posts.put(comment.id, post_id)
        return comment

    @bounded
    def delete_comment(self, session: PlatformSession, comment_id: str) -> None:
        # The DELETE takes posts too: an id not known as a comment is first made sure to be no post.
        if self._client.comment_posts.get(comment_id) is None:
            try:
                self._post_tree(session, comment_id, None, limit=1)
            except NotFound:
                pass  # not a post: a comment, or nothing (the DELETE says which)
            else:
                raise NotFound(f"comment {comment_id} not found")
        self._client.act(session, Req("DELETE", self._client.api("posts", comment_id)), f"comment {comment_id}")
        self._client.comment_posts.pop(comment_id)

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


def _refused_without_a_group(resp: Resp) -> bool:
    """Whether the comments route, asked without ``group-id``, refused for want of it as far as we can
    tell. Every client sends it (PLATFORM.md), so what the platform answers without one is not known: a
    400, a 404, or the 401 that means "not a member of that group" may each be that refusal, and the
    post is then looked for in every group (which also keeps ``delete_comment`` from taking a post for
    a comment). A 401 of a dead session, a 429 or a 5xx are not."""
    if resp.status in (400, 404):
        return True
    return resp.status == 401 and "not permitted" in resp.message().lower()


def _next_page(data: dict[str, Any], tree: dict[str, Any], post_id: str) -> int | None:
    """The ``created-gt`` of the next page of top-level comments, or None at the end. The platform's own
    ``meta.has_more`` and ``last`` (microseconds) when it sends them; else a full page means "ask again",
    from the last comment's time."""
    children = m.items(tree.get("children"), "children")
    meta = data.get("meta")
    more = meta.get("has_more") if isinstance(meta, dict) else None
    if not isinstance(more, bool | int):
        more = len(children) >= COMMENTS_PAGE
    if not more or not children:
        return None
    last = data.get("last")
    if isinstance(last, int) and not isinstance(last, bool) and last > 0:
        return last
    return m.micros(m.comment(children[-1].get("post"), post_id).created_at)
