"""Linked platform accounts (connections) and their sealed platform sessions: a mixin of
``SqliteKeyStore``, over its per-thread connections and its ``SessionCipher``."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import attrs
from sqlite_utils import Database

from adapters.store.session_cipher import Resealed, SessionCipher
from adapters.store.sqlite_schema import dt as _dt
from adapters.store.sqlite_schema import dt_or_none as _dt_or_none
from adapters.store.sqlite_schema import ts as _ts
from adapters.store.sqlite_schema import ts_or_none as _ts_or_none
from community_api.errors import Conflict
from community_api.model import CONNECTION_EXPIRED, Connection

T = TypeVar("T")

# Every read of a connection takes its sealed session too: whether it opens is part of its status.
_CONNECTION = (
    "SELECT id, account_id, platform_user_id, handle, name, active, status, created_at, session_expires_at,"
    " session FROM connections"
)
_CONNECTION_BY_ID = _CONNECTION + " WHERE id = ?"
_CONNECTION_BY_USER = _CONNECTION + " WHERE account_id = ? AND platform_user_id = ?"
_CONNECTIONS_OF = _CONNECTION + " WHERE account_id = ? ORDER BY created_at, rowid"
_ACTIVE_CONNECTION = _CONNECTION + " WHERE account_id = ? ORDER BY active DESC, created_at, rowid LIMIT 1"


@attrs.frozen
class Resealing:
    """What ``reseal_sessions`` did: each outcome counted, and the connections whose session is lost."""

    counts: Counter[Resealed]
    lost: tuple[str, ...]


class SqliteConnectionRecords:
    if TYPE_CHECKING:  # provided by SqliteKeyStore
        _cipher: SessionCipher

        @property
        def _db(self) -> Database: ...

        def _one(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None: ...

        def _immediate(self) -> AbstractContextManager[Database]: ...

        def _cached(self, key: tuple[Any, ...], load: Callable[[], T]) -> T: ...

    def _connection(self, row: tuple[Any, ...]) -> Connection:
        return self._opened(row)[0]

    def _opened(self, row: tuple[Any, ...]) -> tuple[Connection, str | None]:
        """The connection of a row and its platform session. A session that opens under no secret the
        service has (the secret changed without ``PREVIOUS_SECRET``, a backup restored under another) makes
        the connection read as expired, as every call through it is answered (409 ``connection_expired``),
        so that the dashboard, ``accounts list`` and ``/metrics`` ask for it to be linked again rather than
        show it active. Read, never written: with the right secret back, it is active again."""
        token = self._cipher.open(row[9], row[0])
        status = CONNECTION_EXPIRED if token is None else row[6]
        connection = Connection(
            row[0], row[1], row[2], row[3], row[4], bool(row[5]), status, _dt(row[7]), _dt_or_none(row[8])
        )
        return connection, token

    def save_connection(self, connection: Connection, platform_session: str) -> Connection:
        c = connection
        with self._immediate() as db:
            row = db.execute(_CONNECTION_BY_USER, (c.account_id, c.platform_user_id)).fetchone()
            if row is not None:
                stored_id = row[0]
                db.execute(
                    "UPDATE connections SET handle = ?, name = ?, status = ?, session = ?, session_expires_at = ?"
                    " WHERE id = ?",
                    (
                        c.handle,
                        c.name,
                        c.status,
                        self._cipher.seal(platform_session, stored_id),
                        _ts_or_none(c.session_expires_at),
                        stored_id,
                    ),
                )
            else:
                stored_id = c.id
                if c.active:  # at most one active connection per account
                    db.execute("UPDATE connections SET active = 0 WHERE account_id = ?", (c.account_id,))
                try:
                    db.execute(
                        "INSERT INTO connections (id, account_id, platform_user_id, handle, name, active,"
                        " status, created_at, session, session_expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            c.id, c.account_id, c.platform_user_id, c.handle, c.name, int(c.active),
                            c.status, _ts(c.created_at), self._cipher.seal(platform_session, c.id),
                            _ts_or_none(c.session_expires_at),
                        ),
                    )  # fmt: skip
                except sqlite3.IntegrityError:
                    raise Conflict(f"connection {c.id} exists") from None
            stored = db.execute(_CONNECTION_BY_ID, (stored_id,)).fetchone()
        return self._connection(stored)

    def get_connection(self, connection_id: str) -> Connection | None:
        row = self._one(_CONNECTION_BY_ID, (connection_id,))
        return None if row is None else self._connection(row)

    def list_connections(self, account_id: str) -> list[Connection]:
        return [self._connection(r) for r in self._db.execute(_CONNECTIONS_OF, (account_id,))]

    def all_connections(self) -> list[Connection]:
        return [self._connection(r) for r in self._db.execute(_CONNECTION)]

    def get_platform_session(self, connection_id: str) -> str | None:
        row = self._one("SELECT session FROM connections WHERE id = ?", (connection_id,))
        return None if row is None else self._cipher.open(row[0], connection_id)

    def reseal_sessions(self) -> Resealing:
        """Seal under the current secret every stored platform session that opens only under the previous
        one, in one transaction (a connection linked meanwhile waits for it, and is sealed under the
        current secret anyway). Counts each outcome: ``resealed``, ``current`` (nothing to do) and ``lost``
        (opens under neither secret: that connection must be linked again), and names the lost ones."""
        counts: Counter[Resealed] = Counter()
        lost = []
        with self._immediate() as db:
            for connection_id, blob in db.execute("SELECT id, session FROM connections ORDER BY rowid").fetchall():
                outcome, sealed = self._cipher.reseal(blob, connection_id)
                counts[outcome] += 1
                if sealed is not None:
                    db.execute("UPDATE connections SET session = ? WHERE id = ?", (sealed, connection_id))
                elif outcome == "lost":
                    lost.append(connection_id)
        return Resealing(counts, tuple(lost))

    def count_unopened_sessions(self) -> tuple[int, int]:
        """How many stored platform sessions open under no secret this store has, of how many: read only,
        for the operator's commands to warn of a secret that is likely not the one that sealed them."""
        rows = self._db.execute("SELECT id, session FROM connections").fetchall()
        return sum(1 for connection_id, blob in rows if self._cipher.open(blob, connection_id) is None), len(rows)

    def load_connection(self, account_id: str, connection_id: str | None) -> tuple[Connection, str | None] | None:
        return self._cached(("connection", account_id, connection_id), lambda: self._load(account_id, connection_id))

    def _load(self, account_id: str, connection_id: str | None) -> tuple[Connection, str | None] | None:
        if connection_id is None:
            row = self._one(_ACTIVE_CONNECTION, (account_id,))
        else:
            row = self._one(_CONNECTION_BY_ID, (connection_id,))
        return None if row is None else self._opened(row)

    def set_active_connection(self, account_id: str, connection_id: str) -> None:
        with self._immediate() as db:
            found = db.execute(
                "SELECT 1 FROM connections WHERE id = ? AND account_id = ?", (connection_id, account_id)
            ).fetchone()
            if found is None:
                return  # nothing of that account to activate: leave the others as they are
            db.execute("UPDATE connections SET active = (id = ?) WHERE account_id = ?", (connection_id, account_id))

    def delete_connections(self, account_id: str) -> None:
        self._erase_connections("account_id", account_id)

    def delete_connection(self, connection_id: str) -> None:
        self._erase_connections("id", connection_id)

    def _erase_connections(self, column: Literal["id", "account_id"], value: str) -> None:
        # The sealed platform session is overwritten before the row goes (secure_delete zeroes freed pages).
        with self._immediate() as db:
            db.execute(f"UPDATE connections SET session = NULL WHERE {column} = ?", (value,))  # noqa: S608 - a fixed column
            db.execute(f"DELETE FROM connections WHERE {column} = ?", (value,))  # noqa: S608 - a fixed column

    def set_connection_status(self, connection_id: str, status: str) -> None:
        self._db.execute("UPDATE connections SET status = ? WHERE id = ?", (status, connection_id))
