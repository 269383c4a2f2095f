"""A per-thread cache of the two look-ups every data request makes (the key by its prefix, and the
connection with its platform session), valid only while the database has not changed.

Why it is safe: revocation must take effect on the very next request in every worker, so no cache may
outlive a change. Each use first asks SQLite whether anything changed since the cache was filled:
``PRAGMA data_version`` changes when any *other* connection (another thread, another worker process,
the throttle's storage) commits, and ``total_changes`` counts this connection's own writes. A revocation
is committed before its answer is sent, so the request after it — in any worker — sees a new stamp and
reads the database again. The cache only saves the reads (and the decryption) of an unchanged database;
it never answers from older data than a fresh read would.

Why it is worth it: on an unchanged database the stamp costs one cheap pragma instead of two queries,
their row parsing and an AES-GCM decryption on every request (see docs/performance.md).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")
MAX_ENTRIES = 4096  # garbage prefixes must not grow it without bound


class ReadCache:
    def __init__(self, connection: Callable[[], sqlite3.Connection]) -> None:
        self._connection = connection
        self._local = threading.local()

    def get(self, key: Hashable, load: Callable[[], T]) -> T:
        conn = self._connection()
        stamp = (id(conn), conn.execute("PRAGMA data_version").fetchone()[0], conn.total_changes)
        entries: dict[Hashable, Any] | None = getattr(self._local, "entries", None)
        if entries is None or getattr(self._local, "stamp", None) != stamp or len(entries) >= MAX_ENTRIES:
            entries = {}
            self._local.entries = entries
            self._local.stamp = stamp
        if key in entries:
            value: T = entries[key]
            return value
        value = load()
        # Loading reads only, so the stamp taken before it still describes what was read.
        entries[key] = value
        return value
