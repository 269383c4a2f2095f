"""The WAL-index header (``adapters/store/wal_index.py``) on real SQLite files: every commit of another
connection moves it, nothing else needs to, and whatever it cannot vouch for is answered None (the read
cache then asks ``PRAGMA data_version``)."""

from __future__ import annotations

import fcntl
import sqlite3
import struct
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from freezegun import freeze_time

from adapters.store import read_cache
from adapters.store.sqlite_key_store import SqliteKeyStore
from adapters.store.wal_index import HEADER_SIZE, WalIndexHeader
from tests.integration.store_support import T0, two_workers


def wal_db(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE IF NOT EXISTS t (n INTEGER)")
    return conn


def test_every_commit_of_another_connection_moves_the_header(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    with closing(wal_db(path)) as reader, closing(wal_db(path)) as writer:
        reader.execute("SELECT count(*) FROM t").fetchone()
        header = WalIndexHeader.open(str(path))
        assert header is not None
        seen = header.read()
        assert seen is not None
        for n in range(300):
            writer.execute("INSERT INTO t VALUES (?)", (n,))
            if n % 50 == 49:  # the WAL is checkpointed and restarted from its start now and then
                writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            now = header.read()
            assert now is not None and now != seen, f"commit {n} not seen"
            seen = now
            # Reads (of either connection) and time alone do not move it.
            reader.execute("SELECT count(*) FROM t").fetchone()
            writer.execute("SELECT count(*) FROM t").fetchone()
            assert header.read() == seen


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda raw: raw[:8] + b"\xff" + raw[9:], "the copies differ: a commit is being published"),
        (lambda raw: (raw[:12] + b"\x00" + raw[13:HEADER_SIZE]) * 2, "not initialised"),
        (lambda raw: (struct.pack("=I", 3007001) + raw[4:HEADER_SIZE]) * 2, "another header version"),
    ],
)
def test_a_header_it_cannot_vouch_for_reads_as_none(tmp_path: Path, change: object, why: str) -> None:
    path = tmp_path / "db.sqlite3"
    with closing(wal_db(path)) as conn:
        conn.execute("INSERT INTO t VALUES (1)")
        raw = (tmp_path / "db.sqlite3-shm").read_bytes()[: 2 * HEADER_SIZE]
    crafted = tmp_path / "crafted-shm"
    crafted.write_bytes(change(raw))  # type: ignore[operator]
    header = WalIndexHeader.map(str(crafted))
    assert header is not None and header.read() is None, why
    zeros = tmp_path / "zeros-shm"
    zeros.write_bytes(bytes(2 * HEADER_SIZE))
    never_initialised = WalIndexHeader.map(str(zeros))
    assert never_initialised is not None and never_initialised.read() is None


def test_a_left_over_shared_memory_file_is_not_trusted(tmp_path: Path) -> None:
    """A ``-shm`` file that SQLite does not use for this database (left from another file once at that
    path) never changes: it must not be taken for the live one."""
    path = tmp_path / "db.sqlite3"
    with closing(wal_db(path)) as conn:
        conn.execute("INSERT INTO t VALUES (1)")
        left_over = (tmp_path / "db.sqlite3-shm").read_bytes()
    path.unlink()
    (tmp_path / "db.sqlite3-wal").unlink(missing_ok=True)
    (tmp_path / "db.sqlite3-shm").write_bytes(left_over)  # no -wal beside it: nothing to vouch for it
    assert WalIndexHeader.open(str(path)) is None
    with closing(wal_db(tmp_path / "other.sqlite3")) as other:  # a live WAL of another database
        other.execute("INSERT INTO t VALUES (2)")
        (tmp_path / "db.sqlite3-wal").write_bytes((tmp_path / "other.sqlite3-wal").read_bytes())
        assert WalIndexHeader.open(str(path)) is None  # its salts are not the ones the header repeats


def test_a_database_reached_through_a_symbolic_link(tmp_path: Path) -> None:
    """SQLite keeps ``-wal`` and ``-shm`` beside the link's target; the header is read there too."""
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "db.sqlite3"
    link = tmp_path / "link.sqlite3"
    link.symlink_to(target)
    worker_a, worker_b, key = two_workers(link)
    t0 = T0
    assert worker_b.find_keys_by_prefix("ABCDEFGH")[0][0].revoked_at is None
    assert isinstance(worker_b._reads._version(worker_b._db.conn), bytes)  # the header, found via the target
    worker_a.end_key(key.id, revoked_at=t0)
    assert worker_b.find_keys_by_prefix("ABCDEFGH")[0][0].revoked_at == t0


def test_no_shared_memory_file_no_header(tmp_path: Path) -> None:
    assert WalIndexHeader.open(str(tmp_path / "absent.sqlite3")) is None
    (tmp_path / "short.sqlite3-shm").write_bytes(b"\x00" * 10)
    assert WalIndexHeader.open(str(tmp_path / "short.sqlite3")) is None


def test_the_store_reads_the_header_and_sees_each_revocation(tmp_path: Path) -> None:
    worker_a, worker_b, key = two_workers(tmp_path / "shared.sqlite3")
    worker_b.find_keys_by_prefix("ABCDEFGH")
    assert isinstance(worker_b._reads._version(worker_b._db.conn), bytes)  # the header, not the pragma
    for n in range(1, 30):  # each commit moves the key's end earlier (an end never moves later)
        when = datetime(2026, 1, 1, 0, 1, 0, tzinfo=UTC) - timedelta(seconds=n)
        worker_a.end_key(key.id, expires_at=when)
        assert worker_b.find_keys_by_prefix("ABCDEFGH")[0][0].expires_at == when


def test_without_a_header_the_store_asks_sqlite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(read_cache.WalIndexHeader, "open", classmethod(lambda cls, path: None))
    worker_a, worker_b, key = two_workers(tmp_path / "shared.sqlite3")
    worker_b.find_keys_by_prefix("ABCDEFGH")
    assert isinstance(worker_b._reads._version(worker_b._db.conn), int)  # PRAGMA data_version
    when = datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC)
    worker_a.end_key(key.id, revoked_at=when)
    assert worker_b.find_keys_by_prefix("ABCDEFGH")[0][0].revoked_at == when


def test_a_header_written_after_the_first_read_is_taken_up(tmp_path: Path) -> None:
    """A service's start: the previous run's last connection removed the ``-wal`` file, so a worker's first
    read finds a WAL with no header and asks the pragma. Once a commit has written one, the worker reads the
    header (within a second), and every revocation is seen on the way."""
    path = tmp_path / "shared.sqlite3"
    first_a, first_b, key = two_workers(path)
    first_a.close()
    first_b.close()
    assert not (tmp_path / "shared.sqlite3-wal").exists()  # the last connection checkpointed and removed it
    with freeze_time("2026-01-01 00:00:00") as clock:
        worker_a, worker_b = SqliteKeyStore(path, "s" * 40), SqliteKeyStore(path, "s" * 40)
        assert worker_b.find_keys_by_prefix("ABCDEFGH")[0][0].revoked_at is None
        assert isinstance(worker_b._reads._version(worker_b._db.conn), int)  # no header to trust yet
        worker_a.end_key(key.id, expires_at=T0 + timedelta(days=1))  # the first commit writes the WAL's header
        assert worker_b.find_keys_by_prefix("ABCDEFGH")[0][0].expires_at == T0 + timedelta(days=1)
        assert isinstance(worker_b._reads._version(worker_b._db.conn), int)  # tried again once a second only
        clock.tick(1)
        assert isinstance(worker_b._reads._version(worker_b._db.conn), bytes)  # the header, from now on
        worker_a.end_key(key.id, revoked_at=T0)
        assert worker_b.find_keys_by_prefix("ABCDEFGH")[0][0].revoked_at == T0


_HOLDER = """
import sqlite3, sys
from adapters.store.wal_index import WalIndexHeader
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("INSERT INTO t VALUES (0)")  # a -wal file with a header, as a live service has
for _ in range(3):  # the read cache maps a header for each connection it sees, and drops the old ones
    header = WalIndexHeader.open(sys.argv[1])
    assert header is not None
    header.close()
header = WalIndexHeader.open(sys.argv[1])
print("mapped", flush=True)
sys.stdin.readline()  # another process opens the database meanwhile
assert header.read() is not None
print(conn.execute("SELECT count(*) FROM t").fetchone()[0], flush=True)
"""


def test_mapping_the_header_keeps_sqlites_locks_on_the_shared_memory(tmp_path: Path) -> None:
    """POSIX drops every lock a process holds on a file when it closes any descriptor of that file. Had
    mapping the header closed a descriptor of the ``-shm`` file, SQLite's lock saying "this process uses
    the WAL-index" would be gone; the next process to open the database would find no user left, reset
    the file to zero bytes, and every process with it mapped would die of SIGBUS (seen: gunicorn workers
    "sent SIGBUS!" when a new worker or ``community-api backup`` opened the database)."""
    import subprocess
    import sys

    from scripts.processes import ROOT

    path = tmp_path / "db.sqlite3"
    with closing(wal_db(path)) as setup:
        setup.execute("INSERT INTO t VALUES (1)")
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path)],
        cwd=ROOT,
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert holder.stdout is not None and holder.stdin is not None
    try:
        assert holder.stdout.readline().strip() == "mapped", holder.stderr.read() if holder.stderr else ""
        # The "dead man switch" byte of the WAL-index (offset 128, unix VFS): a process that uses the file
        # holds a shared lock on it, so nobody else may take it exclusively.
        with open(f"{path}-shm", "r+b") as shm, pytest.raises(OSError):
            fcntl.lockf(shm, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 128)
        newcomer = subprocess.run(
            [
                sys.executable,
                "-c",
                (
                    "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
                    "c.execute('INSERT INTO t VALUES (2)'); c.close()"
                ),
                str(path),
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert newcomer.returncode == 0, newcomer.stderr
        out, err = holder.communicate("go\n", timeout=30)
    finally:
        if holder.poll() is None:
            holder.kill()
    assert holder.returncode == 0, f"the holder ended with {holder.returncode}: {err}"
    assert out.strip() == "3"


def open_descriptors() -> int:
    return len(list(Path("/proc/self/fd").iterdir()))


def mappings_of(path: Path) -> int:
    return sum(1 for line in Path("/proc/self/maps").read_text().splitlines() if line.endswith(str(path)))


def test_headers_opened_and_closed_again_and_again_leave_nothing_open(tmp_path: Path) -> None:
    """A worker maps the header once per connection, for months: one descriptor per ``-shm`` file in all
    (never closed, so that SQLite's locks on it stay), and no mapping left behind by a header closed, or
    by one that could not be vouched for."""
    path = tmp_path / "db.sqlite3"
    shm = tmp_path / "db.sqlite3-shm"
    with closing(wal_db(path)) as conn:
        conn.execute("INSERT INTO t VALUES (1)")
        first = WalIndexHeader.open(str(path))
        assert first is not None
        descriptors, mapped = open_descriptors(), mappings_of(shm)
        for _ in range(50):
            header = WalIndexHeader.open(str(path))
            assert header is not None and header.read() is not None
            header.close()
        assert (open_descriptors(), mappings_of(shm)) == (descriptors, mapped)
        (tmp_path / "other.sqlite3").touch()
        with closing(wal_db(tmp_path / "other.sqlite3")) as other:  # a live WAL whose salts are not these
            other.execute("INSERT INTO t VALUES (2)")
            real_wal = (tmp_path / "db.sqlite3-wal").read_bytes()
            (tmp_path / "db.sqlite3-wal").write_bytes((tmp_path / "other.sqlite3-wal").read_bytes())
            for _ in range(50):
                assert WalIndexHeader.open(str(path)) is None
            assert mappings_of(shm) == mapped
            (tmp_path / "db.sqlite3-wal").write_bytes(real_wal)
        first.close()
