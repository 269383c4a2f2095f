"""The demo's stop signal: the first stops it, a second must not cut the stop short (``adapters/demo.py``)."""

from __future__ import annotations

import signal

import pytest

from adapters.demo import StopOnFirstSignal


@pytest.mark.parametrize(
    ("first", "second"),
    [
        # `make demo` stopped by SIGTERM to its group: the demo gets the group's, then the one make passes on.
        (signal.SIGTERM, signal.SIGTERM),
        (signal.SIGINT, signal.SIGINT),  # Ctrl-C pressed twice
        (signal.SIGHUP, signal.SIGTERM),  # the terminal closed, then a service manager's stop
    ],
)
def test_only_the_first_stop_signal_interrupts(first: int, second: int) -> None:
    end = StopOnFirstSignal()
    with pytest.raises(KeyboardInterrupt):
        end(first, None)
    # Arriving while the first unwinds (before the demo's `finally` ignores signals), a second interrupt
    # ended the demo there and left its stand-in and service running on their ports.
    end(second, None)  # returns: no KeyboardInterrupt
    end(first, None)
