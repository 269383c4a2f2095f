"""One time limit for a whole gateway call (``deadline.py``): the time left shrinks as the call runs, a nested
limit never extends a nearer outer one, each limit ends with its block, and other threads keep their own."""

from __future__ import annotations

import threading
import time

import pytest

from adapters.platform.deadline import bounded, remaining, within


def test_outside_any_call_the_default_is_the_time_left() -> None:
    assert remaining(7.0) == 7.0


def test_the_time_left_shrinks_as_the_call_runs() -> None:
    with within(5.0):
        first = remaining(0)
        time.sleep(0.05)
        assert 4.5 < remaining(0) < first <= 5.0


def test_a_nested_limit_may_shorten_the_call_but_never_lengthen_it() -> None:
    with within(1.0):
        with within(10.0):
            assert remaining(0) <= 1.0
        with within(0.2):
            assert remaining(0) <= 0.2
        assert 0.2 < remaining(0) <= 1.0  # the outer limit again once the inner block ends
    assert remaining(3.0) == 3.0


def test_a_limit_ends_with_its_block_even_when_it_raises() -> None:
    with pytest.raises(RuntimeError), within(1.0):
        raise RuntimeError("the call failed")
    assert remaining(3.0) == 3.0


def test_each_thread_has_its_own_limit() -> None:
    seen: list[float] = []
    with within(1.0):
        worker = threading.Thread(target=lambda: seen.append(remaining(9.0)))
        worker.start()
        worker.join()
    assert seen == [9.0]  # the browser pool's sweeper, warm-up and shutdown run outside any call


def test_a_bounded_method_runs_within_its_objects_time_out() -> None:
    class Gateway:
        _timeout = 2.0

        @bounded
        def call(self) -> float:
            return remaining(0)

    assert 1.5 < Gateway().call() <= 2.0
    assert remaining(3.0) == 3.0
