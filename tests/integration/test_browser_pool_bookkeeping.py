"""The browser pool's bookkeeping, with stand-in browsers (no Chromium): how each way of closing a browser
asks it to quit, what the metrics count, the life of the pool's sweeping thread, every wait bounded by
the gateway call's deadline as well as the pool's own, reservations given back once and at once, and
connections forgotten once they hold no browser."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import cast

import pytest
from prometheus_client import REGISTRY
from selenium.webdriver.remote.webdriver import WebDriver

from adapters.platform.browser import Browser, BrowserFailure
from adapters.platform.browser_pool import BrowserPool, PoolBusy
from adapters.platform.deadline import within
from tests.integration.test_selenium_gateway_pool import FakeDriver, ManualClock, Memory

SWEEPER = "close-idle-browsers"


class SlowDriver(FakeDriver):
    """Takes a while to quit, as a real browser does (0.1-0.5 s)."""

    def quit(self) -> None:
        time.sleep(0.2)
        super().quit()


class RecordingBrowser(Browser):
    """Remembers how it was asked to quit: ``True`` politely, ``False`` ended at once."""

    def __init__(self, driver: FakeDriver) -> None:
        super().__init__(cast(WebDriver, driver))
        self.fake = driver
        self.quits: list[bool] = []

    def quit(self, polite: bool = True) -> None:
        self.quits.append(polite)
        super().quit(polite)


class Factory:
    """Makes ``RecordingBrowser``s; ``fail`` makes the next starts fail, ``during`` runs inside each start."""

    def __init__(self, driver: type[FakeDriver] = FakeDriver) -> None:
        self.driver = driver
        self.made: list[RecordingBrowser] = []
        self.fail = False
        self.during: Callable[[], None] | None = None

    def __call__(self) -> Browser:
        if self.during is not None:
            self.during()
        if self.fail:
            raise RuntimeError("chromium is missing")
        self.made.append(RecordingBrowser(self.driver(len(self.made))))
        return self.made[-1]


class Counted:
    """A reservation that counts how often it is released."""

    def __init__(self) -> None:
        self.releases = 0

    def release(self) -> None:
        self.releases += 1


class CountingMemory(Memory):
    def __call__(self, *, first: bool = False) -> Counted | None:  # type: ignore[override]
        self.asked += 1
        if not self.enough and not first:
            return None
        made = Counted()
        self.made.append(made)  # type: ignore[arg-type]
        return made


def use(pool: BrowserPool, key: str) -> RecordingBrowser:
    with pool.lease(key) as lease:
        return cast(RecordingBrowser, lease.browser())


def metric(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


@pytest.fixture
def busy() -> Iterator[Callable[[BrowserPool, str], None]]:
    """Holds a connection's browser busy on another thread until the test ends."""
    release = threading.Event()
    holders: list[threading.Thread] = []

    def hold(pool: BrowserPool, key: str) -> None:
        holding = threading.Event()

        def run() -> None:
            with pool.lease(key) as lease:
                lease.browser()
                holding.set()
                release.wait(10)

        holders.append(threading.Thread(target=run, daemon=True))
        holders[-1].start()
        assert holding.wait(5)

    yield hold
    release.set()
    for holder in holders:
        holder.join(5)


def sweepers() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == SWEEPER}


# -- how browsers are asked to quit --------------------------------------------------------------------
def test_each_way_of_closing_a_browser_asks_it_as_its_state_allows() -> None:
    """A working browser (evicted, or a sign-in's, done) is asked to quit; one that crashed or hung, and
    every one at shutdown, is ended without asking (its driver may not answer, or be ending already)."""
    factory = Factory()
    pool = BrowserPool(factory, size=1, wait=1)
    evicted = use(pool, "a")
    use(pool, "b")
    assert evicted.quits == [True]
    with pool.lease("b") as lease:
        crashed = cast(RecordingBrowser, lease.browser())
        lease.discard()
        assert crashed.quits == [False]
        last = cast(RecordingBrowser, lease.browser())
    pool.close()
    assert last.quits == [False]
    pool = BrowserPool(factory, size=1, wait=1)
    with pool.temporary() as browser:
        pass
    assert cast(RecordingBrowser, browser).quits == [True]


def test_an_evicted_browser_has_quit_before_the_start_that_evicted_it_returns() -> None:
    """It closes while the new one starts, and its memory is given back before the call goes on."""
    factory = Factory(SlowDriver)
    pool = BrowserPool(factory, size=1, wait=1)
    evicted = use(pool, "a")
    use(pool, "b")
    assert evicted.fake.quit_called


def test_a_browser_that_finishes_starting_after_the_pool_closed_is_closed_and_the_call_refused() -> None:
    factory = Factory()
    pool = BrowserPool(factory, size=2, wait=1)
    factory.during = pool.close  # the service stops while the browser starts
    with pytest.raises(PoolBusy, match="closed"), pool.lease("a") as lease:
        lease.browser()
    assert [b.quits for b in factory.made] == [[True]] and pool.live() == 0


# -- what the metrics count --------------------------------------------------------------------------------
def test_starts_evictions_and_crashes_are_counted_each_once() -> None:
    pool = BrowserPool(Factory(), size=1, wait=1)
    starts, evictions, crashes = (
        metric("community_api_browser_starts_total"),
        metric("community_api_browser_evictions_total"),
        metric("community_api_browser_crashes_total"),
    )
    use(pool, "a")
    use(pool, "b")  # a evicted
    with pool.lease("b") as lease:
        lease.discard()  # crashed
        lease.browser()
    with pool.temporary():
        pass  # b evicted; the sign-in's browser closed when done, not crashed
    assert metric("community_api_browser_starts_total") - starts == 4
    assert metric("community_api_browser_evictions_total") - evictions == 2
    assert metric("community_api_browser_crashes_total") - crashes == 1


def test_idle_closes_count_every_browser_closed() -> None:
    clock = ManualClock()
    pool = BrowserPool(Factory(), size=3, wait=1, idle=600, clock=clock)
    for key in ("a", "b", "c"):
        use(pool, key)
    before = metric("community_api_browser_idle_closes_total")
    clock.now += 601
    assert pool.close_idle() == 3
    assert metric("community_api_browser_idle_closes_total") - before == 3
    pool.close()  # and its sweeping thread


def test_a_start_short_of_memory_is_counted_and_said_once_however_often_it_looks_again(
    busy: Callable[[BrowserPool, str], None], caplog: pytest.LogCaptureFixture
) -> None:
    memory = CountingMemory(enough=True)
    pool = BrowserPool(Factory(), size=4, wait=1.2, room=memory)
    busy(pool, "a")
    memory.enough = False
    short = metric("community_api_browser_memory_short_total")
    with pytest.raises(PoolBusy, match="no memory"), pool.lease("b") as lease:
        lease.browser()
    assert memory.asked >= 2  # it looked again while it waited
    assert metric("community_api_browser_memory_short_total") - short == 1
    assert sum("no memory for another browser" in r.getMessage() for r in caplog.records) == 1


# -- bounded waits -----------------------------------------------------------------------------------------
def test_a_busy_connection_is_waited_for_no_longer_than_the_call_has_left(
    busy: Callable[[BrowserPool, str], None],
) -> None:
    pool = BrowserPool(Factory(), size=2, wait=10)
    busy(pool, "a")
    started = time.monotonic()
    with within(0.2), pytest.raises(PoolBusy, match="busy with earlier calls"), pool.lease("a"):
        pass
    assert time.monotonic() - started < 2


def test_a_full_pool_is_waited_for_no_longer_than_the_call_has_left(busy: Callable[[BrowserPool, str], None]) -> None:
    pool = BrowserPool(Factory(), size=1, wait=10)
    busy(pool, "a")
    started = time.monotonic()
    with within(0.2), pytest.raises(PoolBusy, match="all 1 browsers are busy"), pool.lease("b") as lease:
        lease.browser()
    assert time.monotonic() - started < 2


def test_a_full_pool_gives_up_when_its_wait_is_over(busy: Callable[[BrowserPool, str], None]) -> None:
    pool = BrowserPool(Factory(), size=1, wait=0.2)
    busy(pool, "a")
    started = time.monotonic()
    with pytest.raises(PoolBusy), pool.lease("b") as lease:
        lease.browser()
    assert time.monotonic() - started < 1.0


def test_sign_ins_at_once_each_have_a_browser_of_their_own_at_once() -> None:
    pool = BrowserPool(Factory(), size=2, wait=0.5)
    first_in, done = threading.Event(), threading.Event()

    def sign_in() -> None:
        with pool.temporary():
            first_in.set()
            done.wait(5)

    other = threading.Thread(target=sign_in)
    other.start()
    assert first_in.wait(5)
    try:
        with pool.temporary() as browser:
            assert pool.live() == 2 and browser is not None
    finally:
        done.set()
        other.join(5)


def test_a_pool_needs_room_for_a_browser() -> None:
    with pytest.raises(ValueError, match="at least one browser"):
        BrowserPool(Factory(), size=0, wait=1)


# -- reservations -----------------------------------------------------------------------------------------
def test_a_reservation_is_released_once_however_many_calls_follow() -> None:
    memory = CountingMemory(enough=True)
    pool = BrowserPool(Factory(), size=4, wait=1, room=memory)
    for _ in range(3):
        use(pool, "a")
        use(pool, "b")
    assert [cast(Counted, held).releases for held in memory.made] == [1, 1]


def test_a_start_that_fails_gives_its_reservation_back_before_its_call_ends() -> None:
    memory = CountingMemory(enough=True)
    factory = Factory()
    pool = BrowserPool(factory, size=4, wait=1, room=memory)
    factory.fail = True
    with pool.lease("a") as lease:
        with pytest.raises(BrowserFailure):
            lease.browser()
        assert [cast(Counted, held).releases for held in memory.made] == [1]  # the call goes on without it
    assert [cast(Counted, held).releases for held in memory.made] == [1]


# -- what the pool keeps ------------------------------------------------------------------------------------
def test_connections_without_a_browser_are_forgotten() -> None:
    """Each sign-in has a key of its own, and a long-running service signs in again and again: the pool keeps
    an entry only for a connection that has a browser (white-box: ``_slots`` has no public view)."""
    clock = ManualClock()
    pool = BrowserPool(Factory(), size=2, wait=1, idle=60, clock=clock)
    for _ in range(20):
        with pool.temporary():
            pass
    with pool.lease("never-started"):
        pass
    use(pool, "idle")
    clock.now += 61
    assert pool.close_idle() == 1
    assert len(pool._slots) == 0
    pool.close()


def test_only_unused_browsers_are_looked_up_in_the_store(busy: Callable[[BrowserPool, str], None]) -> None:
    asked: list[str] = []

    def linked(key: str) -> bool:
        asked.append(key)
        return True

    pool = BrowserPool(Factory(), size=3, wait=1, idle=900, linked=linked)
    busy(pool, "busy")
    use(pool, "idle")
    assert pool.close_unlinked() == 0
    assert asked == ["idle"]  # one indexed read each: none for a browser that no check would close
    pool.close()


# -- the sweeping thread -----------------------------------------------------------------------------------
def test_a_pool_that_only_checks_links_still_sweeps_and_its_sweeper_ends_with_it() -> None:
    before = sweepers()
    pool = BrowserPool(Factory(), size=2, wait=1, idle=0, linked=lambda key: True)
    use(pool, "a")
    mine = sweepers() - before
    assert len(mine) == 1
    pool.close()
    (sweeper,) = mine
    sweeper.join(2)
    assert not sweeper.is_alive()


def test_a_forked_worker_starts_a_sweeper_of_its_own() -> None:
    """Threads do not survive ``fork``: a worker forked after the pool swept in its parent sweeps anew. Here the
    fork is played by recording another process as the sweeper's (white-box)."""
    before = sweepers()
    pool = BrowserPool(Factory(), size=2, wait=1, idle=60)
    use(pool, "a")
    pool._sweeper_pid = -1  # the parent's, as a forked child inherits it
    use(pool, "b")
    assert len(sweepers() - before) == 2
    pool.close()
