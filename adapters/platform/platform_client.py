"""The browser side of the gateway: signing in, running calls in a connection's browser, and what it
learns along the way (who a session is, which slug a group id has, which group a post is in).

Retry rules (spec: a retry must never act twice on the platform):
- reads: a 5xx is asked again once; a crashed or hung browser is replaced and the read run again once;
- writes: never run again once sent, except after the firewall's block page, which the platform itself
  never saw (``page_fetch``). A browser failure during a write raises ``PlatformUnavailable`` (outcome
  unknown); one that happens before the write was sent (a browser that died while idle) is replaced and
  the write sent on the fresh browser.
- a request the platform did not answer in time (``timeout``) is not retried: the browser is fine and the
  platform is slow; asking again would only double the client's wait.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import attrs
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.wait import WebDriverWait

from adapters.platform import login_form, page_scripts
from adapters.platform import platform_mapping as m
from adapters.platform.bounded_cache import BoundedCache
from adapters.platform.browser import Browser, BrowserFailure
from adapters.platform.browser_pool import BrowserPool, PoolBusy
from adapters.platform.deadline import remaining
from adapters.platform.page_fetch import DRIVER_ERRORS, SESSION_COOKIE, PageRunner, Req, spend
from adapters.platform.platform_answers import Resp, checked_json, raise_for_status
from adapters.platform.session_token import session_expiry
from community_api.connections import session_token_ended
from community_api.errors import (
    ConnectionExpired,
    InvalidRequest,
    NotFound,
    PlatformError,
    PlatformUnavailable,
    RateLimited,
    ServiceError,
    before_the_write,
)
from community_api.model import LinkedAccount, PlatformSession, PlatformUser

log = logging.getLogger(__name__)
T = TypeVar("T")

GROUPS_PAGE = 30  # the platform's largest page for group lists
# A crashed browser is replaced and the read run again only if this much of the call's time is left: a
# fresh browser takes about a second to start.
MIN_RETRY_SECONDS = 3.0
POLL_SECONDS = 0.1
# Selenium logs every WebDriver command with its body at DEBUG level, typed keys included.
DRIVER_LOGGER = "selenium.webdriver.remote.remote_connection"


@attrs.frozen
class GroupRef:
    id: str
    slug: str


class PlatformClient:
    def __init__(self, runner: PageRunner, pool: BrowserPool, timeout: float) -> None:
        self.page = runner
        self.pool = pool
        self.timeout = timeout
        self._selves: BoundedCache[str, PlatformUser] = BoundedCache(4096)  # sha256(token) -> self
        self._groups: BoundedCache[str, GroupRef] = BoundedCache(8192)  # id or slug -> ref
        self.post_groups: BoundedCache[str, str] = BoundedCache(50_000)  # post id -> group id
        # Ids seen as comments (in a post's tree, or made here) -> their post: such an id is no post, so
        # deleting it needs no look first (``delete_comment``).
        self.comment_posts: BoundedCache[str, str] = BoundedCache(50_000)

    def api(self, *segments: str, query: Mapping[str, object] | None = None) -> str:
        return self.page.api(*segments, query=query)

    # -- calls in a connection's browser -------------------------------------------------------------
    def call(self, session: PlatformSession, reqs: Sequence[Req], *, read: bool = True) -> list[Resp]:
        """Run ``reqs`` at once in the connection's browser and answer their raw answers. Each request is
        counted against the account's pace before it is sent (``platform_meter``; a refusal sends none).

        PLATFORM.md: "an expired platform session can answer 200 with an empty body, or 401" — on any route,
        as far as it says — and a 401 saying "action not permitted" means "not a member". Such an answer
        (``Resp.may_mean_expired``) is not taken to mean either until ``self`` is asked (one read): a dead
        session raises ``ConnectionExpired`` here, so that a read is not taken for a malformed answer nor a
        deletion for one done; a live one marks the answers (``session_alive``), so that a 401 it got is a
        refusal of that request (403) rather than a connection marked expired, which every later request
        of it would answer until the account is linked again. (A 204 is an answer.)"""
        resps = self._send(session, reqs, read=read)
        if any(r.may_mean_expired for r in resps) and all(q.url != self.api("self") for q in reqs):
            try:
                self.me(session, fresh=True)
            except ConnectionExpired:
                raise
            except ServiceError as error:
                if read:
                    raise
                # A write was sent: a check that could not be made (the pace, a time-out) must not turn its
                # answer into "nothing done", which a retry would take as leave to send it again. A 401 was
                # a refusal whichever it meant, but no verdict on the session: not an expired connection,
                # which stays so until the account is linked again. An empty 200 leaves the outcome
                # unknown, a deletion's too.
                if not any(r.status == 200 and r.is_blank for r in resps):
                    status = next(r.status for r in resps if r.may_mean_expired)
                    refused = PlatformError(
                        f"the platform refused the write ({status}) and whether its session is still"
                        f" alive could not be checked ({error.message}): nothing was done"
                    )
                    refused.may_have_acted = False
                    raise refused from error
                unknown = PlatformError(
                    "the platform answered the write with nothing and the session could not be checked:"
                    " it may or may not have been done"
                )
                unknown.may_have_acted = True
                raise unknown from error
            resps = [attrs.evolve(r, session_alive=True) if r.may_mean_expired else r for r in resps]
        return resps

    def _send(self, session: PlatformSession, reqs: Sequence[Req], *, read: bool) -> list[Resp]:
        spend(reqs)
        try:
            with self.pool.lease(session.connection_id) as lease:
                for attempt in (1, 2):
                    sent = False
                    try:
                        browser = lease.browser()
                        if attempt == 2 and read:
                            spend(reqs)  # the first attempt's requests may have reached the platform
                        with before_the_write():  # nothing of ``reqs`` has been sent yet
                            self.page.prepare(browser, session.token, check_alive=not read)
                        sent = True
                        resps = self.page.fetch(browser, reqs)
                        if read:
                            self._retry_server_errors(browser, reqs, resps)
                        return resps
                    except BrowserFailure as error:
                        lease.discard()
                        # A write may run again only if the browser failed before sending anything
                        # (e.g. it had died while idle); either only with time left for a fresh browser.
                        if (read or not sent) and attempt == 1 and remaining(self.timeout) >= MIN_RETRY_SECONDS:
                            log.warning("browser failed (%s): replacing it and trying again", error)
                            continue
                        log.warning("browser failed (%s): browser replaced", error)
                        if read:
                            raise PlatformUnavailable("the browser in front of the platform failed") from None
                        if not sent:
                            unsent = PlatformUnavailable("the browser failed before the write was sent")
                            unsent.may_have_acted = False
                            raise unsent from None
                        raise PlatformUnavailable(
                            "the browser failed during a write: it may or may not have reached the platform"
                        ) from None
        except PoolBusy as error:
            raise _no_browser(error) from None
        raise AssertionError("unreachable")

    def _retry_server_errors(self, browser: Browser, reqs: Sequence[Req], resps: list[Resp]) -> None:
        failed = [i for i, resp in enumerate(resps) if resp.status >= 500]
        if failed:
            try:
                spend([reqs[i] for i in failed])
            except RateLimited:
                return  # no room left in the pace to ask again: the 5xx answers stand
            log.info("platform answered %d on a read: asking again once", resps[failed[0]].status)
            again = self.page.fetch(browser, [reqs[i] for i in failed])
            for i, resp in zip(failed, again, strict=True):
                resps[i] = resp

    def one(self, session: PlatformSession, req: Req, what: str, *, read: bool = True) -> Any:
        return checked_json(self.call(session, [req], read=read)[0], what)

    def act(self, session: PlatformSession, req: Req, what: str) -> None:
        """Send a write whose answer we need nothing from (a deletion; never run twice): any 2xx means
        done, whatever its body — PLATFORM.md does not say what a DELETE answers, and a 204 with no body is
        as likely as ``{}``."""
        raise_for_status(self.call(session, [req], read=False)[0], what)

    def write(self, session: PlatformSession, req: Req, what: str, read_answer: Callable[[Any], T]) -> T:
        """Send a write that creates something (never run twice: ``call``) and read its answer with
        ``read_answer``. An error after the platform got the write says that it may have acted
        (``may_have_acted``): a 5xx (a front end timing out in front of a platform that went on), or a
        2xx answer we cannot read (the thing exists, we cannot describe it)."""
        resp = self.call(session, [req], read=False)[0]
        try:
            raise_for_status(resp, what)
        except PlatformError as error:
            error.may_have_acted = resp.status >= 500
            raise
        try:
            return read_answer(resp.json())
        except PlatformError as error:
            unreadable = PlatformError(f"the platform accepted the write but answered: {error.message}")
            unreadable.may_have_acted = True
            raise unreadable from error

    # -- who the session is --------------------------------------------------------------------------
    def me(self, session: PlatformSession, *, fresh: bool = False) -> PlatformUser:
        """The session's user (cached per token; ``fresh`` asks the platform, which also checks that the
        session is alive)."""
        key = hashlib.sha256(session.token.encode()).hexdigest()
        cached = None if fresh else self._selves.get(key)
        if cached is not None:
            return cached
        resp = self.call(session, [Req("GET", self.api("self"))])[0]
        user = _self_from(resp)
        self._selves.put(key, user)
        return user

    # -- groups --------------------------------------------------------------------------------------
    def my_groups(self, session: PlatformSession) -> list[dict[str, Any]]:
        """The raw group records of the session's user (api2), remembering each id and slug."""
        found = [record for page in self.group_pages(session, self.me(session).id) for record in page]
        for record in found:
            self.remember_group(record)
        return found

    def group_pages(
        self, session: PlatformSession, user_id: str, *, most: int | None = None, what: str = "groups"
    ) -> Iterator[list[dict[str, Any]]]:
        """The groups of ``user_id`` as the platform lists them to the session, a page at a time (at most
        ``most`` pages), each group once. PLATFORM.md gives a group list's answer as ``{groups, has_more}``:
        ``has_more`` is believed when it comes (a page shorter than asked for is then no end: the platform
        may hold pages to less than ``limit``); without it a short page is the end. A page that brings no
        group not seen yet also ends the walk: a platform that disregarded ``offset`` would answer the
        same page for ever, each of them one more read against the pace. ``what`` names the list in errors."""
        seen: set[str] = set()
        offset = pages = 0
        while most is None or pages < most:
            query = {"offset": offset, "limit": GROUPS_PAGE}
            req = Req("GET", self.api("users", user_id, "groups", query=query))
            data = m.obj(self.one(session, req, what), "groups")
            records = m.items(data.get("groups"), "groups")
            fresh = [r for r in records if m.text(r, "id") not in seen]
            seen.update(m.text(r, "id") for r in fresh)
            offset, pages = offset + len(records), pages + 1
            if fresh:
                yield fresh
            more = data.get("has_more", data.get("hasMore"))
            if not isinstance(more, bool | int):  # the platform writes some flags as 0/1
                more = len(records) >= GROUPS_PAGE
            if not (more and fresh):
                return

    def remember_group(self, record: dict[str, Any]) -> GroupRef:
        ref = GroupRef(id=m.text(record, "id"), slug=m.text(record, "name"))
        self._groups.put(ref.id, ref)
        self._groups.put(ref.slug, ref)
        return ref

    def group_ref(self, session: PlatformSession, group: str) -> GroupRef:
        """Id and slug of ``group`` (named by either). Unknown names refresh the user's group list once;
        a group the user is not in is ``NotFound``. A remembered group may still be one the user is not
        in: the platform then refuses the call itself (also ``NotFound``)."""
        ref = self._groups.get(group)
        if ref is None:
            self.my_groups(session)
            ref = self._groups.get(group)
        if ref is None:
            raise NotFound(f"group {group} not found")
        return ref

    # -- signing in ----------------------------------------------------------------------------------
    @contextlib.contextmanager
    def fresh_browser(self) -> Iterator[Browser]:
        """A browser of its own (clean cookie jar) for signing in, counted against the pool's size and
        closed afterwards."""
        started = False
        try:
            with self.pool.temporary() as browser:
                started = True
                yield browser
        except PoolBusy as error:
            if started:
                raise
            raise _no_browser(error) from None
        except BrowserFailure as error:
            if started:
                raise
            raise PlatformUnavailable(f"the browser could not start: {error}") from error

    def login(self, email: str, password: str) -> LinkedAccount:
        email, password = login_form.typeable(email, "email"), login_form.typeable(password, "password")
        with self.fresh_browser() as browser:
            driver = browser.driver
            try:
                driver.get(self.page.platform_url + "/login")
                WebDriverWait(driver, self.timeout).until(
                    expected_conditions.presence_of_element_located(("css selector", "#password"))
                )
                with _quiet_driver_log():  # the typed password would be logged at DEBUG level
                    driver.find_element("css selector", "#email").send_keys(email)
                    driver.find_element("css selector", "#password").send_keys(password)
                driver.find_element("css selector", "button[type='submit']").click()
            except DRIVER_ERRORS as error:
                raise PlatformUnavailable(
                    f"the platform's login page did not work in the browser: {type(error).__name__}"
                ) from None
            token = self._await_login(browser)
            try:
                # Settle on a fresh page (the site navigates away after signing in), then ask who we are.
                browser.token = token
                self.page.renew(browser)
                resp = self.page.fetch(browser, [Req("GET", self.api("self"))])[0]
            except BrowserFailure as error:
                raise PlatformUnavailable(f"the browser failed after login: {error}") from None
            try:
                user = _self_from(resp)
            except ConnectionExpired:
                raise PlatformError("the platform did not accept the session it had just issued") from None
        return LinkedAccount(user=user, session_token=token, session_expires_at=session_expiry(token))

    def _await_login(self, browser: Browser) -> str:
        """Wait (bounded) for the session cookie, a refusal, or a challenge we cannot pass unattended."""
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            try:
                cookie = browser.driver.get_cookie(SESSION_COOKIE)
                if cookie and cookie.get("value"):
                    return str(cookie["value"])
                state = browser.driver.execute_script(page_scripts.LOGIN_STATE)
            except DRIVER_ERRORS:
                state = None  # the page is navigating; look again
            if isinstance(state, dict):
                if state.get("challenge"):
                    raise InvalidRequest(
                        "the platform asks this account for a two-factor code or a captcha, which cannot be "
                        "answered here: link it with a session token instead"
                    )
                invalid = state.get("invalid")
                if isinstance(invalid, dict):
                    raise login_form.not_submitted(invalid)
                error = str(state.get("error") or "")
                if "blocked" in error.lower():
                    raise PlatformError("the platform's firewall blocked the login")
                if error:
                    raise InvalidRequest("the platform refused these credentials (wrong email or password)")
            time.sleep(POLL_SECONDS)
        raise PlatformUnavailable("the platform's login did not finish in time")

    def adopt(self, token: str) -> LinkedAccount:
        if not token.strip() or any(ch in token for ch in ";, \t\r\n"):
            raise InvalidRequest("the platform session token is not valid (unknown or expired)")
        ends = session_expiry(token)
        if ends is not None and ends.timestamp() <= time.time():
            raise session_token_ended(ends)  # no browser started for a session that says it is over
        with self.fresh_browser() as browser:
            try:
                self.page.prepare(browser, token)
                resp = self.page.fetch(browser, [Req("GET", self.api("self"))])[0]
            except BrowserFailure as error:
                raise PlatformUnavailable(f"the browser failed: {error}") from None
            try:
                user = _self_from(resp)
            except ConnectionExpired:
                raise InvalidRequest("the platform session token is not valid (unknown or expired)") from None
        return LinkedAccount(user=user, session_token=token, session_expires_at=ends)


# What a call refused for want of a browser says to wait: the calls holding the browsers end within their
# 20 s deadline, most within a few seconds, and memory freed is looked for twice a second.
BROWSER_RETRY_AFTER = 5


def _no_browser(error: PoolBusy) -> PlatformUnavailable:
    busy = PlatformUnavailable(f"no browser is free: {error}", retryAfter=BROWSER_RETRY_AFTER)
    busy.may_have_acted = False  # nothing was sent: a retry under the same Idempotency-Key may act
    return busy


def _self_from(resp: Resp) -> PlatformUser:
    raise_for_status(resp, "self")
    if resp.is_blank:  # the platform's answer for a dead session: 200 and nothing
        raise ConnectionExpired(m.EXPIRED)
    return m.self_user(resp.text, resp.json())


class _DropAll:
    def filter(self, record: object) -> bool:
        return False


@contextlib.contextmanager
def _quiet_driver_log() -> Iterator[None]:
    logger = logging.getLogger(DRIVER_LOGGER)
    dropper = _DropAll()
    logger.addFilter(dropper)
    try:
        yield
    finally:
        logger.removeFilter(dropper)
