"""The ``KeyStore`` port on one SQLite file (sqlite-utils), shared by every worker process and thread.

- One connection per thread and per process (``sqlite_connections.py``), opened at first use; the
  schema is created or migrated by the first connection (``sqlite_schema.py``).
- Every read-modify-write runs in ``BEGIN IMMEDIATE``: a deferred ``BEGIN`` that reads then writes
  fails with "database is locked" under contention whatever the busy timeout. Single statements run in
  autocommit.
- The hot path (``find_keys_by_prefix``, ``get_connection``) is one indexed ``SELECT`` each; sqlite3
  caches the prepared statements per connection.
- Platform sessions are sealed with a key derived from the service secret (``session_cipher.py``); API
  key secrets never reach the store, only their SHA-256 (column ``secret_hash``).
- A platform session sealed under another secret (neither the secret nor ``previous_secret``) reads back
  as None (not an error), and its connection as expired: the core treats a missing session as an expired
  connection, and re-linking is the remedy.
- Accounts and web sessions are in ``sqlite_accounts.py``, connections and their sealed sessions in
  ``sqlite_connection_records.py``, OAuth clients, codes and tokens in ``sqlite_oauth.py`` (mixins over
  the same connections).
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from sqlite_utils import Database

from adapters.store.read_cache import ReadCache
from adapters.store.session_cipher import SessionCipher
from adapters.store.sqlite_accounts import SqliteAccountRecords
from adapters.store.sqlite_attempts import SqliteAttemptCounts
from adapters.store.sqlite_connection_records import SqliteConnectionRecords
from adapters.store.sqlite_connections import ThreadConnections
from adapters.store.sqlite_oauth import SqliteOAuthRecords
from adapters.store.sqlite_schema import connect
from adapters.store.sqlite_schema import dt as _dt
from adapters.store.sqlite_schema import dt_or_none as _dt_or_none
from adapters.store.sqlite_schema import ts as _ts
from adapters.store.sqlite_schema import ts_or_none as _ts_or_none
from adapters.store.sqlite_unit_of_work import SqliteUnitOfWork, UnitDepth
from community_api.errors import Conflict
from community_api.model import (
    IDEMPOTENCY_WINDOW,
    IN_FLIGHT,
    ApiKey,
    AuditEvent,
    IdempotencyRecord,
    KeyUsage,
)

_KEY = (
    "SELECT id, account_id, name, prefix, scopes, connection_id, kind, created_at, lineage_id,"
    " last_used_at, expires_at, revoked_at, secret_hash FROM keys"
)
_KEY_BY_ID = _KEY + " WHERE id = ?"
_KEYS_BY_PREFIX = _KEY + " WHERE prefix = ? ORDER BY created_at, rowid"
_KEYS_OF = _KEY + " WHERE account_id = ? ORDER BY created_at, rowid"
T = TypeVar("T")


# How long a successful readiness write vouches for the database (``ready``).
READY_VOUCH_SECONDS = 1.0


def _audit_event(row: tuple[Any, ...]) -> AuditEvent:
    """An ``audit`` row read as (at, event, account_id, key_id, subject, detail)."""
    return AuditEvent(_dt(row[0]), row[1], row[2], row[3], row[4], row[5])


class SqliteKeyStore(SqliteAccountRecords, SqliteConnectionRecords, SqliteAttemptCounts, SqliteOAuthRecords):
    """``SqliteKeyStore(path, secret)``: ``path`` is the database file (its folder is created and the
    file opened lazily, per thread), ``secret`` the service secret from which the session encryption
    key is derived (``previous_secret``: the one before it, while the secret changes: sessions sealed
    under it still open). ``SqliteKeyStore.open`` does the same eagerly."""

    def __init__(
        self, path: str | os.PathLike[str], secret: str, *, previous_secret: str = "", busy_timeout_ms: int = 5000
    ) -> None:
        path = os.fspath(path)
        if path in ("", ":memory:") or path.startswith("file:"):
            raise ValueError("the key store needs a file path: each thread opens its own connection")
        self._path = str(Path(path).expanduser())
        self._cipher = SessionCipher(secret, previous_secret)
        self._connections = ThreadConnections(self._path, busy_timeout_ms)
        self._reads = ReadCache(lambda: self._db.conn, self._path)
        self._units = UnitDepth()
        self._ready_at = -READY_VOUCH_SECONDS  # when ``ready`` last saw a write commit (time.monotonic)

    @classmethod
    def open(
        cls, path: str | os.PathLike[str], secret: str, *, previous_secret: str = "", busy_timeout_ms: int = 5000
    ) -> SqliteKeyStore:
        """Open the store at a settings path now: create its folder and create or migrate the schema at
        once, so that a bad path or a newer schema fails at start rather than on the first request. (The
        constructor alone does the same lazily, at first use.) No connection is kept, so that a
        ``gunicorn --preload`` master hands none to its workers."""
        store = cls(path, secret, previous_secret=previous_secret, busy_timeout_ms=busy_timeout_ms)
        connect(store.path, busy_timeout_ms).close()
        return store

    @property
    def path(self) -> str:
        return self._path

    def close(self) -> None:
        """Close this process's connections (every thread's). A later call opens new ones."""
        self._connections.close()

    # --- connections and transactions -----------------------------------------------------------

    @property
    def _db(self) -> Database:
        return self._connections.db

    def _one(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self._db.execute(sql, params).fetchone()
        return row

    def unit_of_work(self) -> SqliteUnitOfWork:
        return SqliteUnitOfWork(self, self, self._units)

    def ready(self) -> str | None:
        """Commits one row (the time of the check): the file, its folder and the write lock all take a
        write now. A held lock is waited for up to the busy timeout. SQLite's messages name no secret.

        A success vouches for ``READY_VOUCH_SECONDS``: ``GET /readyz`` is open to anyone, and a write per
        probe let a flood of them hold the write lock and make every worker's read cache read afresh."""
        if time.monotonic() - self._ready_at < READY_VOUCH_SECONDS:
            return None
        try:
            with self._immediate() as db:
                db.conn.execute(
                    "INSERT OR REPLACE INTO health_checks (id, checked_at) VALUES (1, ?)",
                    (datetime.now(UTC).isoformat(),),
                )
        except sqlite3.Error as error:
            return f"the database does not take a write: {error}"
        self._ready_at = time.monotonic()
        return None

    def _begin(self) -> None:
        self._db.conn.execute("BEGIN IMMEDIATE")

    def _finish(self, commit: bool) -> None:
        conn = self._db.conn
        if not conn.in_transaction:
            return
        try:
            conn.execute("COMMIT" if commit else "ROLLBACK")
        except BaseException:
            # Never leave a transaction open on this thread's connection: it would swallow later writes.
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _cached(self, key: tuple[Any, ...], load: Callable[[], T]) -> T:
        """A read through the per-thread cache, except inside a unit of work (the cache vouches for
        committed state only)."""
        return load() if self._units.local.depth else self._reads.get(key, load)

    def one_check(self) -> AbstractContextManager[None]:
        return self._reads.one_check()

    @contextmanager
    def _immediate(self) -> Iterator[Database]:
        """A write transaction that takes the write lock before its first read; inside a unit of work it
        joins that one's transaction."""
        db = self._db
        if self._units.get():
            yield db
            return
        db.conn.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            if db.conn.in_transaction:
                db.conn.execute("ROLLBACK")
            raise
        try:
            db.conn.execute("COMMIT")
        except BaseException:
            # Never leave a transaction open on this thread's connection: it would swallow later writes.
            if db.conn.in_transaction:
                db.conn.execute("ROLLBACK")
            raise

    # --- API keys --------------------------------------------------------------------------------

    @staticmethod
    def _key(row: tuple[Any, ...]) -> ApiKey:
        return ApiKey(
            id=row[0],
            account_id=row[1],
            name=row[2],
            prefix=row[3],
            scopes=tuple(row[4].split()),
            connection_id=row[5],
            kind=row[6],
            created_at=_dt(row[7]),
            lineage_id=row[8],
            last_used_at=_dt_or_none(row[9]),
            expires_at=_dt_or_none(row[10]),
            revoked_at=_dt_or_none(row[11]),
        )

    def add_key(self, key: ApiKey, secret_hash: str) -> None:
        try:
            self._db.execute(
                "INSERT INTO keys (id, account_id, name, prefix, scopes, connection_id, kind, created_at,"
                " lineage_id, last_used_at, expires_at, revoked_at, secret_hash)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key.id, key.account_id, key.name, key.prefix, " ".join(key.scopes), key.connection_id,
                    key.kind, _ts(key.created_at), key.lineage_id, _ts_or_none(key.last_used_at),
                    _ts_or_none(key.expires_at), _ts_or_none(key.revoked_at), secret_hash,
                ),
            )  # fmt: skip
        except sqlite3.IntegrityError as error:
            if "secret_hash" in str(error):
                raise Conflict("a key with this secret exists") from None
            raise Conflict(f"key {key.id} exists") from None

    def get_key(self, key_id: str) -> ApiKey | None:
        row = self._one(_KEY_BY_ID, (key_id,))
        return None if row is None else self._key(row)

    def find_keys_by_prefix(self, prefix: str) -> list[tuple[ApiKey, str]]:
        found = self._cached(
            ("prefix", prefix), lambda: [(self._key(r), r[12]) for r in self._db.execute(_KEYS_BY_PREFIX, (prefix,))]
        )
        return list(found)

    def list_keys(self, account_id: str) -> list[ApiKey]:
        return [self._key(r) for r in self._db.execute(_KEYS_OF, (account_id,))]

    def end_key(self, key_id: str, *, expires_at: datetime | None = None, revoked_at: datetime | None = None) -> None:
        # The change, not the row: an end only ever moves earlier, whatever copy the caller holds.
        self._db.execute(
            "UPDATE keys SET"
            " expires_at = CASE WHEN ?1 IS NOT NULL AND (expires_at IS NULL OR expires_at > ?1) THEN ?1"
            " ELSE expires_at END,"
            " revoked_at = coalesce(revoked_at, ?2) WHERE id = ?3",
            (_ts_or_none(expires_at), _ts_or_none(revoked_at), key_id),
        )

    # --- usage -----------------------------------------------------------------------------------

    def add_usage(self, counts: Mapping[tuple[str, str], int], last_used: Mapping[str, datetime]) -> None:
        if not counts and not last_used:
            return
        with self._immediate() as db:
            db.conn.executemany(
                "INSERT INTO usage (key_id, day, count) VALUES (?, ?, ?)"
                " ON CONFLICT (key_id, day) DO UPDATE SET count = count + excluded.count",
                [(key_id, day, count) for (key_id, day), count in counts.items()],
            )
            db.conn.executemany(
                "UPDATE keys SET last_used_at = ?1 WHERE id = ?2 AND (last_used_at IS NULL OR last_used_at < ?1)",
                [(_ts(when), key_id) for key_id, when in last_used.items()],
            )

    def key_usage(self, key_id: str, day: str) -> KeyUsage:
        row = self._one(
            "SELECT coalesce(sum(CASE WHEN day = ?1 THEN count END), 0),"
            " coalesce(sum(CASE WHEN substr(day, 1, 7) = substr(?1, 1, 7) THEN count END), 0),"
            " coalesce(sum(count), 0) FROM usage WHERE key_id = ?2",
            (day, key_id),
        )
        assert row is not None  # an aggregate always answers one row
        return KeyUsage(requests_today=row[0], requests_this_month=row[1], requests_total=row[2])

    # --- audit (append-only: no method updates or deletes; triggers refuse it too) ---------------

    def add_audit(self, event: AuditEvent) -> None:
        self._db.execute(
            "INSERT INTO audit (at, event, account_id, key_id, subject, detail) VALUES (?, ?, ?, ?, ?, ?)",
            (_ts(event.at), event.event, event.account_id, event.key_id, event.subject, event.detail),
        )

    def list_audit(self, account_id: str) -> list[AuditEvent]:
        rows = self._db.execute(
            "SELECT at, event, account_id, key_id, subject, detail FROM audit WHERE account_id = ? ORDER BY at, id",
            (account_id,),
        )
        return [_audit_event(row) for row in rows]

    def recent_audit(self, account_id: str, limit: int) -> list[AuditEvent]:
        # The index audit_account (account_id, at) read backwards: the newest lines only.
        rows = self._db.execute(
            "SELECT at, event, account_id, key_id, subject, detail FROM audit WHERE account_id = ?"
            " ORDER BY at DESC, id DESC LIMIT ?",
            (account_id, limit),
        )
        return [_audit_event(row) for row in rows]

    # --- idempotency -----------------------------------------------------------------------------

    def claim_idempotency(self, record: IdempotencyRecord) -> IdempotencyRecord | None:
        with self._immediate() as db:
            row = db.execute(
                "SELECT key, fingerprint, status, body, created_at FROM idempotency WHERE key = ?",
                (record.key,),
            ).fetchone()
            if row is not None:
                existing = IdempotencyRecord(row[0], row[1], row[2], row[3], _dt(row[4]))
                if record.created_at - existing.created_at < IDEMPOTENCY_WINDOW:
                    return existing
            # Answers past the window answer nothing any more (and hold what was posted or sent).
            db.execute("DELETE FROM idempotency WHERE created_at < ?", (_ts(record.created_at - IDEMPOTENCY_WINDOW),))
            db.execute(
                "INSERT OR REPLACE INTO idempotency (key, fingerprint, status, body, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (record.key, record.fingerprint, record.status, record.body, _ts(record.created_at)),
            )
        return None

    def complete_idempotency(self, key: str, status: int, body: str) -> None:
        self._db.execute("UPDATE idempotency SET status = ?, body = ? WHERE key = ?", (status, body, key))

    def release_idempotency(self, key: str) -> None:
        # Only an in-flight claim is forgotten: a completed answer stays for the retries.
        self._db.execute("DELETE FROM idempotency WHERE key = ? AND status = ?", (key, IN_FLIGHT))

    def forget_idempotency(self, key_prefix: str) -> None:
        # Not LIKE: ``_`` and ``%`` in a prefix (account ids hold ``_``) would be wildcards there.
        self._db.execute("DELETE FROM idempotency WHERE substr(key, 1, length(?)) = ?", (key_prefix, key_prefix))
