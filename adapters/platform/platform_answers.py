"""What the platform's answers mean: ``Resp``, one answer as the page handed it back, and
``raise_for_status``, which turns the platform's statuses into core errors (PLATFORM.md on sessions and
rates). Made by ``page_fetch`` (the requests run inside the platform's page), read by the gateway.
"""

from __future__ import annotations

import json
import logging
import math
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import attrs
import orjson

from adapters.platform.platform_mapping import EXPIRED
from community_api.errors import (
    ConnectionExpired,
    Forbidden,
    InvalidRequest,
    NotFound,
    PlatformError,
    PlatformUnavailable,
    RateLimited,
)

log = logging.getLogger(__name__)

# Seconds a connection is held after the platform's 429 without a usable Retry-After (DESIGN §2), and
# the longest hold any Retry-After may ask for.
DEFAULT_PLATFORM_RETRY_AFTER = 60
MAX_PLATFORM_RETRY_AFTER = 86400


def as_text(body: str | bytes) -> str:
    """A body read as ``Response.text()`` reads it: UTF-8, a broken sequence becoming U+FFFD (``unpack``
    has already dropped a byte-order mark, as the browser does)."""
    return body if isinstance(body, str) else body.decode("utf-8", errors="replace")


def loads(body: str | bytes) -> Any:
    """JSON of the platform, from its text or its UTF-8 bytes. orjson reads a 30-page feed (about 1 MB) in
    well under half of json's time. Where orjson refuses, json is asked, so what came through before
    still does: a lone surrogate (``"\\ud800"``, which ``wire.encode`` knows how to write), NaN, Infinity,
    and invalid UTF-8 (read as U+FFFD, as ``Response.text()`` reads it). One difference is left: an
    integer beyond 64 bits comes as a float. Raises ``ValueError`` or ``RecursionError`` (json, nested
    too deep) for malformed JSON."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return json.loads(as_text(body))


@attrs.frozen
class Resp:
    """One answer. ``body`` is its text or, when the page packed it, the text's UTF-8 bytes as they came:
    page data is parsed straight from them, without a decoded copy. Answers with the same text are equal,
    whichever form they hold."""

    status: int
    content_type: str
    body: str | bytes = attrs.field(eq=as_text)
    error: str | None = None
    retry_after: str | None = None  # the answer's Retry-After header, as the platform wrote it
    # Set when ``self`` answered for the session after this answer came (``PlatformClient.call``): a 401
    # is then a refusal of the request, not an expired session.
    session_alive: bool = False

    @property
    def text(self) -> str:
        return as_text(self.body)

    @property
    def is_html(self) -> bool:
        return "text/html" in self.content_type.lower()

    @property
    def blocked(self) -> bool:
        """The firewall's block page (not a JSON 403 of the platform itself)."""
        return self.status == 403 and self.is_html

    @property
    def may_mean_expired(self) -> bool:
        """An answer an expired session can give (PLATFORM.md): a 200 with nothing in it, or a 401 other
        than "not permitted"."""
        return (self.status == 200 and self.is_blank) or (self.status == 401 and not self.not_a_member)

    @property
    def is_blank(self) -> bool:
        """Nothing but white space in it, read from the body as it came: ``isspace`` stops at the first other
        character, so a page is neither decoded nor copied (``strip`` copies a body ending in a newline)."""
        return not self.body or self.body.isspace()

    @property
    def not_a_member(self) -> bool:
        """The 401 that means "not a member of that group" (PLATFORM.md: "action not permitted"), not an
        expired session."""
        return self.status == 401 and "not permitted" in self.message().lower()

    def json(self) -> Any:
        if self.is_blank:
            raise PlatformError(f"the platform answered {self.status} with nothing in it")
        if "json" not in self.content_type.lower() and not self.text.lstrip().startswith(("{", "[")):
            raise PlatformError(f"the platform answered {self.status} with something other than JSON")
        try:
            return loads(self.body)
        except (ValueError, RecursionError):
            raise PlatformError("the platform answered with malformed JSON") from None

    def message(self) -> str:
        """The platform's ``{"message": …}``, or ''."""
        try:
            data = loads(self.body)
        except (ValueError, RecursionError):
            return ""
        message = data.get("message") if isinstance(data, dict) else None
        return message.strip()[:300] if isinstance(message, str) else ""


class RequestRefused(Exception):
    """The browser refused to make a request we built (it could not parse the URL): a defect of the
    gateway, deliberately not a ``ServiceError``, so that it is logged with its cause and answered 500."""


def platform_retry_after(header: str | None, now: datetime | None = None) -> int:
    """Seconds to hold a connection after the platform's 429: its ``Retry-After`` (seconds or an HTTP
    date, RFC 9110 §10.2.3) when it sends a usable one, else ``DEFAULT_PLATFORM_RETRY_AFTER``. Bounded
    to a day, so a broken header cannot hold an account for ever."""
    value = (header or "").strip()
    seconds: float | None = None
    if value.isascii() and value.isdigit():  # str.isdigit() alone takes "²", which int() refuses
        seconds = int(value)
    elif value:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            when = None
        if when is not None and when.tzinfo is not None:
            seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if seconds is None:
        return DEFAULT_PLATFORM_RETRY_AFTER
    return min(MAX_PLATFORM_RETRY_AFTER, max(1, math.ceil(seconds)))


def raise_for_status(resp: Resp, what: str) -> None:
    """Raise the core error an answer means; return for a 2xx. ``what`` names the thing asked for, e.g.
    "post abc", and appears in NotFound messages."""
    status = resp.status
    if 200 <= status < 300:
        return
    message = resp.message()
    if status == 0:
        if resp.error == "timeout":
            raise PlatformUnavailable("the platform did not answer in time")
        if resp.error and resp.error.startswith("refused:"):
            # The browser would not make the request (a URL it cannot parse): a bug of ours, never an
            # outage of the platform. Not a ServiceError, so it answers 500 and its cause is logged.
            raise RequestRefused(f"the browser refused a platform request we built: {resp.error}")
        log.warning("platform request failed in the browser: %s", resp.error or "no answer")
        raise PlatformUnavailable("the platform could not be reached")
    if status == 401:
        # The platform answers 401 both for a dead session and for "not a member of that group".
        if resp.not_a_member:
            raise NotFound(f"{what} not found")
        if resp.session_alive:  # ``self`` answered: this request was refused, the session lives
            raise Forbidden(message or "the platform does not allow this")
        raise ConnectionExpired(EXPIRED)
    if status == 403:
        if resp.is_html:
            raise PlatformError("the platform's firewall blocked the request")
        raise Forbidden(message or "the platform does not allow this")
    if status == 404:
        raise NotFound(f"{what} not found")
    if status == 429:
        # The account is being told to slow down: pass it on, never retry it (PLATFORM.md, "Rates").
        raise RateLimited(
            "the platform asks this account to slow down; its calls are held until then",
            retry_after=platform_retry_after(resp.retry_after),
            source="platform",
        )
    if 400 <= status < 500:
        raise InvalidRequest(message or f"the platform refused the request ({status})")
    if status >= 500:
        raise PlatformError(f"the platform failed to answer ({status})")
    raise PlatformError(f"unexpected answer from the platform ({status})")


def checked_json(resp: Resp, what: str) -> Any:
    raise_for_status(resp, what)
    return resp.json()
