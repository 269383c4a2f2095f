"""The browser pool behind ``SeleniumPlatformGateway``, with stand-in browsers (no Chromium needed): one
browser per connection, least recently used closed first, calls of one connection one at a time, other
connections in parallel, bounded waits, replacement and closing."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any, cast

import pytest
from prometheus_client import REGISTRY
from selenium.webdriver.remote.webdriver import WebDriver

from adapters.platform import procfs
from adapters.platform.browser import Browser, BrowserFailure
from adapters.platform.browser_pool import BrowserPool, PoolBusy
from adapters.platform.memory_room import MemoryRoom
from adapters.platform.selenium_platform_gateway import SeleniumPlatformGateway


class FakeDriver:
    def __init__(self, number: int) -> None:
        self.number = number
        self.quit_called = False

    def quit(self) -> None:
        self.quit_called = True


class Factory:
    def __init__(self) -> None:
        self.made: list[FakeDriver] = []
        self.fail = False

    def __call__(self) -> Browser:
        if self.fail:
            raise RuntimeError("chromium is missing")
        driver = FakeDriver(len(self.made))
        self.made.append(driver)
        return Browser(cast(WebDriver, driver))


def driver_of(browser: Browser) -> FakeDriver:
    return cast(Any, browser.driver)


def use(pool: BrowserPool, key: str) -> FakeDriver:
    with pool.lease(key) as lease:
        return driver_of(lease.browser())


def test_one_browser_per_connection_kept_warm() -> None:
    factory = Factory()
    pool = BrowserPool(factory, size=2, wait=1)
    assert use(pool, "a") is use(pool, "a")
    assert use(pool, "b") is not use(pool, "a")
    assert len(factory.made) == 2 and pool.live() == 2


def test_least_recently_used_browser_is_closed_beyond_the_size() -> None:
    factory = Factory()
    pool = BrowserPool(factory, size=2, wait=1)
    a, b = use(pool, "a"), use(pool, "b")
    use(pool, "a")  # b is now the least recently used
    c = use(pool, "c")
    assert b.quit_called and not a.quit_called and not c.quit_called
    assert pool.live() == 2
    assert use(pool, "b") is not b  # started afresh, closing a (now the least recently used)
    assert a.quit_called


def test_calls_of_one_connection_are_serialised_and_others_run_in_parallel() -> None:
    pool = BrowserPool(Factory(), size=4, wait=5)
    active: dict[str, int] = {"a": 0, "b": 0}
    peak: dict[str, int] = {"a": 0, "b": 0}
    overlap = threading.Event()
    lock = threading.Lock()

    def call(key: str) -> None:
        with pool.lease(key) as lease:
            lease.browser()
            with lock:
                active[key] += 1
                peak[key] = max(peak[key], active[key])
                if active["a"] and active["b"]:
                    overlap.set()
            time.sleep(0.15)
            with lock:
                active[key] -= 1

    threads = [threading.Thread(target=call, args=(key,)) for key in ("a", "a", "a", "b", "b")]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert peak == {"a": 1, "b": 1}
    assert overlap.is_set()
    assert time.monotonic() - started >= 3 * 0.15  # a's three calls one after another


def test_a_start_waits_a_bounded_time_when_every_browser_is_busy() -> None:
    pool = BrowserPool(Factory(), size=1, wait=0.3)
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with pool.lease("a") as lease:
            lease.browser()
            holding.set()
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    holding.wait(5)
    started = time.monotonic()
    with pytest.raises(PoolBusy), pool.lease("b") as lease:
        lease.browser()
    assert 0.25 <= time.monotonic() - started < 2
    release.set()
    holder.join()
    assert use(pool, "b").number == 1  # once a is idle, it makes room


def test_a_discarded_browser_is_replaced_on_next_use() -> None:
    factory = Factory()
    pool = BrowserPool(factory, size=1, wait=1)
    with pool.lease("a") as lease:
        first = driver_of(lease.browser())
        lease.discard()
        assert first.quit_called and pool.live() == 0
        second = driver_of(lease.browser())
    assert second is not first and pool.live() == 1


def test_a_browser_that_cannot_start_is_a_browser_failure_and_frees_its_place() -> None:
    factory = Factory()
    factory.fail = True
    pool = BrowserPool(factory, size=1, wait=1)
    with pytest.raises(BrowserFailure), pool.lease("a") as lease:
        lease.browser()
    assert pool.live() == 0
    factory.fail = False
    assert use(pool, "a").number == 0


def test_close_quits_every_browser_and_refuses_later_calls() -> None:
    factory = Factory()
    pool = BrowserPool(factory, size=3, wait=1)
    for key in ("a", "b", "c"):
        use(pool, key)
    pool.close()
    assert all(d.quit_called for d in factory.made) and pool.live() == 0
    with pytest.raises(PoolBusy), pool.lease("a"):
        pass


class ManualClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_browser_unused_for_the_idle_time_is_closed_and_started_again_when_needed() -> None:
    factory, clock = Factory(), ManualClock()
    pool = BrowserPool(factory, size=3, wait=1, idle=600, clock=clock)
    a, b = use(pool, "a"), use(pool, "b")
    clock.now += 300
    use(pool, "b")  # b is used again: its idle time starts over
    clock.now += 299
    assert pool.close_idle() == 0 and pool.live() == 2
    clock.now += 1  # a: unused for 600 s; b: for 300 s
    assert pool.close_idle() == 1
    assert a.quit_called and not b.quit_called and pool.live() == 1
    again = use(pool, "a")
    assert again is not a and pool.live() == 2
    pool.close()


def test_a_browser_in_use_is_never_closed_as_idle() -> None:
    factory, clock = Factory(), ManualClock()
    pool = BrowserPool(factory, size=2, wait=1, idle=60, clock=clock)
    use(pool, "a")
    with pool.lease("a") as lease:
        driver = driver_of(lease.browser())
        clock.now += 3600  # a long call, or the lease taken an hour after the last one
        assert pool.close_idle() == 0 and not driver.quit_called
    pool.close()


def test_idle_browsers_are_kept_when_the_idle_time_is_0() -> None:
    factory, clock = Factory(), ManualClock()
    pool = BrowserPool(factory, size=2, wait=1, idle=0, clock=clock)
    use(pool, "a")
    clock.now += 10**9
    assert pool.close_idle() == 0 and pool.live() == 1
    pool.close()


def test_the_pool_closes_idle_browsers_by_itself() -> None:
    factory = Factory()
    pool = BrowserPool(factory, size=2, wait=1, idle=0.2)  # looked at every second
    driver = use(pool, "a")
    deadline = time.monotonic() + 5
    while pool.live() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pool.live() == 0 and driver.quit_called
    pool.close()


def test_the_unused_browser_of_a_connection_no_longer_linked_is_closed() -> None:
    """An unlinked connection (or a deleted account) had its platform session erased from the store, but a
    worker's warm browser kept it in its profile until it was idle for ``idle`` seconds (15 minutes)."""
    factory, clock = Factory(), ManualClock()
    linked = {"a", "b", "c"}
    pool = BrowserPool(factory, size=3, wait=1, idle=900, clock=clock, linked=lambda key: key in linked)
    a, b = use(pool, "a"), use(pool, "b")
    assert pool.close_unlinked() == 0 and pool.live() == 2
    linked -= {"a", "c"}
    with pool.lease("c") as lease:  # a call in flight for a connection just unlinked: never cut short
        c = driver_of(lease.browser())
        assert pool.close_unlinked() == 1 and not c.quit_called
    assert a.quit_called and not b.quit_called and pool.live() == 2
    assert pool.close_unlinked() == 1 and c.quit_called and pool.live() == 1  # once it is done
    pool.close()


def test_the_pool_closes_the_browsers_of_unlinked_connections_by_itself() -> None:
    factory = Factory()
    linked = {"a"}
    pool = BrowserPool(factory, size=2, wait=1, idle=4, linked=lambda key: key in linked)  # looked at each second
    driver = use(pool, "a")
    linked.clear()
    deadline = time.monotonic() + 5
    while pool.live() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pool.live() == 0 and driver.quit_called
    pool.close()


def test_a_failing_link_check_closes_nothing() -> None:
    def broken(key: str) -> bool:
        raise OSError("disk I/O error")

    factory = Factory()
    pool = BrowserPool(factory, size=2, wait=1, idle=900, linked=broken)
    driver = use(pool, "a")
    with pytest.raises(OSError):
        pool.close_unlinked()
    assert pool.live() == 1 and not driver.quit_called
    pool.close()


# --- temporary browsers (signing in) ------------------------------------------------------------------
def test_a_temporary_browser_counts_against_the_size_and_is_closed_after() -> None:
    """Signing in takes a browser of its own. It used to start outside the pool: a burst of links ran
    more browsers than ``workers x pool size``, the figure an operator plans memory by."""
    factory = Factory()
    pool = BrowserPool(factory, size=1, wait=1)
    warm = use(pool, "a")
    with pool.temporary() as browser:
        assert warm.quit_called  # the idle warm browser made room
        assert pool.live() == 1
        temporary = driver_of(browser)
    assert temporary.quit_called and pool.live() == 0
    assert use(pool, "a") is not warm  # a's next call starts a new one


def test_a_temporary_browser_waits_a_bounded_time_for_room_and_closes_on_failure() -> None:
    pool = BrowserPool(Factory(), size=1, wait=0.3)
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with pool.lease("a") as lease:
            lease.browser()
            holding.set()
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    holding.wait(5)
    started = time.monotonic()
    with pytest.raises(PoolBusy), pool.temporary():
        pass
    assert 0.25 <= time.monotonic() - started < 2 and pool.live() == 1
    release.set()
    holder.join()
    with pytest.raises(RuntimeError), pool.temporary() as browser:
        raise RuntimeError("the sign-in failed")
    assert driver_of(browser).quit_called and pool.live() == 0


class Held:
    """A reservation ``Memory`` made; knows whether it was released."""

    def __init__(self) -> None:
        self.released = False

    def release(self) -> None:
        self.released = True


class Memory:
    """What ``room`` answers: a reservation while the machine has memory for one more browser, else None.
    Counts the questions and keeps the reservations it made."""

    def __init__(self, enough: bool) -> None:
        self.enough = enough
        self.asked = 0
        self.made: list[Held] = []

    def __call__(self, *, first: bool = False) -> Held | None:
        self.asked += 1
        if not self.enough and not first:
            return None
        self.made.append(Held())
        return self.made[-1]


def memory_short() -> float:
    return REGISTRY.get_sample_value("community_api_browser_memory_short_total") or 0.0


def test_without_memory_for_another_browser_the_least_recently_used_idle_one_makes_room(
    caplog: pytest.LogCaptureFixture,
) -> None:
    memory = Memory(enough=True)
    pool = BrowserPool(Factory(), size=4, wait=1, room=memory)
    a, b, c = use(pool, "a"), use(pool, "b"), use(pool, "c")
    memory.enough = False  # below the size, but the machine has no room for a fourth
    short = memory_short()
    with caplog.at_level(logging.WARNING, logger="adapters.platform.browser_pool"):
        d = use(pool, "d")
    assert memory_short() == short + 1  # counted once for the start
    said = [r.getMessage() for r in caplog.records if r.name == "adapters.platform.browser_pool"]
    # The journal says why the start closed a browser (or waits), once:
    assert len(said) == 1 and said[0].startswith("no memory for another browser beside the 3 running")
    assert a.quit_called and not b.quit_called and not c.quit_called  # one closed for one started
    assert pool.live() == 3 and not d.quit_called


def test_without_memory_and_no_idle_browser_a_start_waits_a_bounded_time_then_gives_up() -> None:
    memory = Memory(enough=True)
    pool = BrowserPool(Factory(), size=4, wait=0.6, room=memory)
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with pool.lease("a") as lease:
            lease.browser()
            holding.set()
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    holding.wait(5)
    memory.enough = False
    started = time.monotonic()
    with pytest.raises(PoolBusy, match="no memory for another browser beside the 1 running"), pool.lease("b") as lease:
        lease.browser()
    assert 0.55 <= time.monotonic() - started < 3
    assert memory.asked >= 2  # looked again while it waited: memory is freed by others too
    memory.enough = True  # freed elsewhere: the next start goes ahead beside the busy browser
    assert use(pool, "b").number == 1 and pool.live() == 2
    release.set()
    holder.join()


def test_memory_freed_elsewhere_lets_a_waiting_start_go_ahead() -> None:
    memory = Memory(enough=True)
    pool = BrowserPool(Factory(), size=4, wait=5, room=memory)
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with pool.lease("a") as lease:
            lease.browser()
            holding.set()
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    holding.wait(5)
    memory.enough = False
    threading.Timer(0.3, lambda: setattr(memory, "enough", True)).start()  # no notify: only polling sees it
    started = time.monotonic()
    assert use(pool, "b").number == 1
    assert 0.25 <= time.monotonic() - started < 2
    release.set()
    holder.join()


def test_the_first_browser_starts_whatever_the_memory_says() -> None:
    memory = Memory(enough=False)
    pool = BrowserPool(Factory(), size=2, wait=0.2, room=memory)
    assert use(pool, "a").number == 0  # a pool that can start none serves nothing
    assert memory.asked == 1 and memory.made[0].released  # reserved all the same: other starts count it
    assert use(pool, "b").number == 1  # a closed to make room
    assert pool.live() == 1


def test_a_start_holds_its_reservation_until_the_call_that_started_it_ends() -> None:
    memory = Memory(enough=True)
    pool = BrowserPool(Factory(), size=4, wait=1, room=memory)
    with pool.lease("a") as lease:
        lease.browser()
        assert len(memory.made) == 1 and not memory.made[0].released  # its page is still loading
        lease.browser()  # the same browser: nothing asked again
        assert len(memory.made) == 1
    assert memory.made[0].released  # its browser has taken its memory: the machine's figure shows it now
    use(pool, "a")
    assert len(memory.made) == 1  # a warm browser asks nothing
    use(pool, "b")
    assert len(memory.made) == 2 and memory.made[1].released


def test_a_start_that_fails_or_is_discarded_gives_its_reservation_back() -> None:
    memory = Memory(enough=True)
    factory = Factory()
    pool = BrowserPool(factory, size=4, wait=1, room=memory)
    use(pool, "a")
    factory.fail = True
    with pytest.raises(BrowserFailure), pool.lease("b") as lease:
        lease.browser()
        pytest.fail("the browser started")
    assert len(memory.made) == 2 and memory.made[1].released  # released at once, not when the call ends
    factory.fail = False
    with pool.lease("c") as lease:
        lease.browser()
        lease.discard()  # it crashed: the call tries again on a fresh browser
        lease.browser()
        assert [held.released for held in memory.made] == [True, True, True, False]  # one live: the fresh one
    assert all(held.released for held in memory.made)


def test_the_machines_available_memory_is_read_from_proc(tmp_path: Path) -> None:
    assert (procfs.memory_available_mib() or 0) > 0  # this machine's, in MiB
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       16318412 kB\nMemFree:          811548 kB\nMemAvailable:    9437184 kB\n")
    assert procfs.memory_available_mib(str(meminfo)) == 9216
    meminfo.write_text("MemTotal:       16318412 kB\nMemFree:          811548 kB\n")  # before Linux 3.14
    assert procfs.memory_available_mib(str(meminfo)) is None
    assert procfs.memory_available_mib(str(tmp_path / "missing")) is None


def cgroup_level(folder: Path, limit: str, current: int, inactive_file: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "memory.max").write_text(limit + "\n")
    (folder / "memory.current").write_text(f"{current}\n")
    (folder / "memory.stat").write_text(f"anon 1000\nfile 5000\ninactive_file {inactive_file}\nactive_file 42\n")


MIB = 1024 * 1024


def test_the_cgroups_headroom_is_the_least_over_its_levels_with_a_limit(tmp_path: Path) -> None:
    """systemd's MemoryMax= on the unit, or a limit on its slice, or a container's: each level above the
    process counts; page cache the kernel reclaims first is room too."""
    root, own = tmp_path / "cgroup", tmp_path / "self-cgroup"
    own.write_text("0::/system.slice/community-api.service\n")
    assert procfs.cgroup_headroom_mib(str(own), str(root)) is None  # no cgroup v2 mounted there
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpu memory pids\n")
    assert procfs.cgroup_headroom_mib(str(own), str(root)) is None  # no level below the root: no limit
    cgroup_level(root / "system.slice", "max", 900 * MIB, 0)
    cgroup_level(root / "system.slice" / "community-api.service", str(2048 * MIB), 1800 * MIB, 100 * MIB)
    assert procfs.cgroup_headroom_mib(str(own), str(root)) == 2048 - 1800 + 100
    cgroup_level(root / "system.slice", str(1000 * MIB), 990 * MIB, 20 * MIB)  # the slice is tighter
    assert procfs.cgroup_headroom_mib(str(own), str(root)) == 30
    cgroup_level(root / "system.slice", str(1000 * MIB), 1200 * MIB, 0)  # over its limit: no room, not less
    assert procfs.cgroup_headroom_mib(str(own), str(root)) == 0
    own.write_text("12:memory:/docker/abc\n")  # cgroup v1, and no v1 memory controller mounted there
    assert procfs.cgroup_headroom_mib(str(own), str(root)) is None
    own.write_text("0::/\n")  # a container's own cgroup, seen as the root of its namespace
    cgroup_level(root, str(1024 * MIB), 700 * MIB, 0)
    assert procfs.cgroup_headroom_mib(str(own), str(root)) == 324
    assert procfs.cgroup_headroom_mib(str(tmp_path / "missing"), str(root)) is None


def cgroup_v1_level(folder: Path, limit: int, usage: int, hierarchical: int, inactive: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "memory.limit_in_bytes").write_text(f"{limit}\n")
    (folder / "memory.usage_in_bytes").write_text(f"{usage}\n")
    (folder / "memory.stat").write_text(
        f"cache 5000\nrss 1000\ninactive_file 7\nhierarchical_memory_limit {hierarchical}\n"
        f"total_cache 9000\ntotal_inactive_file {inactive}\n"
    )


V1_NO_LIMIT = 9223372036854771712  # what cgroup v1 writes for "no limit" (2^63 rounded down to a page)


def test_a_cgroup_v1_memory_limit_counts_too(tmp_path: Path) -> None:
    """A host with cgroup v1 (or a hybrid one, v1's memory controller beside an empty v2 tree), as older
    Docker hosts and systemd's ``MemoryLimit=`` there have it: the process's memory cgroup, whose limit
    holds its ancestors' too (``hierarchical_memory_limit``), or in a container without a cgroup namespace
    the controller's mount itself."""
    root, own = tmp_path / "cgroup", tmp_path / "self-cgroup"
    (root / "unified").mkdir(parents=True)  # hybrid: v2 mounted elsewhere, no cgroup.controllers at root
    own.write_text(
        "12:cpu,cpuacct:/system.slice/x.service\n5:memory:/system.slice/x.service\n0::/system.slice/x.service\n"
    )
    assert procfs.cgroup_headroom_mib(str(own), str(root)) is None  # no v1 memory controller mounted
    memory = root / "memory"
    cgroup_v1_level(memory, V1_NO_LIMIT, 9000 * MIB, V1_NO_LIMIT, 0)  # the host's root: no limit
    assert procfs.cgroup_headroom_mib(str(own), str(root)) is None  # the service's own cgroup not there: the root's
    unit = memory / "system.slice" / "x.service"
    cgroup_v1_level(unit, 2048 * MIB, 1800 * MIB, 2048 * MIB, 100 * MIB)
    assert procfs.cgroup_headroom_mib(str(own), str(root)) == 2048 - 1800 + 100
    cgroup_v1_level(unit, V1_NO_LIMIT, 900 * MIB, 1000 * MIB, 0)  # only the slice above it is limited
    assert procfs.cgroup_headroom_mib(str(own), str(root)) == 100
    cgroup_v1_level(unit, 1000 * MIB, 1200 * MIB, 1000 * MIB, 0)  # over its limit: no room, not less
    assert procfs.cgroup_headroom_mib(str(own), str(root)) == 0
    own.write_text("9:memory:/docker/0123abcd\n")  # a container: its cgroup is the controller's mount
    cgroup_v1_level(memory, 1024 * MIB, 700 * MIB, 1024 * MIB, 0)
    assert procfs.cgroup_headroom_mib(str(own), str(root)) == 324
    (memory / "memory.usage_in_bytes").write_text("not a number\n")
    assert procfs.cgroup_headroom_mib(str(own), str(root)) is None  # unreadable: unknown, not "no room"


def test_local_browsers_ask_for_memory_and_a_grids_do_not() -> None:
    local = SeleniumPlatformGateway("https://platform.test", "https://platform.test/api2")
    grid = SeleniumPlatformGateway("https://platform.test", "https://platform.test/api2", remote_url="http://grid:4444")
    try:
        assert isinstance(cast(Any, local)._pool._room, MemoryRoom)
        assert cast(Any, grid)._pool._room is None
    finally:
        local.close()
        grid.close()


def test_a_call_refused_for_want_of_a_browser_says_when_to_try_again() -> None:
    """Every browser busy (or no memory for another): the call answers 503 ``platform_unavailable`` with
    ``retryAfter`` (REST's Retry-After), and nothing was sent, so a retry under the same Idempotency-Key acts."""
    from adapters.platform.page_fetch import PageRunner
    from adapters.platform.platform_client import BROWSER_RETRY_AFTER, PlatformClient
    from community_api.errors import PlatformUnavailable

    pool = BrowserPool(Factory(), size=1, wait=0.2)
    client = PlatformClient(PageRunner("https://platform.test", "https://platform.test/api2", 0.2), pool, 0.2)
    with pool.lease("a") as lease:
        lease.browser()
        with pytest.raises(PlatformUnavailable) as refused, client.fresh_browser():
            pytest.fail("a browser was free")
    assert refused.value.details == {"retryAfter": BROWSER_RETRY_AFTER} and BROWSER_RETRY_AFTER == 5
    assert refused.value.may_have_acted is False
    assert "no browser is free: all 1 browsers are busy" in refused.value.message
