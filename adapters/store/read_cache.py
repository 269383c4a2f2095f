"""A per-thread cache of the two look-ups every data request makes (the key by its prefix, and the
connection with its platform session), valid only while the database has not changed.

Why it is safe: revocation must take effect on the very next request in every worker, so no cache may
outlive a change. Each use first asks whether anything changed since the cache was filled: the file's
WAL-index header (``wal_index.py``: rewritten by every commit of any connection, read from shared memory
without a lock) or, when that cannot be read, ``PRAGMA data_version`` (changes when any *other*
connection — another thread, another worker process, the throttle's storage — commits); and
``total_changes`` counts this connection's own writes. A revocation
is committed before its answer is sent, so the request after it — in any worker — sees a new stamp and
reads the database again. The cache only saves the reads (and the decryption) of an unchanged database;
it never answers from older data than a fresh read would at the moment the stamp was taken.

``one_check()`` lets the look-ups of one request share one such question: inside the block, the version
read at its start stands for the database as the request found it, as if the request's look-ups had all
run at that instant. This thread's own writes are still seen at once (``total_changes`` is read on every
use). A value loaded inside the block is never older than that version, so keeping it under that stamp
cannot hide a later change: the next check outside the block sees a new version and drops it.

Why it is worth it: on an unchanged database the stamp costs a read of 96 bytes of shared memory (or one
pragma) instead of two queries, their row parsing and an AES-GCM decryption on every request (see
docs/performance.md).

A header that cannot be vouched for when a connection is first seen is tried again, at most once a
second, while that connection asks the pragma instead. The usual case is a service's start: the last
connection of the previous run removed the ``-wal`` file, so the workers' first reads find a WAL with no
header (nothing vouches for the ``-shm`` file until the first commit writes one); without the retry each
worker asked the pragma for as long as it lived (measured: 25–45 µs more worker CPU per request).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from adapters.store.wal_index import WalIndexHeader

T = TypeVar("T")
MAX_ENTRIES = 4096  # garbage prefixes must not grow it without bound
_DATA_VERSION = "PRAGMA data_version"
RETRY_SECONDS = 1.0  # how often a connection without a header tries to map one again


class _Local(threading.local):
    def __init__(self) -> None:
        self.stamp: tuple[object, int, int] | None = None
        self.entries: dict[Hashable, Any] = {}
        self.held: tuple[sqlite3.Connection, object] | None = None  # inside one_check(): (connection, version)
        # This thread's connection, the WAL-index header mapped for it (None: it could not be) and, when
        # none, the time (time.monotonic) from which to try again.
        self.watch: tuple[sqlite3.Connection, WalIndexHeader | None, float] | None = None


class ReadCache:
    def __init__(self, connection: Callable[[], sqlite3.Connection], database_path: str | None = None) -> None:
        """``database_path``: the file ``connection`` opens, whose WAL-index header then tells whether it
        changed (``wal_index.py``); None, or a header that cannot be read, asks ``PRAGMA data_version``."""
        self._connection = connection
        self._database_path = database_path
        self._local = _Local()

    def _version(self, conn: sqlite3.Connection) -> object:
        """A value that changes whenever another connection commits to the file."""
        local = self._local
        watch = local.watch
        # Holding ``conn`` keeps its id from being reused. The clock is read only while there is no header.
        if watch is None or watch[0] is not conn or (watch[1] is None and time.monotonic() >= watch[2]):
            header = WalIndexHeader.open(self._database_path) if self._database_path else None
            watch = local.watch = (conn, header, time.monotonic() + RETRY_SECONDS)
        if watch[1] is not None:
            stamp = watch[1].read()
            if stamp is not None:
                return stamp
        return conn.execute(_DATA_VERSION).fetchone()[0]

    def get(self, key: Hashable, load: Callable[[], T]) -> T:
        local = self._local
        held = local.held
        if held is None:
            conn = self._connection()
            version = self._version(conn)
        else:  # inside one_check() on this thread: its connection, its version
            conn, version = held
        stamp = (version, conn.total_changes, id(conn))
        entries = local.entries
        if local.stamp != stamp or len(entries) >= MAX_ENTRIES:
            entries = local.entries = {}
            local.stamp = stamp
        elif key in entries:
            value: T = entries[key]
            return value
        value = load()
        # Loading reads only, so the stamp taken before it still describes what was read.
        entries[key] = value
        return value

    def one_check(self) -> _OneCheck:
        """Look-ups inside the block (on this thread) ask for the database's version once, at its start."""
        return _OneCheck(self)


class _OneCheck:
    """``ReadCache.one_check()``: a class rather than a generator, as it wraps every data request."""

    __slots__ = ("_cache", "_outer")

    def __init__(self, cache: ReadCache) -> None:
        self._cache = cache
        self._outer = False

    def __enter__(self) -> None:
        local = self._cache._local
        self._outer = local.held is None  # in a nested block the outer block's version stands
        if self._outer:
            conn = self._cache._connection()
            local.held = (conn, self._cache._version(conn))

    def __exit__(self, *exc: object) -> None:
        if self._outer:
            self._cache._local.held = None
