"""A feed's page data that is not the feed: the group's about page in its place, Next's redirect, or the page
as a signed-out visitor sees it (``self`` null). PLATFORM.md: signed out or not a member, "ask ``self`` to
tell which". Each variant is taken for an expired session only once ``self`` says the session is dead — a
connection marked expired answers every later request ``connection_expired`` until the person links the
account again — and for "not a member" only once ``self`` says it is alive."""

from __future__ import annotations

import json
from typing import Any

import pytest

from adapters.platform.platform_answers import Resp
from adapters.platform.selenium_platform_gateway import SeleniumPlatformGateway
from community_api.errors import ConnectionExpired, NotFound, PlatformError
from tests.unit.test_platform_empty_answers import API, SESSION, WWW, CannedPlatform

GROUP = {"id": "9" * 32, "name": "quiet-garden"}

ABOUT_PAGE = {"pageProps": {"currentGroup": {"id": GROUP["id"]}}, "__N_SSP": True}
REDIRECT = {"pageProps": {"__N_REDIRECT": "/quiet-garden/about", "__N_REDIRECT_STATUS": 307}, "__N_SSP": True}
SIGNED_OUT_VIEW = {"pageProps": {"postTrees": [], "self": None}, "__N_SSP": True}


def read_feed(page: dict[str, Any], *, alive: bool) -> tuple[SeleniumPlatformGateway, CannedPlatform]:
    """A gateway whose client answers the feed's page data with ``page`` and ``self`` as a live (alice) or a
    dead session (200 and nothing) — ``test_platform_empty_answers``' canned platform."""
    gateway = SeleniumPlatformGateway(WWW, API, timeout=5)
    gateway._client = canned = CannedPlatform(Resp(200, "application/json", json.dumps(page)), alive=alive)
    canned.remember_group(GROUP)
    return gateway, canned


def asked_self(canned: CannedPlatform) -> int:
    return canned.sent.count(("GET", "/self"))


VARIANTS = [ABOUT_PAGE, REDIRECT, SIGNED_OUT_VIEW]
NAMES = ["about-page", "redirect", "signed-out-view"]


@pytest.mark.parametrize("page", VARIANTS, ids=NAMES)
def test_with_a_dead_session_each_is_an_expired_connection(page: dict[str, Any]) -> None:
    gateway, canned = read_feed(page, alive=False)
    with pytest.raises(ConnectionExpired):
        gateway.feed_pages(SESSION, "quiet-garden", "newest", [1])
    assert asked_self(canned) == 1


@pytest.mark.parametrize(
    ("page", "error"),
    [(ABOUT_PAGE, NotFound), (REDIRECT, NotFound), (SIGNED_OUT_VIEW, PlatformError)],
    ids=NAMES,
)
def test_with_a_live_session_none_marks_the_connection_expired(page: dict[str, Any], error: type[Exception]) -> None:
    """The about page or a redirect to it: not a member (404). A signed-out view for a live session is no
    shape PLATFORM.md describes: a 502 that a retry may mend, not a connection to link again."""
    gateway, canned = read_feed(page, alive=True)
    with pytest.raises(error):
        gateway.feed_pages(SESSION, "quiet-garden", "newest", [1])
    assert asked_self(canned) == 1
