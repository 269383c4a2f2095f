"""Putting a SQLite file in WAL mode when several connections open it at once (the key store's file, the
throttles' ``sqlite://`` storage), shared by both."""

from __future__ import annotations

import sqlite3
import time


def use_wal(conn: sqlite3.Connection, patience: float) -> None:
    """Switch the file to WAL (a property of the file, kept once set).

    Switching needs an exclusive lock, and SQLite answers "database is locked" at once, without its
    busy handler, when another connection holds any lock: on a fresh file several workers (or threads)
    starting together do. So retry until the file is in WAL (whoever switched it) or ``patience`` runs
    out."""
    deadline = time.monotonic() + patience
    delay = 0.005
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal":
                return
            if conn.execute("PRAGMA journal_mode = WAL").fetchone()[0].lower() == "wal":
                return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) and "busy" not in str(error):
                raise
            if time.monotonic() >= deadline:
                raise
        if time.monotonic() >= deadline:
            raise sqlite3.OperationalError("could not switch the SQLite file to WAL mode")
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
