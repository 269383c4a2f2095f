"""A connection has at most three platform calls in progress in a process (``community_api/in_flight.py``): one
more waits a moment for one of them to end, then is refused with 429 ``busy`` instead of holding a thread
while it waits its turn; it counts no read against the pace, uses no DM quota, and leaves other
connections alone."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from community_api.errors import RateLimited
from community_api.in_flight import BUSY_WAIT_SECONDS, MAX_CALLS_IN_FLIGHT, InFlight
from community_api.scopes import ALL_SCOPES
from tests.unit.test_mcp_world import McpWorld
from tests.unit.world_support import PASSWORD, Ready, World


class Gate:
    """Holds every ``whoami`` the fake platform is asked until opened, counting the calls waiting."""

    def __init__(self, world: World) -> None:
        self.open = threading.Event()
        self.waiting = threading.Semaphore(0)
        original = world.gateway.whoami

        def held(*args: Any, **kwargs: Any) -> Any:
            self.waiting.release()
            assert self.open.wait(10), "the gate was never opened"
            return original(*args, **kwargs)

        world.gateway.whoami = held  # type: ignore[method-assign]

    def wait_for(self, calls: int) -> None:
        for _ in range(calls):
            assert self.waiting.acquire(timeout=10)


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(MAX_CALLS_IN_FLIGHT) as executor:
        yield executor


def hold_calls(gate: Gate, pool: ThreadPoolExecutor, call: Callable[[], Any]) -> list[Future[Any]]:
    """``MAX_CALLS_IN_FLIGHT`` calls in progress on one connection, each held at the platform."""
    futures = [pool.submit(call) for _ in range(MAX_CALLS_IN_FLIGHT)]
    gate.wait_for(MAX_CALLS_IN_FLIGHT)
    return futures


def platform_reads(world: World, ready: Ready) -> int:
    me = world.client.simulate_get("/v1/me", headers=ready.browser.headers()).json
    return int(me["usage"]["platformReads"]["readsLastMinute"])


def test_one_call_more_is_refused_after_a_moment_and_counts_no_read(ready: Ready, pool: ThreadPoolExecutor) -> None:
    world = ready.world
    gate = Gate(world)
    held = hold_calls(gate, pool, lambda: world.get("/v1/whoami", ready.key))
    reads = platform_reads(world, ready)
    started = time.monotonic()
    refused = world.get("/v1/whoami", ready.key)
    assert BUSY_WAIT_SECONDS <= time.monotonic() - started < BUSY_WAIT_SECONDS + 1
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "1"
    error = refused.json["error"]
    assert (error["code"], error["details"]["reason"], error["details"]["retryAfter"]) == ("rate_limited", "busy", 1)
    assert f"{MAX_CALLS_IN_FLIGHT} calls in progress" in error["message"]
    assert platform_reads(world, ready) == reads  # refused before the pace counted it
    metrics = world.client.simulate_get("/metrics", remote_addr="127.0.0.1").text
    (line,) = [
        line
        for line in metrics.splitlines()
        if line.startswith('community_api_rate_limit_refusals_total{limit="busy"}')
    ]
    assert float(line.split()[-1]) >= 1
    gate.open.set()
    assert [future.result().status_code for future in held] == [200] * MAX_CALLS_IN_FLIGHT
    assert world.get("/v1/whoami", ready.key).status_code == 200  # the count went back down
    assert world.deps.in_flight.count(ready.connection["id"]) == 0


def test_one_call_more_is_served_when_a_call_ends_within_the_wait(ready: Ready, pool: ThreadPoolExecutor) -> None:
    """An agent that asks for several things at once, the platform answering quickly, gets every answer."""
    world = ready.world
    gate = Gate(world)
    held = hold_calls(gate, pool, lambda: world.get("/v1/whoami", ready.key))
    threading.Timer(BUSY_WAIT_SECONDS / 4, gate.open.set).start()
    assert world.get("/v1/whoami", ready.key).status_code == 200
    assert [future.result().status_code for future in held] == [200] * MAX_CALLS_IN_FLIGHT


def test_while_one_call_waits_for_a_place_any_other_is_refused_at_once() -> None:
    """One waiter holds one more thread for a moment; a crowd of them would hold every thread in turn."""
    in_flight = InFlight(limit=1, wait=5)
    entered, release = threading.Event(), threading.Event()

    def running() -> None:
        with in_flight.call("con_a"):
            entered.set()
            release.wait(10)

    def waiting() -> None:
        with in_flight.call("con_a"):
            pass

    first, second = threading.Thread(target=running), threading.Thread(target=waiting)
    first.start()
    assert entered.wait(5)
    second.start()
    deadline = time.monotonic() + 5
    while "con_a" not in in_flight._waiting and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    with pytest.raises(RateLimited), in_flight.call("con_a"):
        pass
    assert time.monotonic() - started < 0.5
    release.set()
    first.join(5)
    second.join(5)
    assert in_flight.count("con_a") == 0


def test_another_connection_is_not_held_back(ready: Ready, pool: ThreadPoolExecutor) -> None:
    world = ready.world
    bob = world.link(ready.browser, "bob")
    gate = Gate(world)
    held = hold_calls(gate, pool, lambda: world.get("/v1/whoami", ready.key))
    groups = world.get("/v1/groups", ready.key, headers={"X-Community-Connection": bob["id"]})
    assert groups.status_code == 200, groups.text
    gate.open.set()
    assert all(future.result().status_code == 200 for future in held)


def test_another_link_of_the_same_platform_account_is_not_held_back(ready: Ready, pool: ThreadPoolExecutor) -> None:
    """The bound is per connection (each has its own browser), not per platform account: a teammate who
    linked the same account has places of their own. (The pace, by contrast, is the account's.)"""
    world = ready.world
    world.add_account("teammate@example.com", PASSWORD)
    teammate = world.sign_in("teammate@example.com")
    again = world.link(teammate)
    assert again["platformUserId"] == ready.connection["platformUserId"] and again["id"] != ready.connection["id"]
    teammate_key = world.mint(teammate, scopes=ALL_SCOPES)["secret"]
    gate = Gate(world)
    held = hold_calls(gate, pool, lambda: world.get("/v1/whoami", ready.key))
    groups = world.get("/v1/groups", teammate_key)
    assert groups.status_code == 200, groups.text
    gate.open.set()
    assert all(future.result().status_code == 200 for future in held)


def test_a_dm_refused_as_busy_uses_no_quota(ready: Ready, pool: ThreadPoolExecutor) -> None:
    world = ready.world
    gate = Gate(world)
    held = hold_calls(gate, pool, lambda: world.get("/v1/whoami", ready.key))
    inbox = world.get("/v1/dms", ready.key)  # before the gate: one more call would be refused
    assert inbox.status_code == 429
    gate.open.set()
    [future.result() for future in held]
    conversation = world.get("/v1/dms", ready.key).json["conversations"][0]["id"]
    gate.open.clear()
    held = hold_calls(gate, pool, lambda: world.get("/v1/whoami", ready.key))
    sent = world.post("/v1/dms", ready.key, {"conversationId": conversation, "content": "hello"})
    assert sent.status_code == 429 and sent.json["error"]["details"]["reason"] == "busy"
    gate.open.set()
    [future.result() for future in held]
    assert world.gateway.sent_messages() == []
    again = world.post("/v1/dms", ready.key, {"conversationId": conversation, "content": "hello"})
    assert again.status_code == 201, again.text  # the DM throttle's quota was given back


def test_an_mcp_tool_is_refused_the_same_way(pool: ThreadPoolExecutor) -> None:
    mcp = McpWorld.build()
    try:
        gate = Gate(mcp)  # type: ignore[arg-type]  # an McpWorld has the same gateway
        held = hold_calls(gate, pool, lambda: mcp.call("whoami", {}))
        error = mcp.fail("whoami", {})
        assert error["code"] == "rate_limited"
        assert (error["details"]["reason"], error["details"]["retryAfter"]) == ("busy", 1)
        gate.open.set()
        assert all(future.result()["isError"] is False for future in held)
    finally:
        mcp.close()


def test_the_count_is_per_connection_and_given_back_on_failure() -> None:
    in_flight = InFlight(limit=1, wait=0)
    with pytest.raises(RuntimeError), in_flight.call("con_a"):
        raise RuntimeError("the call failed")
    with in_flight.call("con_a"), in_flight.call("con_b"):
        assert (in_flight.count("con_a"), in_flight.count("con_b")) == (1, 1)
    assert in_flight.count("con_a") == 0


@pytest.mark.parametrize("limit", [0, -1])
def test_a_bound_with_no_room_for_a_call_is_refused_when_made(limit: int) -> None:
    """A bound of 0 would refuse every call of every connection: a mistake in the wiring, said at start-up."""
    with pytest.raises(ValueError, match="room for at least one call"):
        InFlight(limit=limit)


def test_a_call_that_waited_leaves_the_place_to_wait_to_the_next() -> None:
    """Twice in a row, one call more waits for a place and is served: the first wait does not use up the
    connection's right to wait."""
    in_flight = InFlight(limit=1, wait=5)
    for _ in range(2):
        started, release = threading.Event(), threading.Event()

        def hold(started: threading.Event, release: threading.Event) -> None:
            with in_flight.call("con_a"):
                started.set()
                release.wait(5)

        holder = threading.Thread(target=hold, args=(started, release))
        holder.start()
        assert started.wait(5)
        threading.Timer(0.05, release.set).start()
        with in_flight.call("con_a"):  # waits for the holder, then runs
            assert in_flight.count("con_a") == 1
        holder.join(5)
