"""What the example scripts share: one request to the Community Data API, its refusals met as a script
should meet them. Only ``requests`` is needed.

- 429 ``rate_limited`` is waited out for its ``Retry-After`` (the pace keeps the platform account safe: a
  retry sooner is refused again), ``WAITS`` times at most and never longer than ``LONGEST_WAIT``, then
  reported; so is a 503 that carries a ``Retry-After`` (no browser was free, nothing was sent; or the
  service's storage could not be written): a 503 without one (the platform did not answer in time, and
  after a write may have acted) is reported, never sent again here;
- every other error is ``{"error": {"code", "message", "details"}}``: raised as ``ApiError``, whose message
  says what to do.

The scripts' settings are ``CDA_URL`` and ``CDA_KEY``, not ``COMMUNITY_API_…``: the service refuses a
variable of that prefix it does not know, and one shell may run both.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

import requests

WAITS = 3  # times a 429 (or a 503 with Retry-After) is waited out before giving up
LONGEST_WAIT = 120  # seconds: a longer Retry-After is reported rather than slept through
TIMEOUT = 60  # seconds for an answer: the service answers within about 22 s even when the platform hangs

# What a person should do about an error, by its code.
HINTS = {
    "unauthorized": " (the key is unknown, revoked or rotated: the dashboard's Account page says which)",
    "connection_expired": " (link the platform account again on the dashboard's Connections page)",
}


class ApiError(Exception):
    """An answer of the API that is not a success: its status, error code, message and details."""

    def __init__(self, status: int, code: str, message: str, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(f"{code} ({status}): {message}{HINTS.get(code, '')}")
        self.status, self.code, self.message = status, code, message
        self.details: Mapping[str, Any] = details or {}


def error_of(answer: requests.Response) -> ApiError:
    try:
        error = answer.json()["error"]
        return ApiError(answer.status_code, str(error["code"]), str(error["message"]), error.get("details"))
    except (ValueError, KeyError, TypeError, AttributeError):  # not the API's error body: a proxy's page, say
        return ApiError(answer.status_code, "http_error", answer.text[:200])


def request(
    session: requests.Session,
    method: str,
    url: str,
    *,
    params: Mapping[str, str] | None = None,
    json: Any = None,
    headers: Mapping[str, str] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> requests.Response:
    """Send one request and answer its success, waiting out a 429, or a 503 that says how long, for its
    ``Retry-After``."""
    for attempt in range(WAITS + 1):
        answer = session.request(method, url, params=params, json=json, headers=headers, timeout=TIMEOUT)
        if answer.ok:
            return answer
        error = error_of(answer)
        wait = max(int(answer.headers.get("Retry-After", "0") or 0), 1)
        waitable = answer.status_code == 429 or (answer.status_code == 503 and "Retry-After" in answer.headers)
        if not waitable or attempt == WAITS or wait > LONGEST_WAIT:
            raise error
        print(f"waiting {wait} s: {error.message}", file=sys.stderr, flush=True)
        sleep(wait)
    raise AssertionError("unreachable")  # pragma: no cover


def session_from_environment() -> tuple[requests.Session, str] | None:
    """A session carrying ``CDA_KEY`` and the service's base URL ``CDA_URL``; None when either is unset."""
    base, key = os.environ.get("CDA_URL", "").rstrip("/"), os.environ.get("CDA_KEY", "")
    if not base or not key:
        return None
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {key}"
    return session, base
