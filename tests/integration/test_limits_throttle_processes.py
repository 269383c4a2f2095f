"""The DM throttle shared by real worker processes: of concurrent reserves, no more succeed than allowed.

Processes are forked from a parent that has already used the throttle, as gunicorn forks its workers
(``--preload``), so the storage must open fresh connections in each child. All of them wait at a barrier
and reserve at once, on the real clock.

Left alone, the processes rarely overlap: one reserve takes well under a millisecond. The "slow reads"
storages (test-only schemes) pause after reading a connection's last reservation, so that every process
has read "no send yet" before any of them writes: only the atomic lock can then keep the count exact.
"""

from __future__ import annotations

import multiprocessing
import os
import time
import traceback
from collections.abc import Iterator
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest
from limits.storage import RedisStorage

from adapters.throttle.limits_throttle import MAX_GAP, MIN_GAP, LimitsThrottle
from adapters.throttle.mmap_limits_storage import MmapStorage
from adapters.throttle.sqlite_limits_storage import SQLiteStorage
from community_api.errors import RateLimited
from tests.contract.test_throttle import flush_redis, running_redis_server

pytestmark = pytest.mark.slow

WORKERS = 8
SALT = "processes-test-salt"
FORK = multiprocessing.get_context("fork")


READ_PAUSE = 0.1


def _pause_after_pace_read(key: str) -> None:
    if "/dm-pace/" in key:
        time.sleep(READ_PAUSE)


class SlowReadsSQLiteStorage(SQLiteStorage):
    STORAGE_SCHEME = ["sqlite+slowreads"]

    def get_moving_window(self, key: str, limit: int, expiry: int) -> tuple[float, int]:
        window = super().get_moving_window(key, limit, expiry)
        _pause_after_pace_read(key)
        return window


class SlowReadsMmapStorage(MmapStorage):
    STORAGE_SCHEME = ["mmap+slowreads"]

    def get_moving_window(self, key: str, limit: int, expiry: int) -> tuple[float, int]:
        window = super().get_moving_window(key, limit, expiry)
        _pause_after_pace_read(key)
        return window


class SlowReadsRedisStorage(RedisStorage):
    STORAGE_SCHEME = ["redis+slowreads"]

    def __init__(self, uri: str) -> None:
        super().__init__(uri.replace("redis+slowreads://", "redis://", 1))

    def get_moving_window(self, key: str, limit: int, expiry: int) -> tuple[float, int]:
        window = super().get_moving_window(key, limit, expiry)
        _pause_after_pace_read(key)
        return window


@pytest.fixture(scope="module")
def redis_uri() -> Iterator[str]:
    with running_redis_server() as uri:
        yield uri


def _storage_uri(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if kind.startswith("sqlite"):
        return f"{kind}:///{tmp_path / 'service.sqlite3'}"
    if kind.startswith("mmap"):
        return f"{kind}://{tmp_path / 'service.throttle.mmap'}"
    uri: str = request.getfixturevalue("redis_uri")
    flush_redis(uri)
    return uri.replace("redis://", f"{kind}://", 1)


@pytest.fixture(params=["mmap", "sqlite", "redis"])
def storage_uri(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return _storage_uri(request.param, request, tmp_path)


@pytest.fixture(params=["mmap", "sqlite", "redis", "mmap+slowreads", "sqlite+slowreads", "redis+slowreads"])
def racing_storage_uri(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return _storage_uri(request.param, request, tmp_path)


def _worker(throttle: LimitsThrottle, connection_id: str, barrier: Barrier, results: multiprocessing.Queue) -> None:  # type: ignore[type-arg,unused-ignore]
    try:
        # Open this process's storage connection first, so that the reserves themselves run side by side.
        throttle.quota("warm-up")
        barrier.wait(timeout=30)
        try:
            throttle.commit(throttle.reserve(connection_id))
        except RateLimited as refused:
            results.put((os.getpid(), connection_id, "refused", refused.retry_after))
        else:
            results.put((os.getpid(), connection_id, "sent", 0))
    except BaseException:
        results.put((os.getpid(), connection_id, "error", traceback.format_exc()))


def race(throttle: LimitsThrottle, connection_ids: list[str]) -> list[tuple[str, str, object]]:
    barrier = FORK.Barrier(len(connection_ids))
    results: multiprocessing.Queue = FORK.Queue()  # type: ignore[type-arg,unused-ignore]
    processes = [
        FORK.Process(target=_worker, args=(throttle, connection_id, barrier, results))
        for connection_id in connection_ids
    ]
    for process in processes:
        process.start()
    outcomes = [results.get(timeout=60) for _ in processes]
    for process in processes:
        process.join(30)
        assert process.exitcode == 0
    assert all(pid != os.getpid() for pid, *_ in outcomes)
    errors = [detail for _, _, what, detail in outcomes if what == "error"]
    assert not errors, errors[0]
    return [(connection_id, what, detail) for _, connection_id, what, detail in outcomes]


def test_of_eight_processes_sending_at_once_for_one_connection_exactly_one_succeeds(
    racing_storage_uri: str,
) -> None:
    storage_uri = racing_storage_uri
    throttle = LimitsThrottle(storage_uri, salt=SALT)
    assert throttle.quota("warm-up").sent_last_hour == 0  # the parent's connection is open before fork

    outcomes = race(throttle, ["conn-1"] * WORKERS)

    assert sorted(what for _, what, _ in outcomes) == ["refused"] * (WORKERS - 1) + ["sent"]
    for _, what, retry_after in outcomes:
        if what == "refused":
            # The winner's drawn gap, less the instant that has passed: the losers know it exactly.
            assert isinstance(retry_after, int) and MIN_GAP - 1 <= retry_after <= MAX_GAP
    quota = LimitsThrottle(storage_uri, salt=SALT).quota("conn-1")
    assert (quota.sent_last_hour, quota.sent_today) == (1, 1)
    assert quota.next_allowed_at is not None


def test_processes_sending_for_different_connections_do_not_hold_each_other_up(storage_uri: str) -> None:
    throttle = LimitsThrottle(storage_uri, salt=SALT)
    throttle.quota("warm-up")
    connections = [f"conn-{i % 4}" for i in range(WORKERS)]  # two processes per connection

    outcomes = race(throttle, connections)

    sent = sorted(connection_id for connection_id, what, _ in outcomes if what == "sent")
    assert sent == ["conn-0", "conn-1", "conn-2", "conn-3"]
    for connection_id in set(connections):
        assert throttle.quota(connection_id).sent_last_hour == 1
