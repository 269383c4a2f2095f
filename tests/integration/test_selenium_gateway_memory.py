"""A warm browser's page does not keep every answer it ever gave: in headless Chromium against the
stand-in, chromedriver holds on to each script's result while the page lives, so the gateway loads the
page afresh once enough has come out of it (``page_fetch.RELOAD_AFTER_BYTES`` and ``…_SCRIPTS``). The
tests measure what an operator sees, the page's JavaScript memory after a garbage collection, and what the
platform sees, the page loaded again."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from adapters.platform import page_fetch
from adapters.platform.page_fetch import Req
from adapters.platform.selenium_platform_gateway import SeleniumPlatformGateway
from community_api.model import PlatformSession
from tests.sandbox_support import SandboxProcess

pytestmark = [pytest.mark.browser, pytest.mark.slow]

GROUP = "builders-club"
MIB = 1024 * 1024


@pytest.fixture
def gateway(sandbox: SandboxProcess) -> Iterator[SeleniumPlatformGateway]:
    gw = SeleniumPlatformGateway(
        sandbox.url, sandbox.api_url, pool_size=1, timeout=10, trusted_spki=sandbox.trusted_spki
    )
    try:
        yield gw
    finally:
        gw.close()


@pytest.fixture
def alice(gateway: SeleniumPlatformGateway, sandbox: SandboxProcess) -> PlatformSession:
    sandbox.reset()
    linked = gateway.login("alice@sandbox.test", "sandbox")
    return PlatformSession(connection_id="con-memory", token=linked.session_token)


def heap_after_gc(gateway: SeleniumPlatformGateway, alice: PlatformSession) -> int:
    """Bytes of the page's JavaScript heap still in use after a full garbage collection."""
    with gateway._client.pool.lease(alice.connection_id) as lease:
        driver = lease.browser().driver
        driver.execute_cdp_cmd("HeapProfiler.collectGarbage", {})
        return int(driver.execute_cdp_cmd("Runtime.getHeapUsage", {})["usedSize"])


def page_loads(sandbox: SandboxProcess) -> int:
    return sum(1 for r in sandbox.control("requests")["requests"] if r["path"] == page_fetch.READY_PATH)


def test_answers_brought_out_of_the_page_do_not_pile_up_in_it(
    gateway: SeleniumPlatformGateway, alice: PlatformSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(page_fetch, "PACK_MIN_BYTES", 10**9)  # plain answers: each the full pages' text
    monkeypatch.setattr(page_fetch, "RELOAD_AFTER_BYTES", 4 * MIB)
    batch = [Req.data([GROUP], {"group": GROUP, "p": p, "s": "newest"}) for p in range(1, 6)]
    first = gateway._client.call(alice, batch)
    per_call = sum(len(r.text) for r in first)
    assert per_call > 100_000, per_call  # five feed pages; the stand-in's are about 37 kB each
    start = heap_after_gc(gateway, alice)
    calls = 24 * MIB // per_call
    for _ in range(calls):
        assert [r.status for r in gateway._client.call(alice, batch)] == [200] * 5
    grown = heap_after_gc(gateway, alice) - start
    # Before, all of it stayed: more than 24 MiB of text (one byte a character at the least).
    assert grown < 10 * MIB, f"the page kept {grown / MIB:.1f} MiB after {calls} reads of {per_call} characters"


def test_the_page_is_loaded_again_after_so_many_scripts(
    gateway: SeleniumPlatformGateway, alice: PlatformSession, sandbox: SandboxProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(page_fetch, "RELOAD_AFTER_SCRIPTS", 10)
    assert gateway.whoami(alice).handle == "alice"
    loaded = page_loads(sandbox)
    for _ in range(9):
        assert gateway.whoami(alice).handle == "alice"
    assert page_loads(sandbox) == loaded  # ten scripts run in this page so far
    for _ in range(10):
        assert gateway.whoami(alice).handle == "alice"
    assert page_loads(sandbox) == loaded + 1  # once, before the eleventh; the session carried over
