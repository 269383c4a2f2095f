"""Per-key request counting.

Counting writes to the store on the hot path of every request, so a worker may buffer its counts and
write them at most every ``flush_interval`` seconds (0 writes through). The rules:
- counts are written within about ``flush_interval`` seconds of being made, by a writer thread of the
  worker, whether or not it serves another request (before, a worker's last counts waited for its next
  request, so another worker's ``GET /v1/me`` did not show them);
- a write that fails (the database locked past its busy time-out, a full disk) keeps the counts for the
  next one; the request being served is not failed for it. The first failure is logged with its
  traceback; while writes go on failing, one line a minute says so (before, a line with a traceback per
  write, every second per worker, for as long as a disk stayed full), and one more when they work again;
- ``close()`` writes what is left: the service calls it when a worker exits. Counts of a worker killed
  outright are lost; they are counts, not data, and the loss is bounded by the interval.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections import Counter
from datetime import date, datetime, timedelta

from community_api.model import KeyUsage
from community_api.ports import Clock, KeyStore

log = logging.getLogger(__name__)

FAILURE_LOG_INTERVAL = timedelta(minutes=1)  # while writes keep failing, how often that is logged


class UsageRecorder:
    def __init__(self, store: KeyStore, clock: Clock, flush_interval: float = 0.0) -> None:
        self._store = store
        self._clock = clock
        self._flush_interval = flush_interval
        self._start_buffer()
        # A forked worker starts with an empty buffer (its parent writes its own) and no writer thread
        # (threads do not survive a fork). Held weakly: a recorder that is gone is not kept for forks.
        forget = weakref.WeakMethod(self._start_buffer)
        os.register_at_fork(after_in_child=lambda: (method := forget()) is not None and method())

    def _start_buffer(self) -> None:
        self._lock = threading.Lock()
        self._pending = threading.Condition(self._lock)  # notified when the buffer stops being empty
        # Counted by (key id, UTC day as a date); the day becomes its ISO text only when written.
        self._counts: Counter[tuple[str, date]] = Counter()
        self._last_used: dict[str, datetime] = {}
        self._last_flush = time.monotonic()
        self._writer: threading.Thread | None = None
        self._closed = threading.Event()
        self._failures = 0  # writes failed in a row
        self._failure_logged_at: datetime | None = None

    def record(self, key_id: str) -> None:
        now = self._clock.now()
        with self._lock:
            if not self._counts and self._flush_interval > 0:
                self._wake_writer()
            self._counts[(key_id, now.date())] += 1
            self._last_used[key_id] = now
        if self._flush_interval <= 0:
            self.flush()  # writing through; otherwise the writer thread writes, off the request's path

    def flush(self) -> None:
        """Write the buffered counts. On failure they stay buffered for the next write, and it is logged."""
        with self._lock:
            counts, self._counts = self._counts, Counter()
            last_used, self._last_used = self._last_used, {}
            self._last_flush = time.monotonic()
        if not counts:
            return
        try:
            self._store.add_usage({(key_id, day.isoformat()): n for (key_id, day), n in counts.items()}, last_used)
        except Exception as error:
            with self._lock:
                self._counts.update(counts)
                for key_id, at in last_used.items():
                    self._last_used[key_id] = max(at, self._last_used.get(key_id, at))
                self._log_failure(error)
            return
        if self._failures:
            with self._lock:
                failures, self._failures, self._failure_logged_at = self._failures, 0, None
            if failures:
                log.warning("usage counts written again, after %d failed writes", failures)

    def _log_failure(self, error: Exception) -> None:
        """(Lock held.) The first failure of a run with its traceback; then a line a minute at most."""
        self._failures += 1
        now = self._clock.now()
        if self._failures == 1:
            log.warning("usage counts could not be written; kept for the next write", exc_info=error)
        elif self._failure_logged_at is None or now - self._failure_logged_at >= FAILURE_LOG_INTERVAL:
            log.warning(
                "usage counts still cannot be written (%d failed writes in a row, the last: %s: %s); kept",
                self._failures,
                type(error).__name__,
                error,
            )
        else:
            return
        self._failure_logged_at = now

    def close(self) -> None:
        """Stop the writer thread and write what is left (a worker's exit)."""
        with self._lock:
            self._closed.set()
            self._pending.notify_all()
        self.flush()

    def usage(self, key_id: str) -> KeyUsage:
        self.flush()
        return self._store.key_usage(key_id, self._clock.now().date().isoformat())

    def _wake_writer(self) -> None:
        """(Lock held.) The buffer is about to hold counts: the writer thread writes them once the
        interval since the last write has passed."""
        if self._writer is None and not self._closed.is_set():
            self._writer = threading.Thread(target=self._write_when_due, name="usage-writer", daemon=True)
            self._writer.start()
        self._pending.notify()

    def _write_when_due(self) -> None:
        while not self._closed.is_set():
            with self._lock:
                while not self._counts and not self._closed.is_set():
                    self._pending.wait()
                wait = self._flush_interval - (time.monotonic() - self._last_flush)
            if wait > 0 and self._closed.wait(wait):
                return  # closing: close() writes what is left
            self.flush()
