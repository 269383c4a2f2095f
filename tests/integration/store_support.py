"""Two ``SqliteKeyStore`` instances on one file stand for two gunicorn workers: what one commits, the
other must see on its very next look-up (the read cache's promise)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from adapters.store.sqlite_key_store import SqliteKeyStore
from community_api.model import Account, ApiKey

T0 = datetime(2026, 1, 1, tzinfo=UTC)
PREFIX = "ABCDEFGH"


def two_workers(path: Path) -> tuple[SqliteKeyStore, SqliteKeyStore, ApiKey]:
    """Two stores on ``path``, with an account (``acc_1``) and a live key (prefix ``PREFIX``) written
    through the first. Answers (first, second, the key)."""
    worker_a, worker_b = SqliteKeyStore(path, "s" * 40), SqliteKeyStore(path, "s" * 40)
    worker_a.add_account(Account(id="acc_1", email="a@example.com", created_at=T0), "hash")
    key = ApiKey(
        id="key_1", account_id="acc_1", name="k", prefix=PREFIX, scopes=("posts:read",),
        connection_id=None, kind="standard", created_at=T0, lineage_id="key_1",
    )  # fmt: skip
    worker_a.add_key(key, "h" * 64)
    return worker_a, worker_b, key
