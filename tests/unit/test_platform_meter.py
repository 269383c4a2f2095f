"""``platform_meter``: what a step paid for is used first; requests past it are admitted by the pace as
they go, or refused with nothing counted; outside a platform call nothing is counted."""

from __future__ import annotations

import pytest

from community_api import platform_meter
from community_api.errors import RateLimited
from community_api.platform_meter import metered
from fakes.clock import FakeClock
from fakes.platform_pace import FakePlatformPace

ACCOUNT = "a" * 32


@pytest.fixture
def pace() -> FakePlatformPace:
    return FakePlatformPace(FakeClock(), reads_per_minute=10, writes_per_minute=3)


def test_what_the_step_paid_is_used_first_then_the_pace_is_asked(pace: FakePlatformPace) -> None:
    pace.admit(ACCOUNT, 2)  # as on_platform does before the call
    with metered(pace, ACCOUNT, reads=2, writes=0) as meter:
        platform_meter.spend(reads=1)
        assert pace.status(ACCOUNT).reads_left == 8
        platform_meter.spend(reads=3)  # one paid, two more
        assert pace.status(ACCOUNT).reads_left == 6
    assert (meter.reads_sent, meter.writes_sent) == (4, 0)


def test_a_refused_request_counts_nothing(pace: FakePlatformPace) -> None:
    pace.admit(ACCOUNT, 1)  # another call's read
    pace.admit(ACCOUNT, 0, 1)  # another call's write
    pace.admit(ACCOUNT, 0, 1)  # this call's write, as on_platform admits it
    with metered(pace, ACCOUNT, reads=0, writes=1) as meter:
        platform_meter.spend(reads=8)  # a write's checks first
        with pytest.raises(RateLimited) as refused:
            platform_meter.spend(reads=2)
        assert refused.value.details["reason"] == "read_pace"
        platform_meter.spend(writes=1)  # the write it paid for
        with pytest.raises(RateLimited) as refused:
            platform_meter.spend(writes=2)
        assert refused.value.details["reason"] == "write_pace"
    assert (meter.reads_sent, meter.writes_sent) == (8, 1)
    assert pace.status(ACCOUNT).reads_left == 1 and pace.write_status(ACCOUNT).writes_left == 1


def test_a_call_holding_the_whole_pace_goes_on_uncounted(pace: FakePlatformPace) -> None:
    """A call larger than the limit takes the whole budget and passes, as one admitted at once would."""
    pace.admit(ACCOUNT, 4)
    with metered(pace, ACCOUNT, reads=4, writes=0) as meter:
        platform_meter.spend(reads=4)
        platform_meter.spend(reads=30)  # six counted, the limit reached; the rest of the call passes
        platform_meter.spend(reads=5)
    assert meter.reads_sent == 39 and pace.status(ACCOUNT).reads_last_minute == 10
    with metered(pace, ACCOUNT, reads=0, writes=0), pytest.raises(RateLimited):
        platform_meter.spend(reads=1)  # another call: the budget is spent


def test_outside_a_platform_call_nothing_is_counted(pace: FakePlatformPace) -> None:
    platform_meter.spend(reads=5, writes=5)  # signing in, adopting a session
    with metered(pace, ACCOUNT, reads=0, writes=0):
        pass
    platform_meter.spend(reads=5)
    assert pace.status(ACCOUNT).reads_left == 10 and pace.write_status(ACCOUNT).writes_left == 3


@pytest.mark.parametrize(("reads", "writes"), [(-1, 0), (0, -1)])
def test_a_negative_count_is_a_fault(reads: int, writes: int) -> None:
    with pytest.raises(ValueError):
        platform_meter.spend(reads=reads, writes=writes)


def test_a_call_that_asks_past_the_limit_at_once_counts_what_it_paid_for(pace: FakePlatformPace) -> None:
    """The reads admitted before the call are part of it: four paid, then thirty asked in one batch, is one
    call holding the whole budget (ten), not four plus ten."""
    pace.admit(ACCOUNT, 4)
    with metered(pace, ACCOUNT, reads=4, writes=0) as meter:
        platform_meter.spend(reads=30)
    assert meter.reads_sent == 30 and pace.status(ACCOUNT).reads_last_minute == 10


def test_a_request_in_steps_counts_at_most_the_limit_across_its_steps(pace: FakePlatformPace) -> None:
    """A feed read in batches: each batch is a call, and the calls before it (``earlier_reads``, as
    ``deps.on_platform`` sets from ``counted``) hold part of the budget already. Six read by the first
    step, two admitted for this one and five sent: the request holds all ten, so the rest is not counted."""
    pace.admit(ACCOUNT, 6)  # the first step
    pace.admit(ACCOUNT, 2, counted=6)  # this step, as on_platform admits it
    with metered(pace, ACCOUNT, reads=2, writes=0) as meter:
        meter.earlier_reads = 6
        platform_meter.spend(reads=5)
    assert pace.status(ACCOUNT).reads_last_minute == 10


def test_writes_in_steps_count_at_most_the_limit_across_their_steps(pace: FakePlatformPace) -> None:
    """The same rule for writes: two written by an earlier step, one paid for here and two sent. The
    request holds the three the pace allows; the second is not counted past them."""
    pace.admit(ACCOUNT, 0, 2)
    pace.admit(ACCOUNT, 0, 1, counted=2)
    with metered(pace, ACCOUNT, reads=0, writes=1) as meter:
        meter.earlier_writes = 2
        platform_meter.spend(writes=2)
    assert meter.writes_sent == 2 and pace.write_status(ACCOUNT).writes_left == 0


def test_a_write_past_what_was_paid_is_paid_for_once(pace: FakePlatformPace) -> None:
    """One write paid, two sent (one admitted as it went), then one more: that one is admitted alone, not
    counted as two because the first batch overspent what was paid."""
    pace.admit(ACCOUNT, 0, 1)
    with metered(pace, ACCOUNT, reads=0, writes=1) as meter:
        platform_meter.spend(writes=2)
        platform_meter.spend(writes=1)
    assert meter.writes_sent == 3 and pace.write_status(ACCOUNT).writes_left == 0
