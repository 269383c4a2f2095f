"""The read cache (``adapters/store/read_cache.py``) on a real SQLite file in WAL mode: an unchanged database
is read once, any commit (another connection's or this one's own) is seen at the next look-up, a header
that stops vouching hands over to ``PRAGMA data_version``, one ``one_check()`` block stands for one moment
however it nests, and garbage keys cannot grow it past its bound."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from adapters.store.read_cache import MAX_ENTRIES, ReadCache
from adapters.store.wal_index import WalIndexHeader
from tests.integration.test_wal_index import wal_db


class Counted:
    """A cache on a file, with the number of loads of each key."""

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.cache = ReadCache(lambda: conn, str(path))
        self.loads: dict[object, int] = {}

    def get(self, key: object) -> object:
        def load() -> object:
            self.loads[key] = self.loads.get(key, 0) + 1
            return key

        return self.cache.get(key, load)


@pytest.fixture
def files(tmp_path: Path) -> Iterator[tuple[Path, sqlite3.Connection, sqlite3.Connection]]:
    """The file, the cache's connection, and another connection (another worker) that writes."""
    path = tmp_path / "db.sqlite3"
    with closing(wal_db(path)) as mine, closing(wal_db(path)) as other:
        other.execute("INSERT INTO t VALUES (0)")  # a commit, so that the header is written
        yield path, mine, other


def test_an_unchanged_database_is_read_once(files: tuple[Path, sqlite3.Connection, sqlite3.Connection]) -> None:
    path, mine, other = files
    counted = Counted(path, mine)
    for _ in range(5):
        counted.get("key")
        mine.execute("SELECT count(*) FROM t").fetchone()  # reads change nothing
    assert counted.loads == {"key": 1}


def test_every_commit_is_seen_at_the_next_look_up(files: tuple[Path, sqlite3.Connection, sqlite3.Connection]) -> None:
    path, mine, other = files
    counted = Counted(path, mine)
    counted.get("key")
    other.execute("INSERT INTO t VALUES (1)")  # another worker's commit
    counted.get("key")
    mine.execute("INSERT INTO t VALUES (2)")  # this connection's own
    counted.get("key")
    assert counted.loads == {"key": 3}


def test_a_header_that_stops_vouching_hands_over_to_sqlite(
    files: tuple[Path, sqlite3.Connection, sqlite3.Connection], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A header read that cannot be vouched for (a commit being published, a header rewritten) answers
    None: the version is then SQLite's own, never "no version", which would keep the cache forever."""
    path, mine, other = files
    counted = Counted(path, mine)
    counted.get("key")
    monkeypatch.setattr(WalIndexHeader, "read", lambda self: None)
    counted.get("key")  # the version now comes from the pragma: a change of source, read afresh
    loads = counted.loads["key"]
    counted.get("key")
    assert counted.loads["key"] == loads  # unchanged: still cached
    other.execute("INSERT INTO t VALUES (1)")
    counted.get("key")
    assert counted.loads["key"] == loads + 1


def test_one_check_stands_for_one_moment_however_it_nests(
    files: tuple[Path, sqlite3.Connection, sqlite3.Connection],
) -> None:
    path, mine, other = files
    counted = Counted(path, mine)
    with counted.cache.one_check():
        counted.get("key")
        other.execute("INSERT INTO t VALUES (1)")  # after the block's moment: not seen inside it
        with counted.cache.one_check():  # (a nested block: the outer block's moment stands)
            counted.get("key")
        counted.get("key")
        assert counted.loads == {"key": 1}
    counted.get("key")  # outside: the change is seen
    assert counted.loads == {"key": 2}


def test_garbage_keys_cannot_grow_it_past_its_bound(
    files: tuple[Path, sqlite3.Connection, sqlite3.Connection],
) -> None:
    """Each unknown key prefix a client sends is a key: past the bound the cache starts afresh."""
    path, mine, _ = files
    counted = Counted(path, mine)
    for key in range(MAX_ENTRIES - 1):
        counted.get(key)
    counted.get(0)
    assert counted.loads[0] == 1  # still held
    counted.get(MAX_ENTRIES - 1)  # the cache is full now: the next look-up starts it afresh
    counted.get(0)
    assert counted.loads[0] == 2
