"""Per-key request counting.

Counting writes to the store on the hot path of every request, so a worker may buffer its counts and
write them at most every ``flush_interval`` seconds (0 writes through). Buffered counts of a worker that
is killed before it flushes are lost; they are counts, not data, and the loss is bounded by the interval.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import date, datetime

from community_api.model import KeyUsage
from community_api.ports import Clock, KeyStore


class UsageRecorder:
    def __init__(self, store: KeyStore, clock: Clock, flush_interval: float = 0.0) -> None:
        self._store = store
        self._clock = clock
        self._flush_interval = flush_interval
        self._lock = threading.Lock()
        # Counted by (key id, UTC day as a date); the day becomes its ISO text only when written.
        self._counts: Counter[tuple[str, date]] = Counter()
        self._last_used: dict[str, datetime] = {}
        self._last_flush = time.monotonic()

    def record(self, key_id: str) -> None:
        now = self._clock.now()
        with self._lock:
            self._counts[(key_id, now.date())] += 1
            self._last_used[key_id] = now
            due = time.monotonic() - self._last_flush >= self._flush_interval
        if due:
            self.flush()

    def flush(self) -> None:
        with self._lock:
            counts, self._counts = self._counts, Counter()
            last_used, self._last_used = self._last_used, {}
            self._last_flush = time.monotonic()
        if counts:
            self._store.add_usage({(key_id, day.isoformat()): n for (key_id, day), n in counts.items()}, last_used)

    def usage(self, key_id: str) -> KeyUsage:
        self.flush()
        return self._store.key_usage(key_id, self._clock.now().date().isoformat())
