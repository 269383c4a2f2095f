"""Requests made from inside the platform's page (their answers: ``platform_answers``).

``PageRunner`` readies a browser (a page of the platform loaded, its firewall token obtained, the session
cookie set) and runs a batch of requests in one ``execute_async_script``. Two quirks of the real site are
handled here, invisibly to the caller, by loading an HTML page again and re-running the affected
requests once:
- a 403 HTML "Request blocked" page: the firewall token expired (it lives about a day). Re-running is
  safe even for writes: the firewall stopped the request before the platform saw it.
- a 404 HTML page from ``/_next/data/{buildId}/…``: the site was deployed and the build id is stale
  (``/_next/data`` is only read, so re-running is safe).
"""

from __future__ import annotations

import base64
import json
import logging
import zlib
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlencode, urlsplit

import attrs
import orjson
from selenium.common.exceptions import WebDriverException
from urllib3.exceptions import HTTPError as Urllib3Error

from adapters.metrics import PLATFORM_REQUESTS
from adapters.platform import page_scripts, platform_urls
from adapters.platform.browser import Browser, BrowserFailure
from adapters.platform.deadline import remaining
from adapters.platform.platform_answers import Resp
from community_api import platform_meter
from community_api.errors import (
    InvalidRequest,
    PlatformError,
    PlatformUnavailable,
)

log = logging.getLogger(__name__)

SESSION_COOKIE = "auth_token"
# An HTML page of the platform that every visitor may load: it carries the firewall script and
# ``__NEXT_DATA__``. Signed in, the real site may redirect it to the home page, which carries both too.
READY_PATH = "/login"
# What a dead browser or driver raises: Selenium's own errors, and the HTTP client's when chromedriver
# itself is gone.
DRIVER_ERRORS = (WebDriverException, Urllib3Error, OSError)
# Answers whose bodies hold this many bytes or more are gzipped in the page before they leave the
# browser (``page_scripts.FETCH_ALL``): above it, packing costs less than the transfer it saves.
PACK_MIN_BYTES = 64 * 1024
# How much longer than the call's time left a driver command may take: enough for an in-page script that
# stopped itself at the deadline to report back.
COMMAND_GRACE = 2.0
# chromedriver keeps a handle, inside the page, on the result of every script it runs (V8 lists them
# as "DevTools console" handles), and never lets them go while the page lives: each answer brought out
# of the page stays in the renderer's memory. Measured with the stand-in (one browser, a feed read in a
# loop): the renderer grew from 94 to 268 MiB over 4,000 one-page reads, and the browser to 1.4 GiB
# over 16,000 mixed reads, without end. Loading the page again drops them all, so a page is loaded
# afresh (``renew``: about as long as one read) once this much has come out of it, or after this many
# scripts, whichever comes first. See docs/performance.md, "A warm browser's memory over a day".
RELOAD_AFTER_BYTES = 32 * 1024 * 1024
RELOAD_AFTER_SCRIPTS = 1000
GZIP_WBITS = 16 + zlib.MAX_WBITS
UTF8_BOM = b"\xef\xbb\xbf"


@attrs.frozen
class Req:
    """One request. ``data_path`` (page data) is resolved against ``/_next/data/{buildId}`` when run."""

    method: str
    url: str = ""
    body: Any = None
    data_path: str | None = None

    @classmethod
    def data(cls, segments: Sequence[str], query: Mapping[str, object]) -> Req:
        """Page data of the page at ``/{segments…}``: ``/_next/data/{buildId}/{segments…}.json?{query}``.
        The last segment is encoded before ``.json`` is added, so it cannot end the path early."""
        *head, last = segments
        return cls("GET", data_path=f"{platform_urls.path(*head, last)}.json?{urlencode(query)}")


class PageRunner:
    def __init__(self, platform_url: str, api_url: str, timeout: float) -> None:
        self.platform_url = platform_url.rstrip("/")
        self.api_url = api_url.rstrip("/")
        self.timeout = timeout
        parts = urlsplit(self.platform_url)
        self.secure = parts.scheme == "https"
        self.cookie_domain = _cookie_domain(parts.hostname or "", urlsplit(self.api_url).hostname or "")

    def api(self, *segments: str, query: Mapping[str, object] | None = None) -> str:
        """An api2 URL: every segment percent-encoded, dot segments refused (``platform_urls``)."""
        return platform_urls.url(self.api_url, *segments, query=query)

    # -- readying a browser ----------------------------------------------------------------------------
    def time_left(self, browser: Browser) -> float:
        """Seconds left of the call's deadline (``deadline.py``), and the browser's commands bounded by them:
        none may outlast it by more than ``COMMAND_GRACE``. Past the deadline the call ends here."""
        left = remaining(self.timeout)
        if left <= 0:
            raise PlatformUnavailable("the platform did not answer in the time allowed")
        browser.limit(left + COMMAND_GRACE)
        return left

    def prepare(self, browser: Browser, token: str, *, check_alive: bool = False) -> None:
        """Be on a page of the platform with its firewall token, and with ``token`` as the session.
        ``check_alive`` makes sure the browser answers before a write is sent: a browser that died while
        idle then fails here, where running the write on a fresh one cannot send it twice."""
        self.time_left(browser)
        if not browser.on_origin or worn(browser):
            self.renew(browser)
        elif check_alive:
            try:
                browser.driver.execute_script("return 1")
                browser.scripts += 1  # its answer stays in the page too
            except DRIVER_ERRORS as error:
                raise BrowserFailure(f"the browser does not answer: {type(error).__name__}") from error
        if browser.token != token:
            self.set_session(browser, token)

    def set_session(self, browser: Browser, token: str) -> None:
        cookie: dict[str, Any] = {
            "name": SESSION_COOKIE,
            "value": token,
            "path": "/",
            "httpOnly": True,
            "secure": self.secure,
            "sameSite": "Lax",
        }
        if self.cookie_domain:
            cookie["domain"] = self.cookie_domain
        try:
            browser.driver.delete_cookie(SESSION_COOKIE)
            browser.driver.add_cookie(cookie)
        except WebDriverException as error:
            if _is_cookie_refusal(error):
                raise InvalidRequest("the platform session token is not a valid cookie value") from None
            raise BrowserFailure(f"setting the session cookie failed: {type(error).__name__}") from error
        except DRIVER_ERRORS as error:
            raise BrowserFailure(f"setting the session cookie failed: {type(error).__name__}") from error
        browser.token = token

    def renew(self, browser: Browser) -> None:
        """Load an HTML page: it runs the firewall script (a fresh token) and names the current build."""
        browser.on_origin = False
        try:
            self.time_left(browser)
            browser.driver.get(self.platform_url + READY_PATH)
            state = browser.driver.execute_async_script(page_scripts.WAIT_READY, int(self.time_left(browser) * 1000))
        except DRIVER_ERRORS as error:
            raise BrowserFailure(f"loading a platform page failed: {type(error).__name__}") from error
        if not isinstance(state, dict) or not state.get("ok"):
            raise PlatformUnavailable("the platform's page did not pass its firewall check in time")
        build_id = state.get("buildId")
        browser.build_id = build_id if isinstance(build_id, str) and build_id else None
        browser.on_origin = True
        browser.scripts = browser.carried = 0

    # -- running requests ------------------------------------------------------------------------------
    def fetch(self, browser: Browser, reqs: Sequence[Req]) -> list[Resp]:
        """Run ``reqs`` at once; renew the firewall token or the build id once if the answers say so."""
        resps = self._run(browser, reqs)
        redo = [
            i
            for i, (req, resp) in enumerate(zip(reqs, resps, strict=True))
            if resp.blocked or (req.data_path is not None and resp.status == 404 and resp.is_html)
        ]
        if redo:
            # A stale build's 404 reached the platform (a block page is the firewall's: the platform never
            # saw that request), so asking again is one more read of the account's pace.
            spend([reqs[i] for i in redo if not resps[i].blocked])
            self.renew(browser)
            again = self._run(browser, [reqs[i] for i in redo])
            for i, resp in zip(redo, again, strict=True):
                resps[i] = resp
        return resps

    def _run(self, browser: Browser, reqs: Sequence[Req]) -> list[Resp]:
        if not reqs:
            return []
        payload = [
            {
                "url": self._url(browser, r),
                "method": r.method,
                "body": None if r.body is None else json.dumps(r.body),
                # Next.js' client router marks its page-data requests with this header.
                "headers": {"x-nextjs-data": "1"} if r.data_path is not None else {},
            }
            for r in reqs
        ]
        left = self.time_left(browser)  # the in-page fetches stop themselves when the call's time is up
        try:
            answers = browser.driver.execute_async_script(
                page_scripts.FETCH_ALL, payload, int(left * 1000), PACK_MIN_BYTES
            )
        except DRIVER_ERRORS as error:
            raise BrowserFailure(f"the in-page request failed: {type(error).__name__}") from error
        browser.scripts += 1
        browser.carried += _size(answers)
        if isinstance(answers, dict) and "packed" in answers:
            return unpack(answers["packed"], len(reqs))
        if not isinstance(answers, list) or len(answers) != len(reqs):
            raise BrowserFailure("the in-page request script answered nonsense")
        return [_plain(answer) for answer in answers]

    def _url(self, browser: Browser, req: Req) -> str:
        if req.data_path is None:
            return req.url
        if browser.build_id is None:
            raise PlatformError("the platform's page names no build id (__NEXT_DATA__ missing)")
        return f"{self.platform_url}/_next/data/{platform_urls.segment(browser.build_id)}{req.data_path}"


def spend(reqs: Sequence[Req]) -> None:
    """Count ``reqs``, about to be sent, on the call's meter (``RateLimited``: send none of them: a GET is a
    read, anything else a write), then in the metrics."""
    reads = sum(1 for req in reqs if req.method == "GET")
    writes = len(reqs) - reads
    platform_meter.spend(reads=reads, writes=writes)
    if reads:
        PLATFORM_REQUESTS.labels("read").inc(reads)
    if writes:
        PLATFORM_REQUESTS.labels("write").inc(writes)


def worn(browser: Browser) -> bool:
    """Has so much come out of the page since it was loaded that its memory should be given back?
    (``RELOAD_AFTER_BYTES``)"""
    return browser.carried >= RELOAD_AFTER_BYTES or browser.scripts >= RELOAD_AFTER_SCRIPTS


def _size(answers: object) -> int:
    """About how many characters an answer of ``FETCH_ALL`` holds (what the page keeps of it)."""
    if isinstance(answers, dict):
        packed = answers.get("packed")
        return len(packed) if isinstance(packed, str) else 0
    if isinstance(answers, list):
        texts = (a.get("text") for a in answers if isinstance(a, dict))
        return sum(len(text) for text in texts if isinstance(text, str))  # anything else is read as "" (``_plain``)
    return 0


def unpack(packed: object, count: int) -> list[Resp]:
    """The ``count`` answers the page packed (``page_scripts.FETCH_ALL``), in the order of the requests:
    base64 of a gzip of frames, each the JSON line ``[index, status, contentType, error, byteLength]``
    followed by that many bytes of body. A body stays bytes (UTF-8, its byte-order mark dropped as
    ``Response.text()`` drops it): ``Resp`` decodes it only if its text is asked for."""
    try:
        if not isinstance(packed, str):
            raise ValueError("not a string")
        raw = zlib.decompress(base64.b64decode(packed, validate=True), wbits=GZIP_WBITS)
    except (ValueError, zlib.error) as error:  # binascii.Error is a ValueError
        raise BrowserFailure(f"the in-page request script answered a broken package: {error}") from None
    answers: list[Resp | None] = [None] * count
    pos = 0
    while pos < len(raw):
        end = raw.find(b"\n", pos)
        try:
            head = orjson.loads(raw[pos:end]) if end >= 0 else None
        except orjson.JSONDecodeError:
            raise BrowserFailure("the in-page request script answered a broken package") from None
        if not isinstance(head, list) or len(head) != 6:
            raise BrowserFailure("the in-page request script answered a broken package")
        index, status, content_type, failure, size, retry_after = head
        if (
            not isinstance(index, int)
            or not 0 <= index < count
            or answers[index] is not None
            or not isinstance(size, int)
            or not 0 <= size <= len(raw) - end - 1
        ):
            raise BrowserFailure("the in-page request script answered a broken package")
        pos = end + 1 + size
        answers[index] = _resp(status, content_type, raw[end + 1 : pos].removeprefix(UTF8_BOM), failure, retry_after)
    found = [answer for answer in answers if answer is not None]
    if len(found) != count:
        raise BrowserFailure("the in-page request script answered a package with answers missing")
    return found


def _plain(answer: object) -> Resp:
    """An answer as the page gave it unpacked: ``{status, contentType, text, error}``."""
    if not isinstance(answer, dict):
        raise BrowserFailure("the in-page request script answered nonsense")
    text = answer.get("text")
    return _resp(
        answer.get("status"),
        answer.get("contentType"),
        text if isinstance(text, str) else "",
        answer.get("error"),
        answer.get("retryAfter"),
    )


def _resp(status: object, content_type: object, body: str | bytes, error: object, retry_after: object) -> Resp:
    return Resp(
        status=status if isinstance(status, int) else 0,
        content_type=content_type if isinstance(content_type, str) else "",
        body=body,
        error=error if isinstance(error, str) else None,
        retry_after=retry_after if isinstance(retry_after, str) else None,
    )


def _cookie_domain(www_host: str, api_host: str) -> str | None:
    """The session cookie must reach both hosts. On one host (the stand-in) it is a host-only cookie;
    on two (``www.x`` and ``api2.x``) it is set on their shared parent domain, as the platform does."""
    if not www_host or www_host == api_host or www_host.replace(".", "").isdigit():
        return None
    www, api = www_host.split("."), api_host.split(".")
    shared: list[str] = []
    while www and api and www[-1] == api[-1]:
        shared.insert(0, www.pop())
        api.pop()
    return "." + ".".join(shared) if len(shared) >= 2 else None


def _is_cookie_refusal(error: WebDriverException) -> bool:
    text = (error.msg or "").lower()
    return "invalid cookie" in text or "unable to set cookie" in text or "invalid argument" in text
