"""A feed's page data that is not the feed: the group's about page in its place, Next's redirect, or the page
as a signed-out visitor sees it (``self`` null). PLATFORM.md: signed out or not a member, "ask ``self`` to
tell which". Each variant is taken for an expired session only once ``self`` says the session is dead — a
connection marked expired answers every later request ``connection_expired`` until the person links the
account again — and for "not a member" only once ``self`` says it is alive."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from adapters.platform.page_fetch import PageRunner, Req
from adapters.platform.platform_answers import Resp
from adapters.platform.platform_client import PlatformClient
from adapters.platform.selenium_platform_gateway import SeleniumPlatformGateway
from community_api.errors import ConnectionExpired, NotFound, PlatformError
from community_api.model import PlatformSession

WWW, API = "https://www.platform.test", "https://api2.platform.test"
SESSION = PlatformSession(connection_id="con_1", token="t")
ALICE = {"id": "a" * 32, "name": "alice", "first_name": "Alice", "last_name": "Andersen"}
GROUP = {"id": "9" * 32, "name": "quiet-garden"}

ABOUT_PAGE = {"pageProps": {"currentGroup": {"id": GROUP["id"]}}, "__N_SSP": True}
REDIRECT = {"pageProps": {"__N_REDIRECT": "/quiet-garden/about", "__N_REDIRECT_STATUS": 307}, "__N_SSP": True}
SIGNED_OUT_VIEW = {"pageProps": {"postTrees": [], "self": None}, "__N_SSP": True}


class CannedFeed(PlatformClient):
    """Answers the feed's page data with ``page``; ``self`` as a live session (alice) or as a dead one (200
    and nothing, as the platform answers)."""

    def __init__(self, page: dict[str, Any], *, alive: bool) -> None:
        super().__init__(PageRunner(WWW, API, timeout=5), pool=None, timeout=5)  # type: ignore[arg-type]
        self.feed_answer, self.alive = page, alive
        self.asked_self = 0
        self.remember_group(GROUP)

    def _send(self, session: PlatformSession, reqs: Sequence[Req], *, read: bool) -> list[Resp]:
        answers = []
        for req in reqs:
            if req.url == f"{API}/self":
                self.asked_self += 1
                answers.append(Resp(200, "application/json", json.dumps(ALICE) if self.alive else ""))
            else:
                assert req.data_path is not None, req
                answers.append(Resp(200, "application/json", json.dumps(self.feed_answer)))
        return answers


def read_feed(page: dict[str, Any], *, alive: bool) -> tuple[SeleniumPlatformGateway, CannedFeed]:
    gateway = SeleniumPlatformGateway(WWW, API, timeout=5)
    gateway._client = canned = CannedFeed(page, alive=alive)
    return gateway, canned


VARIANTS = [ABOUT_PAGE, REDIRECT, SIGNED_OUT_VIEW]
NAMES = ["about-page", "redirect", "signed-out-view"]


@pytest.mark.parametrize("page", VARIANTS, ids=NAMES)
def test_with_a_dead_session_each_is_an_expired_connection(page: dict[str, Any]) -> None:
    gateway, canned = read_feed(page, alive=False)
    with pytest.raises(ConnectionExpired):
        gateway.feed_pages(SESSION, "quiet-garden", "newest", [1])
    assert canned.asked_self == 1


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
    assert canned.asked_self == 1
