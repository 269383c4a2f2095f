"""Request counts buffered per worker reach the store without waiting for another request, survive a
failed write, and are written when the worker stops."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from datetime import datetime

import pytest

from community_api.usage import UsageRecorder
from fakes.clock import FakeClock
from fakes.key_store import FakeKeyStore

DAY = "2026-11-01"


def stored(store: FakeKeyStore, key_id: str = "key_1") -> int:
    return store.key_usage(key_id, DAY).requests_total


def until(condition: object, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return True
        time.sleep(0.02)
    return False


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_counts_of_a_quiet_worker_are_written_within_the_interval(clock: FakeClock) -> None:
    store = FakeKeyStore()
    recorder = UsageRecorder(store, clock, flush_interval=0.3)
    for _ in range(3):
        recorder.record("key_1")
    assert stored(store) == 0  # buffered: no write on the request's path within the interval
    # No request follows: the counts are written anyway, once the interval has passed.
    assert until(lambda: stored(store) == 3)
    recorder.record("key_1")
    assert until(lambda: stored(store) == 4)
    recorder.close()


class FailingOnce(FakeKeyStore):
    def __init__(self) -> None:
        super().__init__()
        self.failures = 1

    def add_usage(self, counts: Mapping[tuple[str, str], int], last_used: Mapping[str, datetime]) -> None:
        if self.failures:
            self.failures -= 1
            raise OSError("disk full")
        super().add_usage(counts, last_used)


def test_a_failed_write_fails_no_request_and_loses_no_count(clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    store = FailingOnce()
    recorder = UsageRecorder(store, clock, flush_interval=0)  # writes through: each record writes
    with caplog.at_level(logging.WARNING, logger="community_api.usage"):
        recorder.record("key_1")  # the write fails: no exception reaches the request
    assert "could not be written" in caplog.text
    assert stored(store) == 0
    recorder.record("key_1")
    assert stored(store) == 2  # the first count was kept and written with the second


def test_close_writes_what_is_left(clock: FakeClock) -> None:
    store = FakeKeyStore()
    recorder = UsageRecorder(store, clock, flush_interval=3600)
    recorder.record("key_1")
    recorder.record("key_1")
    assert stored(store) == 0
    recorder.close()
    assert stored(store) == 2


def test_a_forked_worker_does_not_write_its_parents_counts_again(clock: FakeClock) -> None:
    store = FakeKeyStore()
    recorder = UsageRecorder(store, clock, flush_interval=3600)
    recorder.record("key_1")
    child = os.fork()
    if child == 0:  # the child: what would it write at exit?
        written = FakeKeyStore()
        recorder._store = written  # (reached into: the child's writes go where the test can count them)
        recorder.close()
        os._exit(written.key_usage("key_1", DAY).requests_total)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    recorder.close()
    assert stored(store) == 1


class FailingFor(FakeKeyStore):
    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    def add_usage(self, counts: Mapping[tuple[str, str], int], last_used: Mapping[str, datetime]) -> None:
        if self.failures:
            self.failures -= 1
            raise OSError(28, "No space left on device")
        super().add_usage(counts, last_used)


def test_writes_that_keep_failing_are_logged_once_a_minute(clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    """A full disk for three minutes, a write a second: before, 180 lines, each with a traceback."""
    store = FailingFor(180)
    recorder = UsageRecorder(store, clock, flush_interval=0)
    with caplog.at_level(logging.WARNING, logger="community_api.usage"):
        for _ in range(180):
            recorder.record("key_1")
            clock.advance(seconds=1)
        recorder.record("key_1")  # room again
    lines = [r for r in caplog.records if r.name == "community_api.usage"]
    # At 0 s with the traceback, at 60 s and 120 s a line each, and once when it works again.
    assert [bool(r.exc_info) for r in lines] == [True, False, False, False]
    assert "could not be written" in lines[0].getMessage()
    assert "61 failed writes in a row" in lines[1].getMessage() and "No space left" in lines[1].getMessage()
    assert "written again, after 180 failed writes" in lines[-1].getMessage()
    assert stored(store) == 181  # no count lost


class UsedDuringAFailedWrite(FakeKeyStore):
    """Its first write fails after the key was used again meanwhile (another thread's request, a minute on)."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self.clock = clock
        self.recorder: UsageRecorder | None = None
        self.failures = 1
        self.last_used_written: dict[str, datetime] = {}

    def add_usage(self, counts: Mapping[tuple[str, str], int], last_used: Mapping[str, datetime]) -> None:
        if self.failures and self.recorder is not None:
            self.failures -= 1
            self.clock.advance(minutes=1)
            self.recorder.record("key_1")
            raise OSError("disk full")
        self.last_used_written.update(last_used)
        super().add_usage(counts, last_used)


def test_a_failed_write_never_sets_last_used_back(clock: FakeClock) -> None:
    """The counts a failed write kept join those made meanwhile; the key's last use stays the later one."""
    store = UsedDuringAFailedWrite(clock)
    recorder = UsageRecorder(store, clock, flush_interval=3600)
    store.recorder = recorder
    recorder.record("key_1")
    first_use = clock.now()
    recorder.flush()  # fails, with a use made during it
    recorder.flush()
    assert store.key_usage("key_1", clock.now().date().isoformat()).requests_total == 2
    assert store.last_used_written == {"key_1": clock.now()} and clock.now() > first_use
    recorder.close()


def test_usage_read_in_a_worker_includes_its_own_buffered_counts(clock: FakeClock) -> None:
    """``GET /v1/me`` in the worker that served the requests shows them at once, not an interval later."""
    store = FakeKeyStore()
    recorder = UsageRecorder(store, clock, flush_interval=3600)
    recorder.record("key_1")
    recorder.record("key_1")
    assert recorder.usage("key_1").requests_total == 2
    recorder.close()
