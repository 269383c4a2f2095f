"""``SeleniumPlatformGateway``'s own reading of the feed and of groups, with a client whose platform is a
table of answers (no browser): each sort asked for as PLATFORM.md writes its query, every page in one
batch, bad pages refused before anything is sent, what the gateway learns of posts and groups kept, no
empty batch for a user in no group, ``whoami`` asking the platform every time, and signing in given twice a
call's time."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from adapters.platform.deadline import remaining
from adapters.platform.page_fetch import PageRunner, Req
from adapters.platform.platform_answers import Resp
from adapters.platform.platform_client import PlatformClient
from adapters.platform.selenium_platform_gateway import SeleniumPlatformGateway
from community_api.errors import InvalidRequest, PlatformError
from community_api.model import PlatformSession
from tests.unit.test_platform_client_send import ok
from tests.unit.test_platform_variants import feed_post

WWW = "https://www.example-community.com"
API = "https://api2.example-community.com"
SESSION = PlatformSession(connection_id="con_1", token="t")
GROUP_ID = "9" * 32
GROUP: dict[str, Any] = {
    "id": GROUP_ID,
    "name": "quiet-garden",
    "metadata": {"display_name": "Quiet Garden", "labels": ""},
}
ALICE = {"id": "a" * 32, "name": "alice", "firstName": "Alice", "lastName": "A"}


class TablePlatform(PlatformClient):
    """Answers ``self``, the user's groups, a group and its labels, and feed page data (``pages``: page number
    -> posts; a page not in it is empty). Records what was sent, each batch apart."""

    def __init__(self, pages: dict[int, list[dict[str, Any]]] | None = None) -> None:
        super().__init__(PageRunner(WWW, API, timeout=5), pool=None, timeout=5)  # type: ignore[arg-type]
        self.pages = pages or {}
        self.batches: list[list[str]] = []
        self.groups = [GROUP]  # the user's

    def _send(self, session: PlatformSession, reqs: Sequence[Req], *, read: bool) -> list[Resp]:
        self.batches.append([req.data_path or req.url.removeprefix(API) for req in reqs])
        return [self._answer(req) for req in reqs]

    def _answer(self, req: Req) -> Resp:
        if req.data_path is not None:
            page = int(parse_qs(urlsplit(req.data_path).query)["p"][0])
            trees = [{"post": post} for post in self.pages.get(page, [])]
            return ok({"pageProps": {"postTrees": trees, "self": ALICE}, "__N_SSP": True})
        path = urlsplit(req.url.removeprefix(API)).path
        if path == "/self":
            return ok(ALICE)
        if path == f"/users/{ALICE['id']}/groups":
            return ok({"groups": self.groups, "has_more": False})
        if path == f"/groups/{GROUP['id']}":
            return ok(GROUP)
        if path == f"/groups/{GROUP['id']}/labels":
            return ok({"labels": []})
        raise AssertionError(f"not a request this test expects: {req}")


def gateway_with(platform: TablePlatform, www: str = WWW) -> SeleniumPlatformGateway:
    gateway = SeleniumPlatformGateway(www, API, timeout=5)
    gateway._client = platform
    return gateway


@pytest.mark.parametrize(
    ("sort", "query"),
    [
        ("newest-cm", {}),  # the site's own default: no ``s``
        ("newest", {"s": ["newest"]}),
        ("unread", {"s": ["newest"], "fl": ["unr"]}),  # PLATFORM.md: unread is ``s=newest&fl=unr``
        ("best-1d", {"s": ["best-1d"]}),
        ("best-1w", {"s": ["best-1w"]}),
        ("best-1m", {"s": ["best-1m"]}),
        ("best-1y", {"s": ["best-1y"]}),
        ("best", {"s": ["best"]}),
    ],
)
def test_each_sort_is_asked_for_as_the_site_writes_it(sort: str, query: dict[str, list[str]]) -> None:
    platform = TablePlatform()
    platform.remember_group(GROUP)
    gateway_with(platform).feed_pages(SESSION, "quiet-garden", sort, [2])
    ((path,),) = platform.batches
    assert urlsplit(path).path == "/quiet-garden.json"
    assert parse_qs(urlsplit(path).query) == {"group": ["quiet-garden"], "p": ["2"], **query}


def test_every_page_asked_for_is_read_in_one_batch_in_the_order_asked() -> None:
    posts = {n: [feed_post(f"{n:032x}", f"post-{n}", pinned=None)] for n in (1, 2, 3)}
    platform = TablePlatform(posts)
    platform.remember_group(GROUP)
    pages = gateway_with(platform).feed_pages(SESSION, "quiet-garden", "newest", [3, 1, 2])
    assert [[post.id for post in page] for page in pages] == [[f"{3:032x}"], [f"{1:032x}"], [f"{2:032x}"]]
    assert len(platform.batches) == 1
    assert [parse_qs(urlsplit(path).query)["p"] for path in platform.batches[0]] == [["3"], ["1"], ["2"]]


@pytest.mark.parametrize("pages", [[0], [1, 0], [-1]])
def test_pages_are_numbered_from_1_and_nothing_is_sent_for_a_bad_one(pages: list[int]) -> None:
    platform = TablePlatform()
    platform.remember_group(GROUP)
    with pytest.raises(InvalidRequest, match="numbered from 1"):
        gateway_with(platform).feed_pages(SESSION, "quiet-garden", "newest", pages)
    assert platform.batches == []


def test_no_page_asked_for_sends_nothing() -> None:
    platform = TablePlatform()
    assert gateway_with(platform).feed_pages(SESSION, "quiet-garden", "newest", []) == []
    assert platform.batches == []


def test_an_unknown_sort_is_refused_before_anything_is_sent() -> None:
    platform = TablePlatform()
    with pytest.raises(InvalidRequest, match="unknown sort: hot"):
        gateway_with(platform).feed_pages(SESSION, "quiet-garden", "hot", [1])
    assert platform.batches == []


def test_feed_page_data_without_self_is_an_unknown_shape() -> None:
    class WithoutSelf(TablePlatform):
        def _answer(self, req: Req) -> Resp:
            answer = super()._answer(req)
            if req.data_path is None:
                return answer
            data = answer.json()
            del data["pageProps"]["self"]
            return ok(data)

    platform = WithoutSelf({1: [feed_post("a" * 32, "a", pinned=None)]})
    platform.remember_group(GROUP)
    with pytest.raises(PlatformError, match="page data without self"):
        gateway_with(platform).feed_pages(SESSION, "quiet-garden", "newest", [1])


def test_the_group_of_each_post_read_in_the_feed_is_remembered() -> None:
    """A post read from the feed and then asked for without its group is looked for in that group first
    (white-box: ``post_groups`` is the client's record of it)."""
    platform = TablePlatform({1: [feed_post("a" * 32, "a", pinned=None)], 2: [feed_post("b" * 32, "b", pinned=None)]})
    platform.remember_group(GROUP)
    gateway_with(platform).feed_pages(SESSION, "quiet-garden", "newest", [1, 2])
    assert platform.post_groups.get("a" * 32) == "g" * 32 and platform.post_groups.get("b" * 32) == "g" * 32


def test_post_links_are_made_from_the_platform_url_however_it_was_written() -> None:
    platform = TablePlatform({1: [feed_post("a" * 32, "seed-swap", pinned=None)]})
    platform.remember_group(GROUP)
    (page,) = gateway_with(platform, WWW + "/").feed_pages(SESSION, "quiet-garden", "newest", [1])
    assert page[0].url == f"{WWW}/quiet-garden/seed-swap"


def test_a_group_read_by_id_is_then_known_by_its_slug_without_a_request() -> None:
    platform = TablePlatform()
    gateway = gateway_with(platform)
    platform.remember_group({"id": GROUP["id"], "name": "old-slug"})  # known by id: no list needed
    gateway.get_group(SESSION, GROUP_ID)
    sent = len(platform.batches)
    assert platform.group_ref(SESSION, "quiet-garden").id == GROUP_ID
    assert len(platform.batches) == sent


def test_whoami_asks_the_platform_every_time() -> None:
    """It is how a client learns that the session still works: a remembered answer would say so of a dead one."""
    platform = TablePlatform()
    gateway = gateway_with(platform)
    gateway.whoami(SESSION)
    gateway.whoami(SESSION)
    assert platform.batches == [["/self"], ["/self"]]


def test_a_user_in_no_group_is_answered_without_an_empty_batch() -> None:
    """An empty batch would still take the connection's browser (and start one if none runs)."""
    platform = TablePlatform()
    platform.groups = []
    assert gateway_with(platform).list_groups(SESSION) == []
    assert all(platform.batches) and len(platform.batches) == 2  # self, then the user's groups


def test_each_group_listed_has_its_labels_asked_for_in_one_batch() -> None:
    platform = TablePlatform()
    (group,) = gateway_with(platform).list_groups(SESSION)
    assert group.id == GROUP_ID
    assert platform.batches[-1] == [f"/groups/{GROUP_ID}/labels"]


@pytest.mark.parametrize("method", ["login", "adopt_session"])
def test_signing_in_may_take_twice_the_time_of_a_call(method: str) -> None:
    """It loads two pages and waits for the platform's answer in between."""
    left: list[float] = []

    class Client:
        def login(self, email: str, password: str) -> None:
            left.append(remaining(0))

        def adopt(self, token: str) -> None:
            left.append(remaining(0))

    gateway = SeleniumPlatformGateway(WWW, API, timeout=5)
    gateway._client = Client()  # type: ignore[assignment]
    if method == "login":
        gateway.login("alice@example.com", "pw")
    else:
        gateway.adopt_session("token")
    assert 9 < left[0] <= 10
