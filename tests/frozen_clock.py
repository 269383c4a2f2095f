"""Time frozen for the limits storages' tests, with memory://'s expiry timers stopped before it thaws.

limits' ``MemoryStorage`` expires entries from a ``threading.Timer`` that fires 10 ms after a call and
reads ``time.time()``. Under freezegun that read goes through freezegun's patch; a timer firing while the
patch is being undone fails in its thread (an ``IndexError`` inside freezegun), which pytest reports as
an unhandled-thread warning against whatever test runs then. Each such timer is cancelled, or waited
for, while the clock is still frozen.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import cast

from freezegun import freeze_time
from freezegun.api import FrozenDateTimeFactory
from limits.storage import MemoryStorage


def stop_memory_storage_timers() -> None:
    """Cancel, and wait for, every live expiry timer of a ``MemoryStorage``."""
    for thread in threading.enumerate():
        function = getattr(thread, "function", None)  # a Timer's callback
        if isinstance(thread, threading.Timer) and isinstance(getattr(function, "__self__", None), MemoryStorage):
            thread.cancel()
            thread.join()


@contextmanager
def frozen_at(start: datetime) -> Iterator[FrozenDateTimeFactory]:
    with freeze_time(start) as clock:
        try:
            yield cast(FrozenDateTimeFactory, clock)
        finally:
            stop_memory_storage_timers()
