"""``use_wal`` on a fresh file that another connection holds a lock on: SQLite refuses the switch at once
("database is locked", without its busy handler), so a bare ``PRAGMA journal_mode=WAL`` failed when
workers or threads opened the file together (seen in CI: the ``sqlite://`` throttle storage, six threads)."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from adapters.sqlite_wal import use_wal


def holder(path: Path) -> sqlite3.Connection:
    """A connection in the middle of a write on a file still in rollback-journal mode."""
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("CREATE TABLE IF NOT EXISTS t (x)")
    db.execute("BEGIN IMMEDIATE")
    db.execute("INSERT INTO t VALUES (1)")
    return db


def test_a_bare_switch_is_refused_at_once_while_another_connection_writes(tmp_path: Path) -> None:
    path = tmp_path / "fresh.sqlite3"
    held = holder(path)
    other = sqlite3.connect(path, timeout=5, isolation_level=None)
    started = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        other.execute("PRAGMA journal_mode=WAL")
    assert time.monotonic() - started < 1  # its 5 s busy timeout was not used
    held.execute("COMMIT")


def test_use_wal_waits_for_the_lock_and_switches(tmp_path: Path) -> None:
    path = tmp_path / "fresh.sqlite3"
    held = holder(path)
    threading.Timer(0.3, lambda: held.execute("COMMIT")).start()
    other = sqlite3.connect(path, isolation_level=None)
    use_wal(other, patience=5)
    assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_use_wal_gives_up_after_its_patience(tmp_path: Path) -> None:
    path = tmp_path / "fresh.sqlite3"
    held = holder(path)
    other = sqlite3.connect(path, isolation_level=None)
    started = time.monotonic()
    with pytest.raises(sqlite3.OperationalError):
        use_wal(other, patience=0.3)
    assert 0.3 <= time.monotonic() - started < 2
    held.execute("COMMIT")
