"""One contract for every ``Throttle``: the fake, and ``LimitsThrottle`` on SQLite, memory:// and Redis.

Time is frozen with freezegun (the storages read ``time.time()``; the fake reads a clock that answers
the frozen time). The frozen start lies after the real clock on purpose: memory:// expires entries on a
timer thread, which freezegun leaves on real time, and which would drop entries stamped in the past.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from freezegun.api import FrozenDateTimeFactory
from limits.errors import ConfigurationError

from adapters.throttle.limits_throttle import LimitsThrottle, hmac_gap_drawer
from community_api.errors import RateLimited
from community_api.ports import Throttle
from fakes.throttle import FakeThrottle
from scripts.processes import free_port
from tests.contract.redis_support import flush_redis, running_redis_server
from tests.frozen_clock import frozen_at

START = datetime(2100, 1, 1, 12, 0, tzinfo=UTC)
GAP = 37.0
SALT = "contract-test-salt"
REDIS_SERVER = "/usr/bin/redis-server"

Draw = Callable[[str, float], float]


def fixed_gap(connection_id: str, last_reserved_at: float) -> float:
    return GAP


class FrozenClock:
    """The frozen time, for the fake (freezegun moves it)."""

    def now(self) -> datetime:
        return datetime.now(UTC)


@pytest.fixture(scope="session")
def redis_uri() -> Iterator[str]:
    with running_redis_server() as uri:
        yield uri


# --- the throttles under test -----------------------------------------------------------------------

KINDS = ["fake", "mmap", "sqlite", "memory", "redis"]


@pytest.fixture
def frozen() -> Iterator[FrozenDateTimeFactory]:
    with frozen_at(START) as clock:
        yield clock


@pytest.fixture(params=KINDS)
def make(request: pytest.FixtureRequest, tmp_path: Path, frozen: FrozenDateTimeFactory) -> Callable[..., Throttle]:
    """``make(draw_gap=...)`` builds a throttle of the kind under test (several share one storage)."""
    kind: str = request.param
    uri = ""
    if kind == "sqlite":
        uri = f"sqlite:///{tmp_path / 'throttle.sqlite3'}"
    elif kind == "mmap" or kind == "mmap":
        uri = f"mmap://{tmp_path / 'throttle.mmap'}"
    elif kind == "memory":
        uri = "memory://"
    elif kind == "redis":
        uri = request.getfixturevalue("redis_uri")
        flush_redis(uri)

    def build(draw_gap: Draw | None = fixed_gap) -> Throttle:
        if kind == "fake":
            return FakeThrottle(FrozenClock(), draw_gap=draw_gap)
        return LimitsThrottle(uri, salt=SALT, draw_gap=draw_gap)

    return build


@pytest.fixture
def throttle(make: Callable[..., Throttle]) -> Throttle:
    return make()


def send(throttle: Throttle, connection_id: str = "c1") -> None:
    throttle.commit(throttle.reserve(connection_id))


def refused_after(throttle: Throttle, connection_id: str = "c1") -> int:
    with pytest.raises(RateLimited) as refused:
        throttle.reserve(connection_id)
    assert refused.value.code == "rate_limited"
    assert refused.value.details["retryAfter"] == refused.value.retry_after
    # The DM throttle's refusal names itself, as the platform pace's and ``busy`` do: a client of POST /v1/dms
    # tells it from the write pace, which may refuse the same route for a shorter wait.
    assert refused.value.details["reason"] == "dm_throttle"
    return refused.value.retry_after


# --- the pace ---------------------------------------------------------------------------------------


def test_first_send_is_allowed(throttle: Throttle) -> None:
    send(throttle)
    assert throttle.quota("c1").sent_last_hour == 1


def test_a_send_right_at_the_end_of_the_gap_starts_a_gap_of_its_own(
    make: Callable[..., Throttle], frozen: FrozenDateTimeFactory
) -> None:
    """A send exactly one gap after the last is let through (the window is half-open), and the gap that
    follows is counted from it, not from the send before, although both are within the pace record's 45 s."""
    throttle = make(draw_gap=lambda connection_id, last: 30.0)
    send(throttle)
    frozen.tick(30)
    send(throttle)
    assert refused_after(throttle) == 30


# The fake runs in one process: nothing can slip in between its read and its write, so it has no such rule.
@pytest.mark.parametrize("make", [kind for kind in KINDS if kind != "fake"], indirect=True)
def test_a_reserve_stalled_between_its_read_and_its_write_is_refused(
    make: Callable[..., Throttle], frozen: FrozenDateTimeFactory
) -> None:
    """A process paused for 14 s or more between reading the pace and recording its reservation (a swap
    storm, a stopped VM) cannot vouch that no other worker got in between: refused, nothing counted, and the
    pace it recorded holds the next send back."""
    stalled: list[bool] = []

    def draw(connection_id: str, last: float) -> float:
        if not stalled:  # the second reserve's read of the pace (the first had none to read): it stalls
            frozen.tick(15)
        stalled.append(True)
        return 30.0

    throttle = make(draw_gap=draw)
    send(throttle)
    frozen.tick(40)
    assert refused_after(throttle) == 30  # the stalled reservation's own pace, from its record
    assert throttle.quota("c1").sent_last_hour == 1


def test_a_throttle_storage_that_does_not_answer_is_not_ready() -> None:
    throttle = LimitsThrottle(f"redis://127.0.0.1:{free_port()}/0", salt=SALT)  # a port nothing listens on
    assert throttle.ready() == "the throttle storage does not answer"


def test_a_send_inside_the_gap_is_refused_with_the_exact_retry_after(
    throttle: Throttle, frozen: FrozenDateTimeFactory
) -> None:
    send(throttle)
    frozen.tick(10)
    assert refused_after(throttle) == 27
    frozen.tick(0.5)
    assert refused_after(throttle) == 27  # 26.5 s, rounded up
    frozen.tick(25.5)
    assert refused_after(throttle) == 1
    frozen.tick(0.999)
    assert refused_after(throttle) == 1
    frozen.tick(0.001)
    send(throttle)  # exactly the gap
    assert throttle.quota("c1").sent_last_hour == 2


def test_waiting_the_retry_after_is_enough(throttle: Throttle, frozen: FrozenDateTimeFactory) -> None:
    send(throttle)
    frozen.tick(3.25)
    retry_after = refused_after(throttle)
    assert retry_after == math.ceil(GAP - 3.25)
    frozen.tick(retry_after)
    send(throttle)


def test_a_refused_reserve_consumes_nothing(throttle: Throttle, frozen: FrozenDateTimeFactory) -> None:
    send(throttle)
    for _ in range(5):
        frozen.tick(5)
        refused_after(throttle)
    frozen.tick(GAP - 25)
    send(throttle)
    assert throttle.quota("c1").sent_last_hour == 2


def test_the_gap_counts_from_the_reservation_not_the_commit(throttle: Throttle, frozen: FrozenDateTimeFactory) -> None:
    reservation = throttle.reserve("c1")
    frozen.tick(8)  # the platform takes its time
    throttle.commit(reservation)
    frozen.tick(GAP - 8)
    send(throttle)


def test_each_gap_is_drawn_anew_from_the_last_send(
    make: Callable[..., Throttle], frozen: FrozenDateTimeFactory
) -> None:
    first_send = START.timestamp()
    throttle = make(draw_gap=lambda connection_id, at: 30.0 if at == first_send else 45.0)
    send(throttle)
    frozen.tick(29)
    assert refused_after(throttle) == 1
    frozen.tick(1)
    send(throttle)  # 30 s after the first
    frozen.tick(30)
    assert refused_after(throttle) == 15  # the gap drawn for the second send is 45 s
    frozen.tick(15)
    send(throttle)


def test_a_draw_outside_30_to_45_seconds_is_held_to_it(
    make: Callable[..., Throttle], frozen: FrozenDateTimeFactory
) -> None:
    short = make(draw_gap=lambda connection_id, at: 0.0)
    send(short, "short")
    assert refused_after(short, "short") == 30
    long = make(draw_gap=lambda connection_id, at: 600.0)
    send(long, "long")
    assert refused_after(long, "long") == 45
    uneven = make(draw_gap=lambda connection_id, at: 33.2)
    send(uneven, "uneven")
    assert refused_after(uneven, "uneven") == 34  # whole seconds, rounded up


# --- hour and day -----------------------------------------------------------------------------------


def test_the_21st_send_in_an_hour_is_refused_until_the_oldest_leaves(
    throttle: Throttle, frozen: FrozenDateTimeFactory
) -> None:
    for i in range(20):
        if i:
            frozen.tick(46)
        send(throttle)
    frozen.tick(46)  # 920 s after the first send; the pace is free
    assert refused_after(throttle) == 3600 - 920
    assert throttle.quota("c1").sent_last_hour == 20
    frozen.move_to(START + timedelta(seconds=3599))
    assert refused_after(throttle) == 1
    frozen.move_to(START + timedelta(seconds=3600))  # the first send is now exactly an hour old
    send(throttle)
    # The pace (37 s) now waits, but the hour waits longer: the next-oldest send (at 46 s) must leave.
    assert refused_after(throttle) == 46
    assert throttle.quota("c1").sent_last_hour == 20
    assert throttle.quota("c1").sent_today == 21


def test_an_hourly_refusal_takes_no_pace(throttle: Throttle, frozen: FrozenDateTimeFactory) -> None:
    for i in range(20):
        if i:
            frozen.tick(46)
        send(throttle)
    frozen.move_to(START + timedelta(seconds=3599))
    refused_after(throttle)
    frozen.tick(1)
    send(throttle)  # had the refusal reserved the pace, this would wait


def test_the_101st_send_in_a_day_is_refused_until_the_oldest_leaves(
    throttle: Throttle, frozen: FrozenDateTimeFactory
) -> None:
    # 180 s apart: any hour (half-open) holds at most 20 of them, so the hourly limit never bites.
    for i in range(100):
        if i:
            frozen.tick(180)
        send(throttle)
    quota = throttle.quota("c1")
    assert (quota.sent_last_hour, quota.sent_today) == (20, 100)
    frozen.tick(180)  # 18,000 s after the first send
    assert throttle.quota("c1").sent_last_hour == 19
    assert refused_after(throttle) == 86_400 - 18_000
    frozen.move_to(START + timedelta(seconds=86_399.5))
    assert refused_after(throttle) == 1
    frozen.move_to(START + timedelta(seconds=86_400))
    send(throttle)
    assert throttle.quota("c1").sent_today == 100


# --- cancel, commit -----------------------------------------------------------------------------------


def test_cancel_gives_everything_back(throttle: Throttle, frozen: FrozenDateTimeFactory) -> None:
    reservation = throttle.reserve("c1")
    frozen.tick(2)
    throttle.cancel(reservation)
    quota = throttle.quota("c1")
    assert (quota.sent_last_hour, quota.sent_today, quota.next_allowed_at) == (0, 0, None)
    send(throttle)  # at once
    assert throttle.quota("c1").sent_last_hour == 1
    frozen.tick(1)
    assert refused_after(throttle) == GAP - 1


def test_cancel_after_earlier_sends_gives_back_only_its_own(throttle: Throttle, frozen: FrozenDateTimeFactory) -> None:
    send(throttle)
    frozen.tick(GAP)
    throttle.cancel(throttle.reserve("c1"))
    send(throttle)
    assert throttle.quota("c1").sent_last_hour == 2
    assert refused_after(throttle) == GAP


def test_cancelled_reservations_never_count_toward_the_hour(throttle: Throttle, frozen: FrozenDateTimeFactory) -> None:
    for _ in range(30):
        throttle.cancel(throttle.reserve("c1"))
        frozen.tick(1)
    for i in range(20):
        if i:
            frozen.tick(46)
        send(throttle)
    assert throttle.quota("c1").sent_last_hour == 20


def test_a_late_cancel_leaves_the_pace_to_run_out(throttle: Throttle, frozen: FrozenDateTimeFactory) -> None:
    reservation = throttle.reserve("c1")
    frozen.tick(20)
    throttle.cancel(reservation)
    assert throttle.quota("c1").sent_last_hour == 0
    assert refused_after(throttle) == GAP - 20
    frozen.tick(GAP - 20)
    send(throttle)


def test_a_reservation_left_open_holds_the_pace_but_counts_no_send(
    throttle: Throttle, frozen: FrozenDateTimeFactory
) -> None:
    throttle.reserve("c1")  # the platform never answered
    quota = throttle.quota("c1")
    assert quota.sent_last_hour == 0
    assert quota.next_allowed_at == START + timedelta(seconds=GAP)
    frozen.tick(GAP)
    send(throttle)


def test_commit_and_cancel_settle_a_reservation_once(throttle: Throttle, frozen: FrozenDateTimeFactory) -> None:
    reservation = throttle.reserve("c1")
    throttle.commit(reservation)
    throttle.commit(reservation)
    throttle.cancel(reservation)  # too late: it was sent
    assert throttle.quota("c1").sent_last_hour == 1
    assert refused_after(throttle) == GAP


# --- connections, quota -------------------------------------------------------------------------------


def test_connections_are_independent(throttle: Throttle, frozen: FrozenDateTimeFactory) -> None:
    send(throttle, "c1")
    send(throttle, "c2")
    frozen.tick(5)
    refused_after(throttle, "c1")
    send(throttle, "c3")
    assert throttle.quota("c2").sent_last_hour == 1
    assert throttle.quota("c4").sent_last_hour == 0
    assert throttle.quota("c4").next_allowed_at is None


def test_quota_figures(throttle: Throttle, frozen: FrozenDateTimeFactory) -> None:
    quota = throttle.quota("c1")
    assert (quota.sent_last_hour, quota.sent_today, quota.hourly_limit, quota.daily_limit) == (0, 0, 20, 100)
    assert quota.next_allowed_at is None
    for i in range(3):
        if i:
            frozen.tick(60)
        send(throttle)
    quota = throttle.quota("c1")
    assert (quota.sent_last_hour, quota.sent_today) == (3, 3)
    assert quota.next_allowed_at == START + timedelta(seconds=120 + GAP)
    frozen.tick(GAP)
    assert throttle.quota("c1").next_allowed_at is None
    frozen.move_to(START + timedelta(hours=1, seconds=60))  # the first two sends left the hour
    quota = throttle.quota("c1")
    assert (quota.sent_last_hour, quota.sent_today) == (1, 3)
    frozen.move_to(START + timedelta(days=1, seconds=120))
    quota = throttle.quota("c1")
    assert (quota.sent_last_hour, quota.sent_today) == (0, 0)


def test_quota_next_allowed_at_matches_retry_after(throttle: Throttle, frozen: FrozenDateTimeFactory) -> None:
    send(throttle)
    frozen.tick(12.4)
    quota = throttle.quota("c1")
    assert quota.next_allowed_at is not None
    wait = (quota.next_allowed_at - datetime.now(UTC)).total_seconds()
    assert refused_after(throttle) == math.ceil(wait)


def test_the_default_draw_stays_within_30_to_45_seconds_and_varies(
    make: Callable[..., Throttle], frozen: FrozenDateTimeFactory
) -> None:
    throttle = make(draw_gap=None)
    gaps = []
    for _ in range(18):
        sent_at = datetime.now(UTC)
        send(throttle)
        next_allowed_at = throttle.quota("c1").next_allowed_at
        assert next_allowed_at is not None
        gap = (next_allowed_at - sent_at).total_seconds()
        assert 30 <= gap <= 45 and gap == int(gap)
        frozen.tick(1)
        assert refused_after(throttle) == gap - 1
        frozen.tick(gap - 2)
        assert refused_after(throttle) == 1
        frozen.tick(1)
        gaps.append(gap)
        frozen.tick(3.5)  # sends at varied times
    assert len(set(gaps)) > 1


# --- LimitsThrottle only --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["mmap", "sqlite", "redis"])
def test_workers_sharing_a_storage_draw_the_same_gap(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest, frozen: FrozenDateTimeFactory
) -> None:
    if kind == "sqlite":
        uri = f"sqlite:///{tmp_path / 'throttle.sqlite3'}"
    elif kind == "mmap":
        uri = f"mmap://{tmp_path / 'throttle.mmap'}"
    else:
        uri = request.getfixturevalue("redis_uri")
        flush_redis(uri)
    one, other = LimitsThrottle(uri, salt=SALT), LimitsThrottle(uri, salt=SALT)
    for _ in range(10):
        send(one)
        frozen.tick(1)
        assert one.quota("c1") == other.quota("c1")
        assert refused_after(one) == refused_after(other)
        next_allowed_at = other.quota("c1").next_allowed_at
        assert next_allowed_at is not None
        frozen.move_to(next_allowed_at)
        send(other)  # the other worker lets the send through at that very moment
        frozen.tick(45.25)


def test_a_different_salt_draws_different_gaps() -> None:
    one, other = hmac_gap_drawer("one"), hmac_gap_drawer("other")
    times = [1_900_000_000.0 + 7.3 * i for i in range(40)]
    assert [one("c1", t) for t in times] == [one("c1", t) for t in times]
    assert [one("c1", t) for t in times] != [other("c1", t) for t in times]
    assert {one("c1", t) for t in times} <= {float(g) for g in range(30, 46)}


def test_the_gap_takes_every_whole_second_from_30_to_45_and_differs_by_account() -> None:
    """Each of the 16 gaps is drawn (45 s included), and two accounts that reserve at the same moment do not
    share one sequence of gaps: a client watching one account cannot read off another's next gap."""
    draw = hmac_gap_drawer("salt")
    times = [1_900_000_000.0 + 3.1 * i for i in range(2000)]
    assert {draw("c1", t) for t in times} == {float(g) for g in range(30, 46)}
    assert [draw("c1", t) for t in times[:40]] != [draw("c2", t) for t in times[:40]]


@pytest.mark.parametrize("uri", ["nosuch://x", "async+memory://", "memcached://127.0.0.1:1"])
def test_limits_throttle_refuses_storages_it_cannot_use(uri: str) -> None:
    with pytest.raises(ConfigurationError):
        LimitsThrottle(uri, salt=SALT)
