"""One time limit for a whole gateway call, shared by every wait under it.

Why: a call waits in several places one after the other — for its connection's earlier call, for a free
browser, for a browser to start, for a page, for the platform's answer, and again when a crashed browser
is replaced and the read run once more. Bounding each wait by the gateway's time-out let a call take
several time-outs (a chaos run saw requests still unanswered after 60 s where the bound is 20 s), and
Selenium talks to its driver with no time-out at all unless told. So each public gateway call sets a
deadline (``within``), and every wait under it asks how much is left (``remaining``).

The deadline is per thread: a gateway call runs on the thread that serves its request, and the waits it
does are on that thread.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

_local = threading.local()
F = TypeVar("F", bound=Callable[..., Any])


def remaining(default: float) -> float:
    """Seconds left before the current call's deadline (0 or less: it has passed); ``default`` outside any
    call (a browser started at warm-up, closed at shutdown)."""
    deadline: float | None = getattr(_local, "deadline", None)
    return default if deadline is None else deadline - time.monotonic()


@contextlib.contextmanager
def within(seconds: float) -> Iterator[None]:
    """Run the block under a deadline ``seconds`` from now; an outer, nearer deadline still holds."""
    outer: float | None = getattr(_local, "deadline", None)
    mine = time.monotonic() + seconds
    _local.deadline = mine if outer is None else min(outer, mine)
    try:
        yield
    finally:
        _local.deadline = outer


def bounded(method: F) -> F:
    """A gateway method that runs ``within`` its object's ``timeout`` (the attribute ``_timeout``)."""

    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        with within(self._timeout):
            return method(self, *args, **kwargs)

    return run  # type: ignore[return-value]
