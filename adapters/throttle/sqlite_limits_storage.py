"""A ``limits`` storage on SQLite, so that every worker process of one host shares the DM throttle without
a separate server. Select it with ``sqlite:///absolute/path.sqlite3`` (or ``sqlite://relative/path``)
wherever ``limits`` takes a storage URI; importing this module registers the ``sqlite`` scheme.

It may live in the service's own database file: it only touches its own tables, ``throttle_entries``
(moving windows) and ``throttle_counters`` (fixed-window counters).

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
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager

from limits.errors import ConfigurationError
from limits.storage import MovingWindowSupport, Storage

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS throttle_entries (
        key TEXT NOT NULL,
        at REAL NOT NULL,
        expires_at REAL NOT NULL
    )""",
    # SQLite appends the rowid to every index entry, so this one also serves "newest first per key".
    "CREATE INDEX IF NOT EXISTS throttle_entries_key ON throttle_entries (key)",
    "CREATE INDEX IF NOT EXISTS throttle_entries_expires_at ON throttle_entries (expires_at)",
    """CREATE TABLE IF NOT EXISTS throttle_counters (
        key TEXT PRIMARY KEY,
        value INTEGER NOT NULL,
        expires_at REAL NOT NULL
    ) WITHOUT ROWID""",
)


def path_from_uri(uri: str) -> str:
    """The database path of a ``sqlite://`` URI: three (or four) slashes then an absolute path
    (``sqlite:///srv/db.sqlite3``), or two slashes then a relative one (``sqlite://var/db.sqlite3``)."""
    parsed = urllib.parse.urlparse(uri)
    if parsed.netloc:
        path = urllib.parse.unquote(parsed.netloc + parsed.path)
    else:
        # ``f"sqlite:///{os.path.abspath(db)}"`` gives four slashes; both spellings mean the same file.
        path = "/" + urllib.parse.unquote(parsed.path).lstrip("/")
    if not path or path.endswith("/") or ":memory:" in path or parsed.query:
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
        directory = os.path.dirname(self.path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        # isolation_level=None: the sqlite3 module opens no transaction behind our back; we say when.
        db = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("BEGIN IMMEDIATE")
        try:
            for statement in _SCHEMA:
                db.execute(statement)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return db

    @contextmanager
    def _immediate(self) -> Iterator[sqlite3.Connection]:
        """A write transaction that holds the database's write lock from its first statement on."""
        db = self._connection()
        db.execute("BEGIN IMMEDIATE")
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
                "SELECT (SELECT COUNT(DISTINCT key) FROM throttle_entries) + (SELECT COUNT(*) FROM throttle_counters)"
            ).fetchone()
            db.execute("DELETE FROM throttle_entries")
            db.execute("DELETE FROM throttle_counters")
        return int(count)

    def clear(self, key: str) -> None:
        with self._immediate() as db:
            db.execute("DELETE FROM throttle_entries WHERE key = ?", (key,))
            db.execute("DELETE FROM throttle_counters WHERE key = ?", (key,))

    # --- MovingWindowSupport -------------------------------------------------------------------

    def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        """Add ``amount`` entries stamped now, unless that would put more than ``limit`` entries within
        the last ``expiry`` seconds. The check and the insert are one immediate transaction, and the
        time is read once the lock is held, so entries of one key are in time order across processes."""
        if amount > limit:
            return False
        with self._immediate() as db:
            now = time.time()
            row = db.execute(
                "SELECT at FROM throttle_entries WHERE key = ? AND expires_at > ? ORDER BY rowid DESC LIMIT 1 OFFSET ?",
                (key, now, limit - amount),
            ).fetchone()
            if row is not None and row[0] >= now - expiry:
                return False
            expires_at = now + expiry
            db.executemany(
                "INSERT INTO throttle_entries (key, at, expires_at) VALUES (?, ?, ?)",
                [(key, now, expires_at)] * amount,
            )
            # Like Redis's LTRIM and EXPIRE: keep the newest ``limit``, all living as long as the newest.
            db.execute(
                "DELETE FROM throttle_entries WHERE key = ? AND rowid NOT IN"
                " (SELECT rowid FROM throttle_entries WHERE key = ? ORDER BY rowid DESC LIMIT ?)",
                (key, key, limit),
            )
            db.execute("UPDATE throttle_entries SET expires_at = ? WHERE key = ?", (expires_at, key))
            # Keys nobody acquires again would otherwise stay forever.
            db.execute("DELETE FROM throttle_entries WHERE expires_at <= ?", (now,))
        return True

    def get_moving_window(self, key: str, limit: int, expiry: int) -> tuple[float, int]:
        """Among the newest ``limit`` entries, those at most ``expiry`` seconds old: (the oldest of them,
        how many). With none: (now, 0). One SELECT, so a consistent snapshot under WAL."""
        now = time.time()
        rows = (
            self._connection()
            .execute(
                "SELECT at FROM throttle_entries WHERE key = ? AND expires_at > ? ORDER BY rowid DESC LIMIT ?",
                (key, now, max(limit, 0)),
            )
            .fetchall()
        )
        inside = [at for (at,) in rows if at >= now - expiry]
        if inside:
            return float(min(inside)), len(inside)
        return now, 0
