"""One contract for every ``PlatformPace``: the fake, and ``LimitsPlatformPace`` on mmap://, SQLite,
memory:// and Redis, with time frozen by freezegun (the storages read ``time.time()``).

The rules (``community_api.ports.PlatformPace``): the platform's 429 holds a connection; at most N reads in
any 60 s; a refusal counts nothing and its ``retry_after`` is exact (that many seconds later the call
passes, one second less it does not); several instances on one storage (workers) share everything.

Test instants stay off the exact window edges (a read exactly 60 s old), where ``limits``' own storages
differ (SQLite lets such entries expire, memory:// and Redis still count them); a real clock never lands
there, and the computed wait counts such a read, erring towards the longer wait."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from freezegun.api import FrozenDateTimeFactory
from limits.errors import ConfigurationError

from adapters.throttle.limits_platform_pace import LimitsPlatformPace
from community_api.errors import RateLimited
from community_api.ports import PlatformPace
from fakes.platform_pace import FakePlatformPace
from tests.contract.redis_support import flush_redis, running_redis_server
from tests.frozen_clock import frozen_at

START = datetime(2100, 1, 1, 12, 0, tzinfo=UTC)  # after the real clock: see test_throttle.py
LIMIT = 60
WRITES = 20


class FrozenClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


@pytest.fixture(scope="module")
def redis_uri() -> Iterator[str]:
    with running_redis_server() as uri:
        yield uri


@pytest.fixture
def frozen() -> Iterator[FrozenDateTimeFactory]:
    with frozen_at(START) as clock:
        yield clock


@pytest.fixture(params=["fake", "mmap", "sqlite", "memory", "redis"])
def make(request: pytest.FixtureRequest, tmp_path: Path, frozen: FrozenDateTimeFactory) -> Callable[[], PlatformPace]:
    """Builds paces of the kind under test; two built by one test share their storage, as workers do."""
    kind: str = request.param
    if kind == "fake":
        shared = FakePlatformPace(FrozenClock(), reads_per_minute=LIMIT, writes_per_minute=WRITES)
        return lambda: shared
    if kind == "sqlite":
        uri = f"sqlite:///{tmp_path / 'pace.sqlite3'}"
    elif kind == "mmap":
        uri = f"mmap://{tmp_path / 'pace.mmap'}"
    elif kind == "memory":
        memory = LimitsPlatformPace("memory://", LIMIT, WRITES)  # one process: share the instance
        return lambda: memory
    else:
        uri = request.getfixturevalue("redis_uri")
        flush_redis(uri)
    return lambda: LimitsPlatformPace(uri, LIMIT, WRITES)


def refused(pace: PlatformPace, reads: int = 1, connection_id: str = "c1", writes: int = 0) -> RateLimited:
    with pytest.raises(RateLimited) as error:
        pace.admit(connection_id, reads, writes)
    assert error.value.details["retryAfter"] == error.value.retry_after
    return error.value


def test_the_61st_read_in_a_minute_is_refused_with_the_exact_retry_after(
    make: Callable[[], PlatformPace], frozen: FrozenDateTimeFactory
) -> None:
    worker_a, worker_b = make(), make()
    for i in range(LIMIT):
        (worker_a if i % 2 else worker_b).admit("c1", 1)
        frozen.tick(0.5)  # 60 reads over 30 s: the first at 0 s, the last at 29.5 s
    frozen.tick(0.25)  # 30.25 s
    error = refused(worker_b)
    assert error.details["reason"] == "read_pace"
    assert error.retry_after == 30  # the read of 0 s leaves the window at 60 s
    frozen.tick(29)
    assert refused(worker_a).retry_after == 1
    frozen.tick(1)  # 60.25 s: the read of 0 s has left, the one of 0.5 s has not
    worker_a.admit("c1", 1)
    assert refused(worker_b).retry_after == 1  # the window slides: the read of 0.5 s leaves next
    assert worker_a.status("c1").reads_last_minute == LIMIT
    assert worker_a.status("c1").reads_left == 0


def test_a_minute_of_reads_at_one_instant_waits_the_whole_window(
    make: Callable[[], PlatformPace], frozen: FrozenDateTimeFactory
) -> None:
    pace = make()
    for _ in range(LIMIT):
        pace.admit("c1", 1)
    # At that very instant: 60 s later those reads are exactly a minute old and still inside.
    assert refused(pace).retry_after == 61
    frozen.tick(0.25)
    assert refused(pace).retry_after == 60
    frozen.tick(59)
    assert refused(pace).retry_after == 1
    frozen.tick(1)
    pace.admit("c1", 1)


def test_a_feed_of_30_pages_counts_30_and_a_refusal_counts_nothing(
    make: Callable[[], PlatformPace], frozen: FrozenDateTimeFactory
) -> None:
    pace = make()
    pace.admit("c1", 30)
    frozen.tick(10.25)
    pace.admit("c1", 20)
    assert refused(pace, reads=30).retry_after == 50  # the 30 of 0 s must leave: 60 s, 49.75 s from now
    pace.admit("c1", 10)  # the refusal took nothing: 10 still fit
    refused(pace)
    assert pace.status("c1").reads_last_minute == LIMIT
    pace.admit("c2", 2)  # another connection has its own budget


def test_a_call_larger_than_the_budget_takes_the_whole_budget(
    make: Callable[[], PlatformPace], frozen: FrozenDateTimeFactory
) -> None:
    pace = make()
    pace.admit("c1", LIMIT + 40)
    assert pace.status("c1").reads_last_minute == LIMIT
    refused(pace)


def test_what_a_call_counted_already_counts_towards_its_wait_and_its_whole_budget(
    make: Callable[[], PlatformPace], frozen: FrozenDateTimeFactory
) -> None:
    """``counted``: a call that sent some requests asks for more. Refused, it waits for the whole call, as a
    retry sends it all again; once it holds the whole budget, the rest of it passes uncounted."""
    pace = make()
    pace.admit("c1", 5)  # another call at 0 s
    frozen.tick(10.25)
    pace.admit("c1", 45)  # another at 10.25 s
    frozen.tick(10)
    pace.admit("c1", 5)  # this call's first requests, at 20.25 s: 55 in the window
    error = pace_refusal_of(pace, reads=6, counted=5)
    # Six more alone would fit once the five of 0 s leave (39.75 s from now); the whole call, eleven,
    # needs the 45 of 10.25 s gone too: 51 s (at 50 s they are exactly 60 s old, and still count).
    assert error.retry_after == 51
    pace.admit("c1", 5, counted=5)  # the refusal counted nothing: five still fit
    assert pace.status("c1").reads_last_minute == LIMIT
    pace.admit("c2", LIMIT)  # another account's call holding its whole budget
    pace.admit("c2", 40, counted=LIMIT)  # goes on without counting
    pace.admit("c2", 40, counted=LIMIT + 40)  # and on
    assert pace.status("c2").reads_last_minute == LIMIT
    refused(pace, connection_id="c2")  # another call of that account is refused


def pace_refusal_of(pace: PlatformPace, reads: int, counted: int) -> RateLimited:
    with pytest.raises(RateLimited) as error:
        pace.admit("c1", reads, counted=counted)
    assert error.value.details["reason"] == "read_pace"
    return error.value


# Redis ends a hold on its own clock, which freezegun cannot move: it has the real-time test below.
@pytest.mark.parametrize("make", ["fake", "mmap", "sqlite", "memory"], indirect=True)
def test_the_platforms_429_holds_every_call_then_ends_exactly(
    make: Callable[[], PlatformPace], frozen: FrozenDateTimeFactory
) -> None:
    worker_a, worker_b = make(), make()
    worker_a.hold("c1", 90)
    for reads, writes in ((0, 0), (1, 0), (0, 1)):  # writes are held too
        error = refused(worker_b, reads=reads, writes=writes)
        assert (error.retry_after, error.details["reason"]) == (90, "platform_hold")
    assert worker_b.status("c1").held_until == START + timedelta(seconds=90)
    assert worker_b.status("c1").next_read_at == START + timedelta(seconds=90)  # every read is left, yet held
    assert worker_b.write_status("c1").next_write_at == START + timedelta(seconds=90)
    worker_b.hold("c1", 30)  # a shorter hold does not cut the longer one
    frozen.tick(89)
    assert refused(worker_a).retry_after == 1
    frozen.tick(1)
    worker_a.admit("c1", 1)
    assert worker_b.status("c1").held_until is None
    assert worker_b.status("c1").reads_last_minute == 1  # held calls counted nothing
    worker_b.admit("c2", 0)  # other connections were never held
    worker_b.admit("c1", 0, 1)
    assert worker_b.write_status("c1").writes_last_minute == 1  # held writes counted nothing either


@pytest.mark.parametrize("make", ["fake", "mmap", "sqlite", "memory"], indirect=True)
def test_a_longer_hold_replaces_a_shorter_one(make: Callable[[], PlatformPace], frozen: FrozenDateTimeFactory) -> None:
    worker_a, worker_b = make(), make()
    worker_a.hold("c1", 30)
    frozen.tick(10)
    worker_b.hold("c1", 60)
    assert refused(worker_a).retry_after == 60
    frozen.tick(59)
    assert refused(worker_b, reads=0, writes=1).retry_after == 1


@pytest.mark.parametrize("make", ["fake", "mmap", "sqlite", "memory"], indirect=True)
def test_a_call_holding_its_whole_budget_is_held_too(
    make: Callable[[], PlatformPace], frozen: FrozenDateTimeFactory
) -> None:
    """A feed read of more pages than the budget holds its whole budget; the platform's 429 on one of its
    pages holds the rest of them, uncounted as they would be."""
    pace = make()
    pace.admit("c1", LIMIT)
    pace.hold("c1", 30)
    with pytest.raises(RateLimited) as error:
        pace.admit("c1", 1, counted=LIMIT)
    assert (error.value.retry_after, error.value.details["reason"]) == (30, "platform_hold")


def test_a_hold_on_redis_ends_on_time(redis_uri: str) -> None:
    """Real time (2 s), since Redis expires the hold itself."""
    flush_redis(redis_uri)
    worker_a, worker_b = LimitsPlatformPace(redis_uri, LIMIT), LimitsPlatformPace(redis_uri, LIMIT)
    worker_a.hold("c1", 2)
    assert refused(worker_b).retry_after == 2
    time.sleep(2.05)
    worker_b.admit("c1", 1)


def test_the_21st_write_in_a_minute_is_refused_with_the_exact_retry_after(
    make: Callable[[], PlatformPace], frozen: FrozenDateTimeFactory
) -> None:
    worker_a, worker_b = make(), make()
    for i in range(WRITES):
        (worker_a if i % 2 else worker_b).admit("c1", 0, 1)
        frozen.tick(1.5)  # 20 writes over 28.5 s: the first at 0 s, the last at 28.5 s
    frozen.tick(0.25)  # 30.25 s
    error = refused(worker_b, reads=0, writes=1)
    assert (error.details["reason"], error.retry_after) == ("write_pace", 30)  # the write of 0 s leaves at 60 s
    assert "20 platform writes a minute" in error.message
    status = worker_a.write_status("c1")
    assert (status.writes_per_minute, status.writes_last_minute, status.writes_left) == (WRITES, WRITES, 0)
    assert status.next_write_at == START + timedelta(seconds=60.25)  # now + the whole seconds of the wait
    frozen.tick(29)
    assert refused(worker_a, reads=0, writes=1).retry_after == 1
    frozen.tick(1)  # 60.25 s: the write of 0 s has left, the one of 1.5 s has not
    worker_a.admit("c1", 0, 1)
    assert refused(worker_b, reads=0, writes=1).retry_after == 2  # the window slides: 1.5 s leaves next
    assert refused(worker_b, reads=0, writes=2).retry_after == 3  # two wait for the one of 3 s to leave too


def test_reads_and_writes_have_budgets_of_their_own(
    make: Callable[[], PlatformPace], frozen: FrozenDateTimeFactory
) -> None:
    pace = make()
    pace.admit("c1", 0, WRITES)
    refused(pace, reads=0, writes=1)
    pace.admit("c1", LIMIT)  # every write spent, every read still there
    assert refused(pace).details["reason"] == "read_pace"
    assert pace.status("c1").reads_last_minute == LIMIT
    assert pace.write_status("c1").writes_last_minute == WRITES
    pace.admit("c2", 0, 1)  # another platform account writes on its own budget
    frozen.tick(0.25)
    assert refused(pace, reads=0, writes=WRITES + 5).retry_after == 60  # more than the budget: the whole of it
    assert pace.write_status("c2").writes_left == WRITES - 1


def test_a_call_is_reads_or_writes(make: Callable[[], PlatformPace]) -> None:
    pace = make()
    with pytest.raises(ValueError, match="reads or writes"):
        pace.admit("c1", 1, 1)
    assert pace.status("c1").reads_last_minute == 0 and pace.write_status("c1").writes_last_minute == 0


@pytest.mark.parametrize(("reads", "writes"), [(0, 20), (60, 0), (-1, 20)])
def test_a_pace_without_a_read_or_a_write_a_minute_is_refused(tmp_path: Path, reads: int, writes: int) -> None:
    with pytest.raises(ConfigurationError, match="at least one read and one write a minute"):
        LimitsPlatformPace(f"mmap://{tmp_path / 'pace.mmap'}", reads, writes)


def test_a_storage_that_does_not_answer_makes_the_pace_not_ready(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    assert LimitsPlatformPace(f"mmap://{tmp_path / 'pace.mmap'}", LIMIT).ready() is None
    unusable = LimitsPlatformPace(f"mmap://{tmp_path / 'a-file' / 'pace.mmap'}", LIMIT)  # its folder is a file
    assert unusable.ready() == "the platform pace's storage does not answer"
