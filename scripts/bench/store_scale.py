"""The store and the DM throttle as they grow: each per-request operation timed on a small store and a large
one, side by side in one run (five runs of each, small and large alternately; medians), and their ratio.

- small: 10 keys, 90 usage rows, 100 throttle entries;
- large: 100,000 keys, 1,000,000 usage rows (100,000 keys × 10 days), 100,000 throttle entries (over
  25,000 connections' DM windows).

Operations, each as one request does it (the read cache is bypassed, so the SQLite look-up itself is what
is timed; in production a repeated key is answered from the cache):
- key check: ``keys.authenticate_key`` (shape, SHA-256, look-up by prefix, constant-time compare);
- connection look-up: ``load_connection`` (the active connection with its decrypted platform session);
- usage accounting: one ``add_usage`` flush of one key's count;
- DM throttle check: ``LimitsThrottle.quota`` (the reads that decide whether a send may go), on the SQLite
  storage and on the mapped-file one (the default), each holding the same number of entries.

Prints one line per operation and last ``worst ratio large/small = R`` (goal: at most 1.2).
Run: ``.venv/bin/python scripts/bench/store_scale.py`` (about a minute, most of it building the large store).
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sqlite3
import statistics
import string
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from adapters.store.sqlite_key_store import SqliteKeyStore
from adapters.store.sqlite_schema import ts
from adapters.throttle.limits_throttle import LimitsThrottle
from adapters.throttle.mmap_limits_storage import MmapStorage
from community_api import keys
from community_api.clock import SystemClock
from community_api.model import Account, Connection
from community_api.refusal_audit import RefusalAudit

SECRET = "store-scale-" + "s" * 40
ALPHABET = string.ascii_letters + string.digits
T = TypeVar("T")


class UncachedStore(SqliteKeyStore):
    """The store without its per-thread read cache: every look-up asks SQLite."""

    def _cached(self, key: tuple[Any, ...], load: Callable[[], T]) -> T:
        return load()


class Setup:
    def __init__(self, folder: Path, n_keys: int, usage_days: int, throttle_entries: int) -> None:
        db = folder / "store.sqlite3"
        self.store = UncachedStore(db, SECRET)
        clock = SystemClock()
        self.account = "acc_scale"
        self.store.add_account(Account(id=self.account, email="scale@example.com", created_at=clock.now()), "h")
        connection = Connection(
            id="con_scale",
            account_id=self.account,
            platform_user_id="0" * 32,
            handle="alice",
            name="Alice",
            active=True,
            status="active",
            created_at=clock.now(),
        )
        self.connection = self.store.save_connection(connection, "platform-session-token").id
        issued = keys.mint_key(
            self.store, clock, account_id=self.account, name="measured", scopes=None, connection_id=None
        )
        self.secret, self.key_id = issued.secret, issued.key.id
        self._fill(db, n_keys - 1, usage_days)
        throttle_db = folder / "throttle.sqlite3"
        self.throttle = LimitsThrottle(f"sqlite:///{throttle_db}", salt=SECRET)
        self.throttle.quota(self.connection)  # creates the storage's tables
        self._fill_throttle(throttle_db, throttle_entries)
        # The default storage, a mapped file: filled through its own API (4 entries for each connection).
        self.mapped_throttle = LimitsThrottle(f"mmap://{folder / 'throttle.mmap'}", salt=SECRET)
        self.mapped_throttle.quota(self.connection)
        mapped = MmapStorage(f"mmap://{folder / 'throttle.mmap'}")
        for i in range(throttle_entries // 4):
            mapped.acquire_entry(f"community-api/dm-hour/con_other{i}", 21, 3600, amount=4)
        with sqlite3.connect(db) as conn, sqlite3.connect(throttle_db) as throttle_conn:
            self.counts = (
                conn.execute("SELECT count(*) FROM keys").fetchone()[0],
                conn.execute("SELECT count(*) FROM usage").fetchone()[0],
                throttle_conn.execute("SELECT count(*) FROM throttle_marks").fetchone()[0],
            )

    def _fill(self, db: Path, others: int, usage_days: int) -> None:
        rng = random.Random(7)
        now = datetime.now(UTC)
        with sqlite3.connect(db) as conn:
            rows = []
            for i in range(others):
                prefix = "".join(rng.choices(ALPHABET, k=8))
                secret_hash = hashlib.sha256(f"other-{i}".encode()).hexdigest()
                rows.append(
                    (
                        f"key_other{i}",
                        f"acc_other{i % 5000}",
                        "k",
                        prefix,
                        "posts:read",
                        None,
                        "standard",
                        ts(now),
                        f"key_other{i}",
                        None,
                        None,
                        None,
                        secret_hash,
                    )
                )
            conn.executemany(
                "INSERT INTO keys (id, account_id, name, prefix, scopes, connection_id, kind, created_at,"
                " lineage_id, last_used_at, expires_at, revoked_at, secret_hash)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            days = [(now - timedelta(days=d)).strftime("%Y-%m-%d") for d in range(1, usage_days + 1)]
            conn.executemany(
                "INSERT INTO usage (key_id, day, count) VALUES (?, ?, ?)",
                ((f"key_other{i}", day, 3) for i in range(others) for day in days),
            )

    @staticmethod
    def _fill_throttle(db: Path, entries: int) -> None:
        now = time.time()
        per_key = 4
        with sqlite3.connect(db) as conn:
            conn.executemany(
                "INSERT INTO throttle_marks (key, last, first, at, expires_at, floor) VALUES (?, ?, ?, ?, ?, 0)",
                (
                    (
                        f"community-api/dm-hour/con_other{i // per_key}",
                        i % per_key + 1,
                        i % per_key + 1,
                        now - 60 * (per_key - i % per_key),
                        now + 3600,
                    )
                    for i in range(entries)
                ),
            )


def mean_us(operation: Callable[[], object], repeats: int) -> float:
    """The mean time of ``repeats`` calls, in microseconds."""
    started = time.perf_counter()
    for _ in range(repeats):
        operation()
    return (time.perf_counter() - started) / repeats * 1e6


def timed_side_by_side(small: Callable[[], object], large: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Medians of 5 runs of each, small and large alternately: a burst of other work on the machine (the
    kernel writing back the large store just built, say) then slows both sides, not only the one that
    happened to be timed during it."""
    small_runs, large_runs = [], []
    for _ in range(5):
        small_runs.append(mean_us(small, repeats))
        large_runs.append(mean_us(large, repeats))
    return statistics.median(small_runs), statistics.median(large_runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=2000)
    args = parser.parse_args()
    clock = SystemClock()
    with tempfile.TemporaryDirectory() as small_dir, tempfile.TemporaryDirectory() as large_dir:
        started = time.perf_counter()
        small = Setup(Path(small_dir), 10, 10, 100)
        large = Setup(Path(large_dir), args.keys, 10, 100_000)
        print(f"built the stores in {time.perf_counter() - started:.0f} s")
        for label, setup in (("small", small), ("large", large)):
            print(
                f"{label}: {setup.counts[0]:,} keys, {setup.counts[1]:,} usage rows, "
                f"{setup.counts[2]:,} throttle entries"
            )
        today = datetime.now(UTC).strftime("%Y-%m-%d")
        operations: dict[str, Callable[[Setup], Callable[[], object]]] = {
            "key check": lambda s: lambda: keys.authenticate_key(s.store, clock, s.secret, RefusalAudit()),
            "connection look-up": lambda s: lambda: s.store.load_connection(s.account, None),
            "usage accounting": lambda s: (
                lambda: s.store.add_usage({(s.key_id, today): 1}, {s.key_id: datetime.now(UTC)})
            ),
            "DM throttle check (sqlite://)": lambda s: lambda: s.throttle.quota(s.connection),
            "DM throttle check (mmap://, the default)": lambda s: lambda: s.mapped_throttle.quota(s.connection),
        }
        ratios = []
        for name, make in operations.items():
            small_op, large_op = make(small), make(large)
            small_op(), large_op()  # warm both
            small_us, large_us = timed_side_by_side(small_op, large_op, args.repeats)
            ratio = large_us / small_us
            ratios.append(ratio)
            print(f"{name}: small {small_us:.1f} us, large {large_us:.1f} us, large/small = {ratio:.2f}")
    print(f"worst ratio large/small = {max(ratios):.2f}")


if __name__ == "__main__":
    main()
