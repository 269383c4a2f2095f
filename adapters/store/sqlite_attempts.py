"""Attempt counts (``AttemptCounts``): a mixin of ``SqliteKeyStore``, over its per-thread connections.

Each count is a row; adding one also removes those older than ``ATTEMPT_RETENTION`` (an index range, so
nothing to remove costs one index look-up). Inside a unit of work both statements are part of its
transaction.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlite_utils import Database

from adapters.store.sqlite_schema import ts
from community_api.store_ports import ATTEMPT_RETENTION


class SqliteAttemptCounts:
    if TYPE_CHECKING:  # provided by SqliteKeyStore

        @property
        def _db(self) -> Database: ...

        def _one(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None: ...

    def add_attempt(self, event: str, subject: str, at: datetime) -> None:
        db = self._db
        db.execute("INSERT INTO attempts (event, subject, at) VALUES (?, ?, ?)", (event, subject, ts(at)))
        db.execute("DELETE FROM attempts WHERE at < ?", (ts(at - ATTEMPT_RETENTION),))

    def count_attempts(self, event: str, subject: str, since: datetime) -> int:
        row = self._one(
            "SELECT count(*) FROM attempts WHERE event = ? AND subject = ? AND at >= ?", (event, subject, ts(since))
        )
        return int(row[0]) if row else 0
