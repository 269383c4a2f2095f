"""Our two storages for ``limits``, ``sqlite://`` and ``mmap://``: registered by scheme, the same
moving-window answers as the storages shipped with ``limits`` (Redis's, differentially), and an exact
count across processes and threads. What only one of them has is tested at the end (SQLite's tables) and
in ``test_limits_mmap_storage.py``."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import random
import sqlite3
import stat
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import cast

import pytest
from freezegun.api import FrozenDateTimeFactory
from limits import RateLimitItemPerMinute
from limits.errors import ConfigurationError
from limits.storage import SCHEMES, MemoryStorage, MovingWindowSupport, Storage, storage_from_string
from limits.strategies import FixedWindowRateLimiter, MovingWindowRateLimiter

from adapters.store.sqlite_key_store import SqliteKeyStore
from adapters.throttle.mmap_limits_storage import MmapStorage
from adapters.throttle.sqlite_limits_storage import SQLiteStorage, path_from_uri
from community_api.model import Account
from tests.contract.redis_support import flush_redis, running_redis_server
from tests.frozen_clock import frozen_at

FORK = multiprocessing.get_context("fork")
START = datetime(2100, 1, 1, tzinfo=UTC)  # after the real clock: see tests/contract/test_throttle.py


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "var" / "service.sqlite3"


class AnyStorage(Storage, MovingWindowSupport):
    """For the type checker: what both storages are."""


@pytest.fixture
def sqlite_storage(db_path: Path) -> SQLiteStorage:
    made = storage_from_string(f"sqlite:///{db_path}")
    assert isinstance(made, SQLiteStorage)
    return made


@pytest.fixture(params=["sqlite", "mmap"])
def storage(request: pytest.FixtureRequest, db_path: Path) -> AnyStorage:
    if request.param == "sqlite":
        return cast(AnyStorage, request.getfixturevalue("sqlite_storage"))
    made = storage_from_string(f"mmap://{db_path.with_suffix('.mmap')}")
    assert isinstance(made, MmapStorage)
    return cast(AnyStorage, made)


@pytest.fixture
def frozen() -> Iterator[FrozenDateTimeFactory]:
    with frozen_at(START) as clock:
        yield clock


def test_the_schemes_are_registered_with_limits() -> None:
    assert SCHEMES["sqlite"] is SQLiteStorage
    assert SCHEMES["mmap"] is MmapStorage


@pytest.mark.parametrize(
    ("uri", "path"),
    [
        ("sqlite:///srv/api/db.sqlite3", "/srv/api/db.sqlite3"),
        ("sqlite:////srv/api/db.sqlite3", "/srv/api/db.sqlite3"),
        ("sqlite://var/db.sqlite3", "var/db.sqlite3"),
        ("sqlite://var/my%20api/db.sqlite3", "var/my api/db.sqlite3"),
        ("sqlite:///srv/my%20api/db.sqlite3", "/srv/my api/db.sqlite3"),
        ("sqlite://~/db.sqlite3", "{home}/db.sqlite3"),  # before: a folder named "~" in the working folder
        ("sqlite:///~/db.sqlite3", "/~/db.sqlite3"),  # an absolute path, as written
    ],
)
def test_uri_names_the_database_file(uri: str, path: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert path_from_uri(uri) == path.format(home=tmp_path)


@pytest.mark.parametrize("uri", ["sqlite://", "sqlite:///", "sqlite:///:memory:", "sqlite:///db?x=1"])
def test_uri_without_a_usable_file_is_refused(uri: str) -> None:
    with pytest.raises(ConfigurationError):
        storage_from_string(uri)


def test_sqlite_creates_its_tables_in_wal_mode_beside_the_key_stores(
    sqlite_storage: SQLiteStorage, db_path: Path
) -> None:
    storage = sqlite_storage
    with closing(SqliteKeyStore.open(db_path, "s" * 40)) as store:
        store.add_account(Account("acc_1", "ops@example.com", START), "argon-hash")
    assert storage.check()
    assert storage.acquire_entry("k", 1, 10)
    with closing(sqlite3.connect(db_path)) as db:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"accounts", "keys", "throttle_marks", "throttle_counters"} <= tables
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    storage.reset()
    with closing(SqliteKeyStore.open(db_path, "s" * 40)) as store:
        assert [account.id for account in store.list_accounts()] == ["acc_1"]


def test_sqlite_refuses_another_programs_database_and_leaves_it_as_it_is(
    sqlite_storage: SQLiteStorage, db_path: Path
) -> None:
    """Before: its tables were added to it, and its journal made WAL."""
    db_path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(db_path)) as other, other:
        other.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY)")
    held = db_path.read_bytes()
    with pytest.raises(ConfigurationError, match=r"a SQLite database of something else \(tables photos\)"):
        sqlite_storage.acquire_entry("k", 1, 10)
    assert db_path.read_bytes() == held


def test_moving_window_answers_as_limits_own_storages_do(storage: AnyStorage, frozen: FrozenDateTimeFactory) -> None:
    """The same calls against memory:// and sqlite:// give the same answers (memory:// counts an entry
    exactly ``expiry`` old out of the window when reading, so reads here avoid that instant)."""
    memory = MemoryStorage("memory://")
    for backend in (memory, storage):
        assert backend.acquire_entry("k", 2, 10)
    frozen.tick(4)
    answers = []
    for backend in (memory, storage):
        answers.append(
            (
                backend.acquire_entry("k", 2, 10),
                backend.acquire_entry("k", 2, 10),  # a third within 10 s: refused
                backend.get_moving_window("k", 2, 10),
                backend.acquire_entry("k", 5, 10, amount=6),  # more than the limit at once
            )
        )
    assert answers[0] == answers[1] == (True, False, (START.timestamp(), 2), False)
    frozen.tick(6)  # the first entry is exactly 10 s old: acquisition windows are closed
    assert [b.acquire_entry("k", 2, 10) for b in (memory, storage)] == [False, False]
    frozen.tick(0.5)
    assert [b.acquire_entry("k", 2, 10) for b in (memory, storage)] == [True, True]
    assert [b.get_moving_window("k", 2, 10) for b in (memory, storage)] == [(START.timestamp() + 4, 2)] * 2


def test_moving_window_rate_limiter_runs_on_it(storage: AnyStorage, frozen: FrozenDateTimeFactory) -> None:
    limiter = MovingWindowRateLimiter(storage)
    three_a_minute = RateLimitItemPerMinute(3)
    assert [limiter.hit(three_a_minute, "c1") for _ in range(4)] == [True, True, True, False]
    assert limiter.hit(three_a_minute, "c2")
    stats = limiter.get_window_stats(three_a_minute, "c1")
    assert (stats.reset_time, stats.remaining) == (START.timestamp() + 60, 0)
    frozen.tick(60.5)
    assert limiter.test(three_a_minute, "c1")


def test_entries_are_trimmed_and_expire_like_redis_lists(storage: AnyStorage, frozen: FrozenDateTimeFactory) -> None:
    for _ in range(5):
        assert storage.acquire_entry("k", 3, 100)
        frozen.tick(40)
    assert storage.get_moving_window("k", 10, 1000)[1] == 3  # only the newest `limit` are kept
    frozen.tick(100)  # 100 s after the last acquisition the whole key has expired
    assert storage.get_moving_window("k", 10, 1000)[1] == 0
    assert storage.acquire_entry("other", 2, 5)
    assert storage.acquire_entry("other", 2, 5)  # one key, however many entries
    assert storage.reset() == 1  # "k" had expired: only "other" is left


def test_a_key_expired_exactly_now_starts_empty_whatever_window_is_asked(
    storage: AnyStorage, frozen: FrozenDateTimeFactory
) -> None:
    """The key expires ``expiry`` after its last acquisition (Redis's EXPIRE), at that instant; its entries
    go with it, even for a caller that then asks for a longer window."""
    assert storage.acquire_entry("k", 1, 10)
    frozen.tick(9.5)
    assert storage.get_moving_window("k", 1, 60) == (START.timestamp(), 1)
    frozen.tick(0.5)
    assert storage.get_moving_window("k", 1, 60) == (START.timestamp() + 10, 0)
    assert storage.acquire_entry("k", 1, 60)
    assert not storage.acquire_entry("k", 1, 60)


def test_a_counter_keeps_the_expiry_it_was_made_with(storage: AnyStorage, frozen: FrozenDateTimeFactory) -> None:
    """A fixed window: adding to the counter does not push its end back."""
    assert storage.incr("n", 30) == 1
    frozen.tick(20)
    assert storage.incr("n", 30) == 2
    assert storage.get_expiry("n") == START.timestamp() + 30
    frozen.tick(10)
    assert storage.get("n") == 0


def test_sqlite_keeps_about_limit_rows_for_a_key_acquired_often(
    sqlite_storage: SQLiteStorage, db_path: Path, frozen: FrozenDateTimeFactory
) -> None:
    for _ in range(1000):
        assert sqlite_storage.acquire_entry("k", 10, 1)
        frozen.tick(0.2)
    with closing(sqlite3.connect(db_path)) as db:
        (rows,) = db.execute("SELECT COUNT(*) FROM throttle_marks WHERE key = 'k'").fetchone()
    assert rows <= 10 + 16  # the newest ``limit``, and those since the last trim


def test_sqlite_waits_for_another_writer_then_gives_up_after_its_timeout(db_path: Path) -> None:
    """A write lock held elsewhere (another worker's transaction) is waited for, up to the storage's
    ``timeout``; then SQLite's "database is locked" stands."""
    storage = SQLiteStorage(f"sqlite:///{db_path}", timeout=2.0)
    assert storage.acquire_entry("k", 5, 60)
    with closing(sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)) as other:
        other.execute("BEGIN IMMEDIATE")
        release = threading.Timer(0.3, lambda: other.execute("COMMIT"))
        release.start()
        try:
            assert storage.acquire_entry("k", 5, 60)  # after the other transaction ends
        finally:
            release.join()
        other.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(sqlite3.OperationalError, match="database is locked"):
                storage.acquire_entry("k", 5, 60)
        finally:
            other.execute("ROLLBACK")
    assert storage.get_moving_window("k", 5, 60)[1] == 2


def test_sqlite_raises_an_error_that_is_not_a_lock_at_once(db_path: Path) -> None:
    storage = SQLiteStorage(f"sqlite:///{db_path}", timeout=30.0)
    assert storage.acquire_entry("k", 5, 60)
    with closing(sqlite3.connect(db_path)) as other, other:
        other.execute("DROP TABLE throttle_marks")
    started = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        storage.acquire_entry("k", 5, 60)
    assert time.monotonic() - started < 5  # not retried as a lock wait would be, for 30 s


def test_sqlite_a_write_cut_short_leaves_no_transaction_open(
    sqlite_storage: SQLiteStorage, frozen: FrozenDateTimeFactory
) -> None:
    """An exception inside a write (here a bad argument; in a worker, gunicorn's timeout) rolls it back:
    the storage's next call starts a transaction of its own, and nothing half-written stays."""
    with pytest.raises(TypeError):
        sqlite_storage.incr("n", "thirty")  # type: ignore[arg-type]
    assert sqlite_storage.incr("n", 30) == 1
    assert sqlite_storage.get("n") == 1


def test_sqlite_deletes_the_rows_of_expired_keys(
    sqlite_storage: SQLiteStorage, db_path: Path, frozen: FrozenDateTimeFactory
) -> None:
    assert sqlite_storage.acquire_entry("k", 3, 100)
    frozen.tick(101)
    assert sqlite_storage.acquire_entry("other", 1, 5)
    with sqlite3.connect(db_path) as db:
        keys = [key for (key,) in db.execute("SELECT DISTINCT key FROM throttle_marks")]
    assert keys == ["other"]


def test_a_new_storage_file_is_readable_by_its_owner_only(storage: AnyStorage, db_path: Path) -> None:
    before = os.umask(0o022)  # the umask most shells give, not the test runner's
    try:
        assert storage.acquire_entry("k", 3, 100)
    finally:
        os.umask(before)
    files = [p for p in db_path.parent.iterdir() if p.name.startswith(db_path.stem)]
    assert files
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path.name


def test_counters_for_the_fixed_window_strategy(storage: AnyStorage, frozen: FrozenDateTimeFactory) -> None:
    assert storage.get_expiry("n") == START.timestamp()  # none yet: now, as limits' memory storage answers
    assert storage.incr("n", 30) == 1
    assert storage.incr("n", 30, amount=2) == 3
    assert storage.get("n") == 3
    assert storage.get_expiry("n") == START.timestamp() + 30
    frozen.tick(30)
    assert storage.get("n") == 0
    assert storage.incr("n", 30) == 1
    limiter = FixedWindowRateLimiter(storage)
    two_a_minute = RateLimitItemPerMinute(2)
    assert [limiter.hit(two_a_minute, "x") for _ in range(3)] == [True, True, False]
    storage.clear(two_a_minute.key_for("x"))
    assert limiter.hit(two_a_minute, "x")
    assert storage.reset() == 2
    assert storage.get("n") == 0
    assert storage.incr("n", 30, amount=5) == 5  # a new counter starts at the amount, not at 1


def test_a_counter_and_a_window_of_one_name_are_two_keys(storage: AnyStorage, frozen: FrozenDateTimeFactory) -> None:
    """The fixed-window strategy and the moving window may use one key name: neither sees the other."""
    assert storage.acquire_entry("k", 2, 60, amount=2)
    assert storage.incr("k", 60, amount=7) == 7
    assert storage.get_moving_window("k", 2, 60) == (START.timestamp(), 2)
    assert not storage.acquire_entry("k", 2, 60)
    assert storage.get("k") == 7


def test_clear_forgets_a_name_and_nothing_else(storage: AnyStorage, frozen: FrozenDateTimeFactory) -> None:
    """Cleared among many keys (two thousand fill several slots of one probe chain in the mmap table):
    its window admits a whole burst again, its counter starts again, every other key is as it was."""
    for i in range(2000):
        assert storage.acquire_entry(f"k{i}", 4, 600, amount=4)
        storage.incr(f"k{i}", 600)
    for i in range(0, 2000, 2):
        storage.clear(f"k{i}")
    assert [storage.get_moving_window(f"k{i}", 4, 600)[1] for i in range(6)] == [0, 4, 0, 4, 0, 4]
    assert [storage.get(f"k{i}") for i in range(6)] == [0, 1, 0, 1, 0, 1]
    assert all(storage.get_moving_window(f"k{i}", 4, 600)[1] == 4 for i in range(1, 2000, 2))
    assert all(storage.get(f"k{i}") == 1 for i in range(1, 2000, 2))
    assert storage.acquire_entry("k0", 4, 600, amount=4)  # what the cleared slot held is not read again
    assert not storage.acquire_entry("k1", 4, 600)


def test_a_clock_stepped_back_never_shortens_a_window(storage: AnyStorage, frozen: FrozenDateTimeFactory) -> None:
    """A racer's (or a stepped clock's) earlier reading is raised to the newest entry's time, so the list
    stays ordered and a read counts every entry still inside."""
    assert storage.acquire_entry("k", 5, 60)
    frozen.tick(-10)
    assert storage.acquire_entry("k", 5, 60)
    frozen.tick(5)
    assert storage.acquire_entry("k", 5, 60)
    assert storage.get_moving_window("k", 5, 4) == (START.timestamp(), 3)


def test_an_entry_exactly_expiry_old_is_still_in_the_window(storage: AnyStorage, frozen: FrozenDateTimeFactory) -> None:
    assert storage.acquire_entry("k", 3, 60)
    frozen.tick(1)
    assert storage.acquire_entry("k", 3, 60)
    frozen.tick(10)
    assert storage.get_moving_window("k", 3, 11) == (START.timestamp(), 2)
    assert storage.get_moving_window("k", 3, 10) == (START.timestamp() + 1, 1)


def test_a_storage_pickles_into_one_that_shares_its_file(storage: AnyStorage, frozen: FrozenDateTimeFactory) -> None:
    """As limits' own memory storage does, for a program that hands a storage to another process."""
    assert storage.acquire_entry("k", 3, 60)
    copy = pickle.loads(pickle.dumps(storage))  # noqa: S301  (bytes this test has just made)
    assert copy.get_moving_window("k", 3, 60) == (START.timestamp(), 1)
    assert copy.acquire_entry("k", 3, 60, amount=2)
    assert not storage.acquire_entry("k", 3, 60)


def test_threads_count_exactly(storage: AnyStorage) -> None:
    results: list[bool] = []
    lock = threading.Lock()

    def hit() -> None:
        for _ in range(10):
            won = storage.acquire_entry("shared", 25, 3600)
            with lock:
                results.append(won)

    threads = [threading.Thread(target=hit) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.count(True) == 25 and len(results) == 60


def _hit_many(storage: AnyStorage, barrier: Barrier, results: multiprocessing.Queue) -> None:  # type: ignore[type-arg,unused-ignore]
    barrier.wait(timeout=30)
    results.put([storage.acquire_entry("exact", 20, 3600) for _ in range(5)])


def test_an_exact_count_across_forked_processes(storage: AnyStorage) -> None:
    assert storage.check()  # the parent's connection exists before the fork; children must not reuse it
    barrier = FORK.Barrier(8)
    results: multiprocessing.Queue = FORK.Queue()  # type: ignore[type-arg,unused-ignore]
    processes = [FORK.Process(target=_hit_many, args=(storage, barrier, results)) for _ in range(8)]
    for process in processes:
        process.start()
    outcomes = [won for _ in processes for won in results.get(timeout=60)]
    for process in processes:
        process.join(30)
        assert process.exitcode == 0
    assert outcomes.count(True) == 20
    assert storage.get_moving_window("exact", 20, 3600)[1] == 20
    assert storage.acquire_entry("after", 1, 1)  # the parent's own connection still works


@pytest.fixture(scope="module")
def redis_uri() -> Iterator[str]:
    with running_redis_server() as uri:
        yield uri


@pytest.mark.parametrize("seed", range(6))
def test_random_moving_window_calls_answer_as_the_redis_storage_does(
    storage: AnyStorage, frozen: FrozenDateTimeFactory, redis_uri: str, seed: int
) -> None:
    """Differential: the same random acquisitions (several limits and amounts per key, so lists are
    trimmed at different lengths) and window reads (shorter and longer windows, smaller and larger limits)
    against ``limits``' Redis storage, whose list semantics this storage copies. Frozen time stays within
    the keys' life (Redis expires keys on its own clock) and off exact window edges (random fractions)."""
    flush_redis(redis_uri)
    redis_storage = cast(AnyStorage, storage_from_string(redis_uri))
    rng = random.Random(seed)
    for step in range(120):
        key = rng.choice(("a", "b"))
        if rng.random() < 0.5:
            limit, amount = rng.choice((1, 2, 3, 5, 8)), rng.choice((1, 1, 1, 2, 3))
            call = ("acquire_entry", key, limit, 100, amount)
            answers = [backend.acquire_entry(key, limit, 100, amount=amount) for backend in (storage, redis_storage)]
            assert answers[0] == answers[1], (step, call)
        else:
            limit, expiry = rng.choice((1, 2, 3, 6, 9)), rng.choice((1, 2, 4, 7, 100))
            ours = storage.get_moving_window(key, limit, expiry)
            theirs = redis_storage.get_moving_window(key, limit, expiry)
            assert ours[1] == theirs[1] and abs(ours[0] - theirs[0]) < 1e-3, (step, key, limit, expiry, ours, theirs)
        frozen.tick(rng.uniform(0.05, 0.7))
