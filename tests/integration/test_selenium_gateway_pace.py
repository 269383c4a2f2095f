"""Every request ``SeleniumPlatformGateway`` sends the stand-in platform is counted on the call's meter
(``community_api.platform_meter``), and one the pace refuses is not sent.

The stand-in logs every request it serves (``/__sandbox/requests``); the platform's own requests are its
data routes (``/api2/…`` and ``/_next/data/…``), the page loads and the firewall script around them being
the browser's (``/login``, ``/__fw/…``). Each case compares the meter with that log: reads are GETs, writes
the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prometheus_client import REGISTRY

from adapters.platform.selenium_platform_gateway import SeleniumPlatformGateway
from community_api.errors import PlatformError, RateLimited
from community_api.model import PlatformSession
from community_api.platform_meter import PlatformMeter, metered
from fakes.clock import FakeClock
from fakes.platform_pace import FakePlatformPace
from tests.sandbox_support import SandboxProcess

pytestmark = [pytest.mark.browser, pytest.mark.slow]

GROUP = "builders-club"
TIMEOUT = 5.0
ACCOUNT = "alice-platform-id"


@pytest.fixture(scope="module")
def gateway(sandbox: SandboxProcess) -> Iterator[SeleniumPlatformGateway]:
    gw = SeleniumPlatformGateway(
        sandbox.url, sandbox.api_url, pool_size=2, timeout=TIMEOUT, trusted_spki=sandbox.trusted_spki
    )
    try:
        yield gw
    finally:
        gw.close()


@pytest.fixture(scope="module")
def alice(gateway: SeleniumPlatformGateway, sandbox: SandboxProcess) -> PlatformSession:
    sandbox.reset()
    linked = gateway.login("alice@sandbox.test", "sandbox")
    return PlatformSession(connection_id="con-alice", token=linked.session_token)


@pytest.fixture(autouse=True)
def clean(sandbox: SandboxProcess) -> Iterator[None]:
    sandbox.reset()
    yield
    sandbox.reset()


def platform_requests(sandbox: SandboxProcess) -> tuple[int, int]:
    """(reads, writes) the stand-in served on its data routes since the last reset."""
    seen = [r for r in sandbox.control("requests")["requests"] if r["path"].startswith(("/api2/", "/_next/data/"))]
    reads = sum(1 for r in seen if r["method"] == "GET")
    return reads, len(seen) - reads


def sent_metric() -> tuple[float, float]:
    """``community_api_platform_requests_total`` for reads and writes, in this test process."""
    name = "community_api_platform_requests_total"
    return tuple(REGISTRY.get_sample_value(name, {"kind": kind}) or 0.0 for kind in ("read", "write"))  # type: ignore[return-value]


def counted(pace: FakePlatformPace, call: Callable[[], Any], reads: int = 0, writes: int = 0) -> PlatformMeter:
    with metered(pace, ACCOUNT, reads=reads, writes=writes) as meter:
        call()
    return meter


@pytest.fixture
def pace() -> FakePlatformPace:
    return FakePlatformPace(FakeClock(), reads_per_minute=10_000, writes_per_minute=10_000)


def test_every_request_of_every_call_is_on_the_meter(
    gateway: SeleniumPlatformGateway, alice: PlatformSession, sandbox: SandboxProcess, pace: FakePlatformPace
) -> None:
    gw = gateway
    posts = gw.feed_pages(alice, GROUP, "newest", [1])[0]
    conversation = gw.list_conversations(alice, 0, 30)[0]
    bob = sandbox.user_id("bob")
    sandbox.reset()
    cases: list[tuple[str, Callable[[], Any]]] = [
        ("whoami", lambda: gw.whoami(alice)),
        ("list_groups", lambda: gw.list_groups(alice)),  # the list, then each group's labels
        ("get_group", lambda: gw.get_group(alice, GROUP)),
        ("feed_pages", lambda: gw.feed_pages(alice, GROUP, "best-1y", [1, 2, 3])),
        ("post_detail", lambda: gw.post_detail(alice, posts[0].id, GROUP)),
        ("list_conversations", lambda: gw.list_conversations(alice, 0, 30)),
        ("get_messages", lambda: gw.get_messages(alice, conversation.id, None)),
        ("create_comment", lambda: gw.create_comment(alice, posts[0].id, "counted", None, None)),
        ("open_conversation", lambda: gw.open_conversation(alice, bob, None)),  # both members' groups first
        ("send_message", lambda: gw.send_message(alice, conversation.id, "counted")),
    ]
    made = []
    metric_before = sent_metric()
    log_before = platform_requests(sandbox)
    for name, call in cases:
        before = platform_requests(sandbox)
        meter = counted(pace, call)
        after = platform_requests(sandbox)
        made.append((name, meter.reads_sent, meter.writes_sent))
        assert (meter.reads_sent, meter.writes_sent) == (after[0] - before[0], after[1] - before[1]), name
    log_after = platform_requests(sandbox)
    metric_after = sent_metric()  # /metrics counts what the platform saw too
    assert (metric_after[0] - metric_before[0], metric_after[1] - metric_before[1]) == (
        log_after[0] - log_before[0],
        log_after[1] - log_before[1],
    )
    by_name = {name: (reads, writes) for name, reads, writes in made}
    assert by_name["list_groups"] == (4, 0) and by_name["feed_pages"] == (3, 0)  # alice is in three groups
    assert by_name["create_comment"][1] == 1 and by_name["send_message"] == (0, 1)
    assert by_name["open_conversation"][0] >= 1 and by_name["open_conversation"][1] == 1


def test_a_deploy_and_a_5xx_asked_again_are_counted(
    gateway: SeleniumPlatformGateway, alice: PlatformSession, sandbox: SandboxProcess, pace: FakePlatformPace
) -> None:
    gateway.feed_pages(alice, GROUP, "newest", [1])
    sandbox.control("build-id", {})  # the next page-data request is a 404 that reached the platform
    sandbox.control("errors", {"route": "/api2/self/chat-channels", "status": 500, "count": 1})
    before = platform_requests(sandbox)
    meter = counted(pace, lambda: gateway.feed_pages(alice, GROUP, "newest", [1, 2]))
    assert meter.reads_sent == 4  # two pages, each asked again under the new build
    meter = counted(pace, lambda: gateway.list_conversations(alice, 0, 30))
    assert meter.reads_sent == 2  # the 500, and the read asked again
    after = platform_requests(sandbox)
    assert after[0] - before[0] == 6 and after[1] == before[1]


def test_requests_past_the_pace_are_refused_unsent(
    gateway: SeleniumPlatformGateway, alice: PlatformSession, sandbox: SandboxProcess
) -> None:
    """A list of groups admitted for its first read, with room for two more reads and three groups' labels
    to read: 429 ``read_pace``, and the platform saw the list only."""
    gateway.list_groups(alice)  # the user's groups are known: the list is one request, the labels the rest
    clock = FakeClock()
    pace = FakePlatformPace(clock, reads_per_minute=4)
    pace.admit(ACCOUNT, 1)  # a read of a second ago
    clock.advance(seconds=1)
    pace.admit(ACCOUNT, 1)  # the list of groups, admitted by the step
    before = platform_requests(sandbox)
    with pytest.raises(RateLimited) as refused:
        counted(pace, lambda: gateway.list_groups(alice), reads=1)
    assert refused.value.details["reason"] == "read_pace"
    assert platform_requests(sandbox)[0] - before[0] == 1  # the list; no group's labels
    assert pace.status(ACCOUNT).reads_left == 2  # the three labels refused were not counted


def test_a_5xx_is_not_asked_again_past_the_pace(
    gateway: SeleniumPlatformGateway, alice: PlatformSession, sandbox: SandboxProcess
) -> None:
    """Asking again after a 5xx is our choice: with no room left in the pace, the 5xx stands (502)."""
    gateway.list_conversations(alice, 0, 30)  # a warm browser on the platform's page
    sandbox.control("errors", {"route": "/api2/self/chat-channels", "status": 500, "count": 1})
    pace = FakePlatformPace(FakeClock(), reads_per_minute=2)
    pace.admit(ACCOUNT, 1)  # another call's read
    pace.admit(ACCOUNT, 1)  # the step's read: the budget is spent
    before = platform_requests(sandbox)
    with pytest.raises(PlatformError):
        counted(pace, lambda: gateway.list_conversations(alice, 0, 30), reads=1)
    assert platform_requests(sandbox)[0] - before[0] == 1
