"""Large answers leave the browser packed (gzip in the page, ``page_fetch.unpack`` here): in headless
Chromium against the stand-in, a batch read packed gives exactly what the same batch read plainly gives,
JSON and HTML, errors and failed fetches included, and a feed of 30 pages is read through the package."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from adapters.platform import page_fetch
from adapters.platform.page_fetch import Req
from adapters.platform.platform_answers import Resp
from adapters.platform.selenium_platform_gateway import SeleniumPlatformGateway
from community_api.model import PlatformSession
from scripts.processes import free_port
from tests.sandbox_support import SandboxProcess

pytestmark = [pytest.mark.browser, pytest.mark.slow]

GROUP = "builders-club"


@pytest.fixture(scope="module")
def gateway(sandbox: SandboxProcess) -> Iterator[SeleniumPlatformGateway]:
    gw = SeleniumPlatformGateway(
        sandbox.url, sandbox.api_url, pool_size=1, timeout=10, trusted_spki=sandbox.trusted_spki
    )
    try:
        yield gw
    finally:
        gw.close()


@pytest.fixture(scope="module")
def alice(gateway: SeleniumPlatformGateway, sandbox: SandboxProcess) -> PlatformSession:
    sandbox.reset()
    linked = gateway.login("alice@sandbox.test", "sandbox")
    return PlatformSession(connection_id="con-packing", token=linked.session_token)


@pytest.fixture
def unpacked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the packages unpacked."""
    seen: list[int] = []
    original = page_fetch.unpack

    def counting(packed: object, count: int) -> list[page_fetch.Resp]:
        seen.append(count)
        return original(packed, count)

    monkeypatch.setattr(page_fetch, "unpack", counting)
    return seen


def test_a_packed_batch_reads_exactly_as_a_plain_one(
    gateway: SeleniumPlatformGateway,
    alice: PlatformSession,
    sandbox: SandboxProcess,
    unpacked: list[int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sandbox.reset()
    api = gateway._client.api
    post = gateway.create_post(alice, GROUP, 'Grüße aus Köln ☃ — «quoted» "text"', "Zeile eins\nZeile zwei", None)
    reqs = [
        *(Req.data([GROUP], {"group": GROUP, "p": p, "s": "newest"}) for p in (1, 2, 40)),
        Req("GET", api("self", "chat-channels", query={"offset": 0, "limit": 30})),
        Req("GET", api("posts", "0" * 32, "comments")),  # a JSON 404
        Req("GET", sandbox.url + "/_next/data/stale-build/x.json"),  # an HTML 404
        Req("GET", f"http://127.0.0.1:{free_port()}/nothing"),  # a fetch that fails: status 0
        Req("GET", api("posts", "f" * 32)),  # the platform's 429, with its Retry-After
        Req("GET", "http://[not-a-host/x"),  # a URL the browser cannot parse: never fetched
    ]
    sandbox.control("errors", {"route": f"/api2/posts/{'f' * 32}", "status": 429, "count": 2, "retryAfter": 7})

    def run(pack_min: int) -> list[Resp]:
        monkeypatch.setattr(page_fetch, "PACK_MIN_BYTES", pack_min)
        return gateway._client.call(alice, reqs)

    plain = run(10**9)
    assert unpacked == []
    packed = run(1)
    assert unpacked == [len(reqs)]
    assert packed == plain
    assert [r.status for r in plain] == [200, 200, 200, 200, 404, 404, 0, 429, 0]
    assert plain[6].error and plain[5].is_html and "Grüße aus Köln ☃" in plain[0].text
    assert plain[7].retry_after == "7"
    assert plain[8].error is not None and plain[8].error.startswith("refused:")
    assert post.id in plain[0].text


def test_thirty_feed_pages_come_through_the_package(
    gateway: SeleniumPlatformGateway, alice: PlatformSession, sandbox: SandboxProcess, unpacked: list[int]
) -> None:
    sandbox.reset()
    pages = gateway.feed_pages(alice, GROUP, "newest", list(range(1, 31)))
    assert unpacked == [30]
    expected = sandbox.control(f"ordering?group={GROUP}&user=alice&pages=30&s=newest")["pages"]
    got = [[p.id for p in page] for page in pages]
    assert got[0] == list(dict.fromkeys(expected[0])) and got[1:] == expected[1:]
    assert gateway.feed_pages(alice, GROUP, "newest", [1]) == pages[:1]
    assert unpacked == [30]  # one page is small: it comes plainly


def test_one_large_answer_is_packed_too(
    gateway: SeleniumPlatformGateway,
    alice: PlatformSession,
    sandbox: SandboxProcess,
    unpacked: list[int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch of one request sets up no compressor in advance, but its answer is packed once it is
    found large, and reads exactly as it does plainly."""
    sandbox.reset()
    req = [Req.data([GROUP], {"group": GROUP, "p": 1, "s": "newest"})]
    monkeypatch.setattr(page_fetch, "PACK_MIN_BYTES", 10**9)
    plain = gateway._client.call(alice, req)
    assert unpacked == []
    monkeypatch.setattr(page_fetch, "PACK_MIN_BYTES", 1024)  # a feed page is about 30 KB
    packed = gateway._client.call(alice, req)
    assert unpacked == [1]
    assert packed == plain and plain[0].status == 200 and '"postTrees"' in plain[0].text
