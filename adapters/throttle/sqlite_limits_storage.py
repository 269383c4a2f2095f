"""A ``limits`` storage on SQLite, so that every worker process of one host shares the DM throttle without
a separate server. Select it with ``sqlite:///absolute/path.sqlite3`` (or ``sqlite://relative/path``)
wherever ``limits`` takes a storage URI; importing this module registers the ``sqlite`` scheme.

It may live in the service's own database file: it only touches its own tables, ``throttle_marks`` (moving
windows) and ``throttle_counters`` (fixed-window counters). Another program's database is refused, untouched.

Why it is built the way it is (DESIGN §8):
- every read-modify-write runs in ``BEGIN IMMEDIATE``: a deferred transaction that reads and then
  writes fails with "database is locked" under contention whatever the busy timeout, while an
  immediate one queues on the busy timeout and so gives an exact count across processes;
- WAL lets readers proceed while one writer holds the lock;
- one connection per thread and per process: a SQLite connection must not cross a ``fork`` nor be used
  by two threads at once, so each (process, thread) opens its own on first use;
- time comes from ``time.time()``, as in the storages shipped with ``limits``, so freezegun drives it.

Moving windows follow the Redis storage exactly: a key is a list of entry times, newest first, trimmed to
``limit`` entries on each acquisition, and the whole key expires ``expiry`` seconds after its last
acquisition; windows are closed (an entry exactly ``expiry`` seconds old is still inside).

How a list is kept, so that an acquisition is one statement and every operation a few indexed look-ups
whatever the list's length (the platform read pace acquires on every data read; a list of entry rows
rewritten on each acquisition cost 35 ms at 20,000 entries):
- ``throttle_marks`` holds one row per acquisition: the positions of its entries ``first … last``
  (position = how many entries the key had ever been given), its time ``at``, its own ``expires_at``
  (``at + expiry``) and the key's ``floor`` after it (positions up to ``floor`` are trimmed away);
- the newest mark of a key describes the key: it is alive while that mark's ``expires_at`` lies ahead
  (Redis's EXPIRE from the last acquisition), and its list is the positions ``floor + 1 … last``;
- ``acquire_entry`` is one ``INSERT … SELECT … RETURNING``: the check (the entry that would leave the
  newest ``limit`` is older than ``expiry``) and the insert are one atomic statement. ``at`` never
  decreases along a key's positions (a racer's earlier clock reading is raised to the newest mark's), so
  "the entries younger than t" start at one mark, found through the ``(key, at)`` index;
- marks trimmed away or older than their own expiry are deleted every few acquisitions of the key
  (reads never look below ``floor`` nor further back than an acquisition's expiry), and keys nobody
  acquires again are swept at most once a minute per process.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from limits.errors import ConfigurationError
from limits.storage import MovingWindowSupport, Storage

from adapters.sqlite_wal import create_owner_only, use_wal
from adapters.store.sqlite_schema import foreign_database
from adapters.throttle.storage_uri import file_and_query

T = TypeVar("T")

_SCHEMA = (
    # The earlier layout of moving windows: its state is dropped (at worst a DM count restarts once, on
    # upgrade).
    "DROP TABLE IF EXISTS throttle_entries",
    """CREATE TABLE IF NOT EXISTS throttle_marks (
        key TEXT NOT NULL,
        last INTEGER NOT NULL,
        first INTEGER NOT NULL,
        at REAL NOT NULL,
        expires_at REAL NOT NULL,
        floor INTEGER NOT NULL,
        PRIMARY KEY (key, last)
    ) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS throttle_marks_at ON throttle_marks (key, at)",
    """CREATE TABLE IF NOT EXISTS throttle_counters (
        key TEXT PRIMARY KEY,
        value INTEGER NOT NULL,
        expires_at REAL NOT NULL
    ) WITHOUT ROWID""",
)
# A key's trimmed and aged marks are deleted once every this many positions.
_TRIM_EVERY = 16
# Keys nobody acquires again are swept at most this often (seconds), per process.
_SWEEP_SECONDS = 60.0
# How long a statement retries for a lock at once (yielding the CPU to the holder) before backing off:
# SQLite's own busy handler sleeps at least a millisecond between tries, while a write here holds the
# lock for some tens of microseconds; under two workers that sleep dominated every contended request.
_SPIN_SECONDS = 0.005
_BACKOFF_SECONDS = 0.002

_ACQUIRE = """
INSERT INTO throttle_marks (key, last, first, at, expires_at, floor)
SELECT :key, s.total + :amount, s.total + 1, max(:now, s.newest_at), max(:now, s.newest_at) + :expiry,
       max(s.floor, s.total + :amount - :limit)
FROM (
    SELECT coalesce(n.last, 0) AS total,
           CASE WHEN n.expires_at > :now THEN n.floor ELSE coalesce(n.last, 0) END AS floor,
           coalesce(n.at, 0) AS newest_at
    FROM (SELECT 1) LEFT JOIN (
        SELECT last, floor, at, expires_at FROM throttle_marks WHERE key = :key ORDER BY last DESC LIMIT 1
    ) AS n
) AS s
WHERE NOT (
    s.total - (:limit - :amount) > s.floor
    AND (SELECT at FROM throttle_marks WHERE key = :key AND last >= s.total - (:limit - :amount)
         ORDER BY last LIMIT 1) >= :now - :expiry
)
RETURNING last, floor
"""


def path_from_uri(uri: str) -> str:
    """The database path of a ``sqlite://`` URI: three (or four) slashes then an absolute path
    (``sqlite:///srv/db.sqlite3``), or two slashes then a relative one (``sqlite://var/db.sqlite3``)."""
    path, query = file_and_query(uri)
    if not path or ":memory:" in path or query:
        # An in-memory database would not be shared between threads or processes, which is the point.
        raise ConfigurationError(f"a sqlite storage URI names a database file: {uri}")
    return path


class SQLiteStorage(Storage, MovingWindowSupport):
    """Rate-limit storage in a SQLite file: fixed-window counters and moving windows."""

    STORAGE_SCHEME = ["sqlite"]

    def __init__(
        self,
        uri: str,
        wrap_exceptions: bool = False,
        timeout: float = 30.0,
        **options: float | str | bool,
    ) -> None:
        """:param uri: ``sqlite:///absolute/path`` or ``sqlite://relative/path``
        :param timeout: seconds a write waits for another process's transaction (SQLite busy timeout)"""
        super().__init__(uri, wrap_exceptions=wrap_exceptions, **options)
        self.path = path_from_uri(uri)
        self.timeout = float(timeout)
        self._local = threading.local()
        # Connections inherited through fork are kept referenced and never closed in the child: closing
        # them there could disturb the parent's locks, and they are never used again.
        self._inherited: list[sqlite3.Connection] = []
        self._swept_at = 0.0

    @property
    def base_exceptions(self) -> type[Exception] | tuple[type[Exception], ...]:
        return sqlite3.Error

    # --- connections ---------------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is not None and self._local.pid == os.getpid():
            return db
        if db is not None:
            self._inherited.append(db)
        db = self._open()
        self._local.db = db
        self._local.pid = os.getpid()
        return db

    def _open(self) -> sqlite3.Connection:
        create_owner_only(self.path)
        # isolation_level=None: the sqlite3 module opens no transaction behind our back; we say when.
        db = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
        # Before anything is written (WAL mode alone changes the file's header): another program's database.
        if problem := foreign_database(db):
            db.close()
            raise ConfigurationError(f"{self.path}: {problem}")
        # Not a bare "PRAGMA journal_mode=WAL": on a fresh file, threads or workers opening it together
        # could be refused at once ("database is locked"; seen in CI with six threads).
        use_wal(db, self.timeout)
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("BEGIN IMMEDIATE")
        try:
            for statement in _SCHEMA:
                db.execute(statement)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        db.execute("PRAGMA busy_timeout = 0")  # lock waits are ``_retrying``'s
        return db

    def _retrying(self, attempt: Callable[[], T]) -> T:
        """Run ``attempt`` until it is not refused for a lock: at once for ``_SPIN_SECONDS``, then with short
        sleeps, for ``timeout`` seconds in all (then the "database is locked" error stands)."""
        started = time.monotonic()
        while True:
            try:
                return attempt()
            except sqlite3.OperationalError as error:
                waited = time.monotonic() - started
                if not _is_busy(error) or waited >= self.timeout:
                    raise
                if waited < _SPIN_SECONDS:
                    os.sched_yield()
                else:
                    time.sleep(_BACKOFF_SECONDS)

    @contextmanager
    def _immediate(self) -> Iterator[sqlite3.Connection]:
        """A write transaction that holds the database's write lock from its first statement on."""
        db = self._connection()
        self._retrying(lambda: db.execute("BEGIN IMMEDIATE"))
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        state["_local"] = None
        state["_inherited"] = []
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._local = threading.local()

    # --- Storage -------------------------------------------------------------------------------

    def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        """Add ``amount`` to the counter; a counter that did not exist (or had expired) starts at 0 and
        expires ``expiry`` seconds from now, as the Redis and memory storages do."""
        with self._immediate() as db:
            now = time.time()
            row = db.execute("SELECT value, expires_at FROM throttle_counters WHERE key = ?", (key,)).fetchone()
            if row is None or row[1] <= now:
                value, expires_at = amount, now + expiry
            else:
                value, expires_at = row[0] + amount, row[1]
            db.execute(
                "INSERT OR REPLACE INTO throttle_counters (key, value, expires_at) VALUES (?, ?, ?)",
                (key, value, expires_at),
            )
        return int(value)

    def get(self, key: str) -> int:
        row = (
            self._connection()
            .execute("SELECT value FROM throttle_counters WHERE key = ? AND expires_at > ?", (key, time.time()))
            .fetchone()
        )
        return int(row[0]) if row else 0

    def get_expiry(self, key: str) -> float:
        now = time.time()
        row = (
            self._connection()
            .execute("SELECT expires_at FROM throttle_counters WHERE key = ? AND expires_at > ?", (key, now))
            .fetchone()
        )
        return float(row[0]) if row else now

    def check(self) -> bool:
        try:
            self._connection().execute("SELECT 1").fetchone()
        except sqlite3.Error:
            return False
        return True

    def reset(self) -> int | None:
        """Forget every key; answers how many keys there were."""
        with self._immediate() as db:
            (count,) = db.execute(
                "SELECT (SELECT COUNT(DISTINCT key) FROM throttle_marks) + (SELECT COUNT(*) FROM throttle_counters)"
            ).fetchone()
            db.execute("DELETE FROM throttle_marks")
            db.execute("DELETE FROM throttle_counters")
        return int(count)

    def clear(self, key: str) -> None:
        with self._immediate() as db:
            db.execute("DELETE FROM throttle_marks WHERE key = ?", (key,))
            db.execute("DELETE FROM throttle_counters WHERE key = ?", (key,))

    # --- MovingWindowSupport -------------------------------------------------------------------

    def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        """Add ``amount`` entries stamped now, unless that would put more than ``limit`` entries within
        the last ``expiry`` seconds. The check and the insert are one statement (``_ACQUIRE``)."""
        if amount > limit:
            return False
        db = self._connection()
        now = time.time()
        params = {"key": key, "limit": limit, "expiry": expiry, "amount": amount, "now": now}
        row = self._retrying(lambda: db.execute(_ACQUIRE, params).fetchone())
        if row is None:
            return False
        last, floor = row
        if last // _TRIM_EVERY != (last - amount) // _TRIM_EVERY:
            # Two index ranges (never a walk over the key's marks): trimmed positions, then marks past their
            # own expiry (an entry exactly ``expiry`` old still counts, so strictly past).
            self._retrying(lambda: db.execute("DELETE FROM throttle_marks WHERE key = ? AND last <= ?", (key, floor)))
            self._retrying(
                lambda: db.execute(
                    "DELETE FROM throttle_marks INDEXED BY throttle_marks_at"
                    " WHERE key = ? AND at < ? AND expires_at < ? AND last < ?",
                    (key, now - expiry, now, last),
                )
            )
        if now - self._swept_at >= _SWEEP_SECONDS:
            self._swept_at = now
            self._retrying(
                lambda: db.execute(
                    "DELETE FROM throttle_marks WHERE expires_at <= ? AND key NOT IN"
                    " (SELECT key FROM throttle_marks WHERE expires_at > ?)",
                    (now, now),
                )
            )
        return True

    def get_moving_window(self, key: str, limit: int, expiry: int) -> tuple[float, int]:
        """Among the newest ``limit`` entries, those at most ``expiry`` seconds old: (the oldest of them,
        how many). With none: (now, 0). One read transaction, so a consistent snapshot under WAL."""
        db = self._connection()
        now = time.time()
        self._retrying(lambda: db.execute("BEGIN"))
        try:
            return self._window(db, key, limit, expiry, now)
        finally:
            db.execute("COMMIT")

    @staticmethod
    def _window(db: sqlite3.Connection, key: str, limit: int, expiry: float, now: float) -> tuple[float, int]:
        newest = db.execute(
            "SELECT last, floor, expires_at FROM throttle_marks WHERE key = ? ORDER BY last DESC LIMIT 1", (key,)
        ).fetchone()
        if newest is None or newest[2] <= now:
            return now, 0
        total, floor, _ = newest
        start = max(floor, total - max(limit, 0))  # the newest ``limit`` are the positions after it
        if total <= start:
            return now, 0
        # The first young mark among those positions: every later one is younger still.
        mark = db.execute(
            "SELECT first, at FROM throttle_marks INDEXED BY throttle_marks_at"
            " WHERE key = ? AND at >= ? AND last > ? ORDER BY at, last LIMIT 1",
            (key, now - expiry, start),
        ).fetchone()
        if mark is None:
            return now, 0
        first = max(start + 1, mark[0])
        return float(mark[1]), total - first + 1


def _is_busy(error: sqlite3.OperationalError) -> bool:
    return "locked" in str(error) or "busy" in str(error)
