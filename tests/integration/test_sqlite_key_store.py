"""What only the real SQLite file can show: encryption at rest, secrets absent from the bytes on disk,
reopening, the schema and its indexes, and atomicity across processes.

A platform session sealed under another secret reads back as None (the store does not raise): the core
treats a missing session as an expired connection (``connection_expired``), and re-linking is the
remedy once the service secret has changed.
"""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime, timedelta
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import attrs
import pytest

from adapters.store.session_cipher import SessionCipher
from adapters.store.sqlite_key_store import READY_VOUCH_SECONDS, SqliteKeyStore
from adapters.store.sqlite_schema import MIGRATIONS, SCHEMA_VERSION, ForeignDatabase, run_step
from community_api.account_lifecycle import delete_account_unchecked
from community_api.keys import display_prefix, generate_secret, hash_secret
from community_api.model import (
    CONNECTION_ACTIVE,
    CONNECTION_EXPIRED,
    KEY_STANDARD,
    Account,
    ApiKey,
    AuditEvent,
    Connection,
    IdempotencyRecord,
    WebSession,
)
from fakes.clock import FakeClock
from tests.integration.store_support import T0 as WORKERS_T0
from tests.integration.store_support import two_workers

T0 = datetime(2026, 11, 1, 12, 0, 0, 654321, tzinfo=UTC)
SECRET = "service-secret-for-tests-0123456789"
PLATFORM_TOKEN = "platform-session-cookie-Zq8xV3-do-not-leak"


@pytest.fixture
def db_path(tmp_path: Path) -> str:
    return str(tmp_path / "keys.db")


@pytest.fixture
def store(db_path: str) -> Iterator[SqliteKeyStore]:
    s = SqliteKeyStore(db_path, SECRET)
    yield s
    s.close()


def a_connection(n: int = 1, account_id: str = "acc_1") -> Connection:
    return Connection(
        id=f"con_{n}",
        account_id=account_id,
        platform_user_id=f"u{n}",
        handle=f"handle{n}",
        name=f"Name {n}",
        active=True,
        status=CONNECTION_ACTIVE,
        created_at=T0,
    )


def a_key(secret: str, n: int = 1) -> ApiKey:
    return ApiKey(
        id=f"key_{n}",
        account_id="acc_1",
        name="ci",
        prefix=display_prefix(secret),
        scopes=("posts:read",),
        connection_id=None,
        kind=KEY_STANDARD,
        created_at=T0,
        lineage_id=f"key_{n}",
    )


def file_bytes(path: str) -> bytes:
    """The main file with its WAL and shared-memory files: recent commits may live in the WAL only."""
    return b"".join(p.read_bytes() for p in (Path(path), Path(path + "-wal"), Path(path + "-shm")) if p.exists())


def raw(path: str) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def sealed_session(path: str, connection_id: str = "con_1") -> bytes:
    """The session column of a connection as the file holds it."""
    with closing(raw(path)) as conn:
        sealed: bytes = conn.execute("SELECT session FROM connections WHERE id = ?", (connection_id,)).fetchone()[0]
    return sealed


def test_secrets_never_reach_the_file(store: SqliteKeyStore, db_path: str) -> None:
    api_secret = generate_secret()
    store.add_account(Account("acc_1", "ada@example.com", T0), "argon-hash")
    store.save_connection(a_connection(), PLATFORM_TOKEN)
    store.add_key(a_key(api_secret), hash_secret(api_secret))
    store.close()
    data = file_bytes(db_path)
    assert b"handle1" in data and hash_secret(api_secret).encode() in data  # reading the right bytes
    assert PLATFORM_TOKEN.encode() not in data
    assert api_secret.encode() not in data
    assert api_secret[4:].encode() not in data  # nor its random part without the cda_ prefix


def test_a_new_store_on_the_file_sees_the_data(store: SqliteKeyStore, db_path: str) -> None:
    store.add_account(Account("acc_1", "ada@example.com", T0), "argon-hash")
    store.save_connection(a_connection(), PLATFORM_TOKEN)
    store.close()
    again = SqliteKeyStore(db_path, SECRET)
    try:
        assert again.get_account("acc_1") == Account("acc_1", "ada@example.com", T0)
        assert again.get_connection("con_1") == a_connection()
        assert again.get_platform_session("con_1") == PLATFORM_TOKEN
    finally:
        again.close()


def test_another_secret_cannot_open_sessions(store: SqliteKeyStore, db_path: str) -> None:
    store.save_connection(a_connection(), PLATFORM_TOKEN)
    other = SqliteKeyStore(db_path, "another-secret")
    try:
        assert other.get_platform_session("con_1") is None
        # The rest stays readable; the connection reads as expired, as every call through it is answered
        # (409 connection_expired), so that the dashboard asks for it to be linked again.
        expired = attrs.evolve(a_connection(), status=CONNECTION_EXPIRED)
        assert other.get_connection("con_1") == expired
        assert other.list_connections("acc_1") == other.all_connections() == [expired]
        assert other.load_connection("acc_1", None) == other.load_connection("acc_1", "con_1") == (expired, None)
        # Read, never written: the right secret reads it active again.
        assert store.list_connections("acc_1") == [a_connection()]
        assert store.load_connection("acc_1", None) == (a_connection(), PLATFORM_TOKEN)
    finally:
        other.close()


def test_a_changed_secret_keeps_every_session_through_the_previous_one_and_reseal(
    store: SqliteKeyStore, db_path: str
) -> None:
    """The operator changes the secret (COMMUNITY_API_PREVIOUS_SECRET holds the old one): sessions sealed
    under the old secret still open, a session linked now is sealed under the new one, ``reseal_sessions``
    moves the others, and then the old secret can go without a connection linked again."""
    store.save_connection(a_connection(1), PLATFORM_TOKEN)
    store.save_connection(a_connection(2), "second-token")
    with closing(raw(db_path)) as conn:  # a session no secret opens (sealed under one lost long ago)
        conn.execute("UPDATE connections SET session = ? WHERE id = 'con_2'", (b"\x01" + os.urandom(40),))
    store.close()
    changing = SqliteKeyStore(db_path, "the-new-secret", previous_secret=SECRET)
    new_only = SqliteKeyStore(db_path, "the-new-secret")
    try:
        assert changing.get_platform_session("con_1") == PLATFORM_TOKEN
        assert [c.status for c in changing.all_connections()] == [CONNECTION_ACTIVE, CONNECTION_EXPIRED]
        assert [c.status for c in new_only.all_connections()] == [CONNECTION_EXPIRED] * 2  # con_1 not moved yet
        changing.save_connection(a_connection(3), "third-token")
        assert new_only.get_platform_session("con_1") is None  # not moved yet
        assert new_only.get_platform_session("con_3") == "third-token"  # sealed under the new secret
        first = changing.reseal_sessions()
        assert first.counts == {"resealed": 1, "current": 1, "lost": 1} and first.lost == ("con_2",)
        assert [new_only.get_platform_session(f"con_{n}") for n in (1, 2, 3)] == [PLATFORM_TOKEN, None, "third-token"]
        assert changing.reseal_sessions().counts == {"current": 2, "lost": 1}  # a second run moves nothing
        sealed = sealed_session(db_path)  # the old secret opens nothing any more
        assert SessionCipher(SECRET).open(sealed, "con_1") is None
        assert SessionCipher("the-new-secret").open(sealed, "con_1") == PLATFORM_TOKEN
    finally:
        changing.close()
        new_only.close()


def test_each_seal_has_a_nonce_of_its_own(store: SqliteKeyStore, db_path: str) -> None:
    """AES-GCM under one key must never reuse a nonce: two seals of the same token on the same row (a
    connection linked again) share no nonce, and so no ciphertext."""
    sealed = []
    for _ in range(2):
        store.save_connection(a_connection(1), PLATFORM_TOKEN)
        sealed.append(sealed_session(db_path))
    first, second = sealed
    assert first[:1] == second[:1] == b"\x01"  # the layout's version
    assert first[1:13] != second[1:13] and first[13:] != second[13:]
    assert store.get_platform_session("con_1") == PLATFORM_TOKEN


@pytest.mark.parametrize(
    "damage",
    [
        lambda sealed: b"\x02" + sealed[1:],  # a layout this version does not know: not read as its own
        lambda sealed: sealed[:1] + sealed[1:6],  # cut short, inside the nonce
        lambda sealed: sealed[:20],  # cut short, inside the ciphertext
        lambda sealed: b"",
    ],
    ids=["another layout", "short nonce", "short ciphertext", "empty"],
)
def test_a_session_that_is_not_a_seal_of_this_layout_does_not_open(
    store: SqliteKeyStore, db_path: str, damage: Any
) -> None:
    store.save_connection(a_connection(1), PLATFORM_TOKEN)
    damaged = damage(sealed_session(db_path))
    with closing(raw(db_path)) as conn:
        conn.execute("UPDATE connections SET session = ? WHERE id = 'con_1'", (damaged,))
    assert store.get_platform_session("con_1") is None
    assert store.get_connection("con_1") == attrs.evolve(a_connection(1), status=CONNECTION_EXPIRED)


def test_a_session_sealed_by_an_earlier_release_still_opens() -> None:
    """A seal made once (December 2026), under a known secret, and kept here: a change to the key's derivation
    (its salt, its info, its length) or to the layout would leave every stored session unopened after an
    upgrade, and every connection asking to be linked again, while a test that seals and opens with the same
    code would still pass."""
    sealed = bytes.fromhex(
        "015a1733246f0f612276f8b649108c156706bd3241637d62b27c134ce9e9a013bf5e77cdedaa7e3fb87f9db03c4c5bcb8f1096a2966628"
    )
    cipher = SessionCipher("a service secret of forty characters ok!")
    assert cipher.open(sealed, "con_01JABCDEF") == "platform-session-token-123"
    assert cipher.open(sealed, "con_01JABCDEG") is None


def test_a_sealed_session_moved_to_another_row_does_not_open(store: SqliteKeyStore, db_path: str) -> None:
    store.save_connection(a_connection(1), PLATFORM_TOKEN)
    store.save_connection(a_connection(2), "another-token")
    with closing(raw(db_path)) as conn:
        conn.execute("UPDATE connections SET session = (SELECT session FROM connections WHERE id = 'con_1')"
                     " WHERE id = 'con_2'")  # fmt: skip
    assert store.get_platform_session("con_2") is None
    assert store.get_platform_session("con_1") == PLATFORM_TOKEN


def test_connections_linked_before_version_8_keep_their_session_and_have_no_end_date(db_path: str) -> None:
    """Upgrading to version 8 (``session_expires_at``): the sealed sessions are not opened by the migration,
    so older connections work as before and say nothing of when their session ends."""
    old = SqliteKeyStore(db_path, SECRET)
    old.save_connection(a_connection(), PLATFORM_TOKEN)
    old.close()
    with closing(raw(db_path)) as conn:  # the file as version 7 left it
        conn.execute("ALTER TABLE connections DROP COLUMN session_expires_at")
        conn.execute("ALTER TABLE oauth_codes DROP COLUMN redirect_uri_sent")  # version 9's
        conn.execute("PRAGMA user_version = 7")
        conn.commit()
    upgraded = SqliteKeyStore(db_path, SECRET)
    try:
        assert upgraded.get_connection("con_1") == a_connection()
        assert upgraded.get_platform_session("con_1") == PLATFORM_TOKEN
        ends = T0 + timedelta(days=365)
        upgraded.save_connection(attrs.evolve(a_connection(), session_expires_at=ends), "relinked")
        assert upgraded.get_connection("con_1").session_expires_at == ends  # type: ignore[union-attr]
    finally:
        upgraded.close()
    with closing(raw(db_path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_accounts_kept_before_version_10_are_found_however_their_domain_is_written(db_path: str) -> None:
    """Upgrading to version 10: an account whose email's domain is outside ASCII was keyed by that text
    alone, so a browser's sign-in (which sends the IDNA form) never found it. Where an account of the IDNA
    form exists too (made from a browser), both are kept, and that one keeps the key."""
    with closing(raw(db_path)) as conn:  # the file as version 9 left it, keyed by the old rule (casefold)
        for step in MIGRATIONS[:9]:
            for statement in step:
                run_step(conn, statement)
        rows = [
            ("acc_1", "max@bücher.example"),
            ("acc_2", "eva@straße.example"),
            ("acc_3", "eva@xn--strae-oqa.example"),  # the same address, made from a browser
            ("acc_4", "ada@example.com"),
        ]
        for account_id, email in rows:
            conn.execute(
                "INSERT INTO accounts (id, email, email_key, password_hash, created_at) VALUES (?, ?, ?, ?, ?)",
                (account_id, email, email.casefold(), "hash", T0.isoformat(timespec="microseconds")),
            )
        conn.execute("PRAGMA user_version = 9")
    upgraded = SqliteKeyStore(db_path, SECRET)
    try:
        found = {email: upgraded.find_account_by_email(email) for email in (
            "max@xn--bcher-kva.example", "Max@Bücher.example", "eva@xn--strae-oqa.example", "ada@EXAMPLE.com"
        )}  # fmt: skip
        assert {email: f[0].id if f else None for email, f in found.items()} == {
            "max@xn--bcher-kva.example": "acc_1",
            "Max@Bücher.example": "acc_1",
            "eva@xn--strae-oqa.example": "acc_3",
            "ada@EXAMPLE.com": "acc_4",
        }
        assert upgraded.count_accounts() == 4
        # The operator names the other by its id (`accounts list` shows it): its address finds the browser's.
        assert delete_account_unchecked(upgraded, FakeClock(T0), "acc_2").email == "eva@straße.example"
        kept = upgraded.find_account_by_email("eva@straße.example")
        assert kept is not None and kept[0].id == "acc_3" and upgraded.count_accounts() == 3
    finally:
        upgraded.close()
    with closing(raw(db_path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_accounts_kept_before_version_11_are_found_however_their_local_part_is_written(db_path: str) -> None:
    """Upgrading to version 11: an account whose local part was typed with combining accents was keyed by
    that text, so a sign-in typing é as one character never found it. Where the other spelling has an
    account too, both are kept, and the one that holds the key keeps it."""
    with closing(raw(db_path)) as conn:  # the file as version 10 left it: local parts keyed as typed
        for step in MIGRATIONS[:10]:
            for statement in step:
                run_step(conn, statement)
        rows = [
            ("acc_1", "jose\u0301@example.com"),  # é as e and a combining accent
            ("acc_2", "zoe\u0308@example.com"),
            ("acc_3", "zo\u00eb@example.com"),  # the same address as acc_2, ë as one character
            ("acc_4", "ada@example.com"),
        ]
        for account_id, email in rows:
            conn.execute(
                "INSERT INTO accounts (id, email, email_key, password_hash, created_at) VALUES (?, ?, ?, ?, ?)",
                (account_id, email, email.casefold(), "hash", T0.isoformat(timespec="microseconds")),
            )
        conn.execute("PRAGMA user_version = 10")
    upgraded = SqliteKeyStore(db_path, SECRET)
    try:
        found = {email: upgraded.find_account_by_email(email) for email in (
            "jos\u00e9@example.com", "JOSE\u0301@example.com", "zoe\u0308@example.com", "ada@EXAMPLE.com"
        )}  # fmt: skip
        assert {email: f[0].id if f else None for email, f in found.items()} == {
            "jos\u00e9@example.com": "acc_1",
            "JOSE\u0301@example.com": "acc_1",
            "zoe\u0308@example.com": "acc_3",
            "ada@EXAMPLE.com": "acc_4",
        }
        assert upgraded.count_accounts() == 4 and upgraded.get_account("acc_2") is not None
    finally:
        upgraded.close()
    with closing(raw(db_path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 11


def test_empty_secret_and_memory_databases_are_refused(db_path: str) -> None:
    with pytest.raises(ValueError):
        SqliteKeyStore(db_path, "")
    with pytest.raises(ValueError):
        SqliteKeyStore(":memory:", SECRET)


def test_open_creates_folders_and_schema(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "keys.db"
    store = SqliteKeyStore.open(path, SECRET)
    assert path.exists()
    conn = raw(str(path))
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"accounts", "web_sessions", "connections", "keys", "usage", "audit", "idempotency"} <= tables
    finally:
        conn.close()
    assert store.count_accounts() == 0


def test_the_constructor_creates_folder_and_schema_at_first_use(tmp_path: Path) -> None:
    path = tmp_path / "var" / "keys.db"
    store = SqliteKeyStore(str(path), SECRET)
    assert not path.parent.exists()  # nothing happens before first use
    try:
        store.add_account(Account("acc_1", "ada@example.com", T0), "h")
        assert path.exists() and store.count_accounts() == 1
    finally:
        store.close()


@pytest.fixture
def common_umask() -> Iterator[None]:
    """The umask most shells give (files 0644), not whatever the test runner has."""
    before = os.umask(0o022)
    yield
    os.umask(before)


def test_a_new_file_and_its_wal_are_readable_by_their_owner_only(tmp_path: Path, common_umask: None) -> None:
    # The file holds password hashes and sealed platform sessions: no other local user reads it.
    path = tmp_path / "var" / "keys.db"
    store = SqliteKeyStore(str(path), SECRET)
    try:
        store.add_account(Account("acc_1", "ada@example.com", T0), "h")
        for name in ("keys.db", "keys.db-wal", "keys.db-shm"):
            assert stat.S_IMODE((path.parent / name).stat().st_mode) == 0o600, name
    finally:
        store.close()


def test_an_existing_file_keeps_the_mode_its_operator_gave_it(db_path: str, common_umask: None) -> None:
    made = SqliteKeyStore(db_path, SECRET)
    made.count_accounts()  # the file is made at first use
    made.close()
    os.chmod(db_path, 0o640)  # say, readable by a backup group
    store = SqliteKeyStore(db_path, SECRET)
    try:
        assert store.count_accounts() == 0
        assert stat.S_IMODE(os.stat(db_path).st_mode) == 0o640
    finally:
        store.close()


def test_a_newer_schema_is_refused(db_path: str) -> None:
    with closing(raw(db_path)) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(RuntimeError, match="schema version"):
        SqliteKeyStore(db_path, SECRET).count_accounts()


def test_another_programs_database_is_refused_and_left_as_it_is(db_path: str) -> None:
    """A mistyped COMMUNITY_API_DB: before, the key store's tables were added to it."""
    with closing(raw(db_path)) as conn:
        conn.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO photos (name) VALUES ('holiday')")
    held = Path(db_path).read_bytes()
    with pytest.raises(ForeignDatabase, match=r"a SQLite database of something else \(tables photos\)"):
        SqliteKeyStore.open(db_path, SECRET)
    assert Path(db_path).read_bytes() == held


def test_a_database_of_many_tables_is_refused_naming_five(db_path: str) -> None:
    with closing(raw(db_path)) as conn:
        for name in ("albums", "faces", "people", "photos", "places", "tags", "trips"):
            conn.execute(f"CREATE TABLE {name} (id INTEGER PRIMARY KEY)")
    with pytest.raises(ForeignDatabase, match=r"\(tables albums, faces, people, photos, places, …\): name the"):
        SqliteKeyStore.open(db_path, SECRET)


def test_the_services_own_database_with_a_table_the_operator_added_still_opens(db_path: str) -> None:
    """Only a file the service never made is judged by its tables: an operator's report table in the
    service's own database (schema version set) does not lock the service out of it."""
    SqliteKeyStore.open(db_path, SECRET).close()
    with closing(raw(db_path)) as conn:
        conn.execute("CREATE TABLE weekly_report (week TEXT)")
    store = SqliteKeyStore.open(db_path, SECRET)
    assert store.count_accounts() == 0
    store.close()


def test_a_deleted_accounts_rows_leave_nothing_readable_in_the_file(db_path: str) -> None:
    """Freed pages are zeroed (``secure_delete``): the email of an account deleted is not in the file."""
    store = SqliteKeyStore.open(db_path, SECRET)
    store.add_account(Account("acc_9", "forget-me-7c1f@example.com", T0), "argon-hash")
    store.add_account(Account("acc_8", "stays@example.com", T0), "argon-hash")
    delete_account_unchecked(store, FakeClock(T0), "acc_9")
    store.close()
    with closing(raw(db_path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert b"forget-me-7c1f" not in Path(db_path).read_bytes()
    assert b"stays@example.com" in Path(db_path).read_bytes()


def test_a_file_with_the_sqlite_throttles_tables_is_taken(db_path: str) -> None:
    """``THROTTLE_STORAGE=sqlite://`` may name the service's database, and may have made its tables first."""
    with closing(raw(db_path)) as conn:
        conn.execute("CREATE TABLE throttle_counters (key TEXT PRIMARY KEY)")
    store = SqliteKeyStore.open(db_path, SECRET)
    try:
        assert store.count_accounts() == 0
    finally:
        store.close()


def test_hot_path_look_ups_use_indexes(store: SqliteKeyStore, db_path: str) -> None:
    store.count_accounts()  # creates the schema
    conn = raw(db_path)
    try:
        for sql in (
            "SELECT * FROM keys WHERE prefix = 'x'",
            "SELECT * FROM connections WHERE id = 'x'",
            "SELECT * FROM connections WHERE account_id = 'x'",
            "SELECT * FROM keys WHERE account_id = 'x'",
            "SELECT count(*) FROM audit WHERE event = 'e' AND subject = 's' AND at >= 't'",
            "SELECT * FROM idempotency WHERE key = 'x'",
        ):
            plan = " ".join(str(row[-1]) for row in conn.execute("EXPLAIN QUERY PLAN " + sql))
            assert "USING" in plan and not plan.startswith("SCAN"), (sql, plan)
    finally:
        conn.close()


def test_timestamps_are_iso_8601_utc_text(store: SqliteKeyStore, db_path: str) -> None:
    paris = T0.astimezone(ZoneInfo("Europe/Paris"))
    store.add_account(Account("acc_1", "ada@example.com", paris), "h")
    with closing(raw(db_path)) as conn:
        assert conn.execute("SELECT created_at FROM accounts").fetchone()[0] == "2026-11-01T12:00:00.654321+00:00"
    found = store.get_account("acc_1")
    assert found is not None and found.created_at == T0 and found.created_at.utcoffset() == timedelta(0)
    with pytest.raises(ValueError):
        store.add_audit(AuditEvent(at=datetime(2026, 11, 1), event="naive"))


def test_the_audit_table_refuses_updates_and_deletes(store: SqliteKeyStore, db_path: str) -> None:
    store.add_audit(AuditEvent(at=T0, event="key.minted", account_id="acc_1"))
    conn = raw(db_path)
    try:
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute("UPDATE audit SET event = 'forged'")
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute("DELETE FROM audit")
    finally:
        conn.close()
    assert len(store.list_audit("acc_1")) == 1
    # Its methods write a line or read lines; none changes or removes one.
    assert not [n for n in dir(store) if "audit" in n and n not in {"add_audit", "list_audit", "recent_audit"}]


def test_threads_get_their_own_connections_and_exact_counts(store: SqliteKeyStore) -> None:
    def work() -> None:
        for _ in range(100):
            store.add_usage({("key_1", "2026-11-01"): 1}, {})

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.key_usage("key_1", "2026-11-01").requests_total == 800


# --- several processes ---------------------------------------------------------------------------


def _claim_in_process(path: str, barrier: Barrier, results: Queue[tuple[int, bool]], n: int) -> None:
    store = SqliteKeyStore(path, SECRET)  # a fresh file: the schema is created by whoever comes first
    barrier.wait()
    record = IdempotencyRecord(key="same-key", fingerprint=f"fp{n}", status=0, body="", created_at=T0)
    results.put((n, store.claim_idempotency(record) is None))
    store.close()


def _add_usage_in_process(store: SqliteKeyStore, barrier: Barrier, n: int) -> None:
    barrier.wait()
    for i in range(200):
        store.add_usage({("key_1", "2026-11-01"): 1}, {"key_1": T0 + timedelta(seconds=n * 1000 + i)})


def _run(processes: list[multiprocessing.process.BaseProcess]) -> None:
    for p in processes:
        p.start()
    for p in processes:
        p.join(timeout=60)
    assert [p.exitcode for p in processes] == [0] * len(processes)


@pytest.mark.slow
def test_of_eight_processes_claiming_one_key_exactly_one_wins(db_path: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(8)
    results: Queue[tuple[int, bool]] = ctx.Queue()
    _run([ctx.Process(target=_claim_in_process, args=(db_path, barrier, results, n)) for n in range(8)])
    outcome = dict(results.get(timeout=10) for _ in range(8))
    winners = [n for n, won in outcome.items() if won]
    assert len(winners) == 1
    store = SqliteKeyStore(db_path, SECRET)
    try:
        existing = store.claim_idempotency(
            IdempotencyRecord(key="same-key", fingerprint="late", status=0, body="", created_at=T0)
        )
        assert existing is not None and existing.fingerprint == f"fp{winners[0]}"
    finally:
        store.close()


@pytest.mark.slow
def test_eight_forked_processes_count_usage_exactly(store: SqliteKeyStore) -> None:
    secret = generate_secret()
    store.add_key(a_key(secret), hash_secret(secret))  # the parent has a connection before forking
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(8)
    _run([ctx.Process(target=_add_usage_in_process, args=(store, barrier, n)) for n in range(8)])
    usage = store.key_usage("key_1", "2026-11-01")
    assert (usage.requests_today, usage.requests_this_month, usage.requests_total) == (1600, 1600, 1600)
    found = store.get_key("key_1")
    assert found is not None and found.last_used_at == T0 + timedelta(seconds=7 * 1000 + 199)


def test_the_read_cache_never_outlives_a_change(tmp_path: Path) -> None:
    """Two stores on one file stand for two worker processes: a revocation or a re-link written through
    one is seen by the very next look-up through the other, and by the writer itself."""

    worker_a, worker_b, key = two_workers(tmp_path / "shared.sqlite3")
    t0 = WORKERS_T0
    assert worker_b.find_keys_by_prefix("ABCDEFGH")[0][0].revoked_at is None  # cached in b now
    worker_a.end_key(key.id, revoked_at=t0)
    assert worker_b.find_keys_by_prefix("ABCDEFGH")[0][0].revoked_at == t0
    worker_b.end_key(key.id, revoked_at=t0, expires_at=t0)
    assert worker_b.find_keys_by_prefix("ABCDEFGH")[0][0].expires_at == t0  # its own write
    connection = Connection(
        id="con_1", account_id="acc_1", platform_user_id="u1", handle="h", name="n",
        active=True, status="active", created_at=t0,
    )  # fmt: skip
    worker_a.save_connection(connection, "old-session")
    assert worker_b.load_connection("acc_1", None) == (connection, "old-session")
    worker_a.save_connection(connection, "new-session")
    worker_a.set_connection_status("con_1", "expired")
    loaded = worker_b.load_connection("acc_1", None)
    assert loaded is not None and loaded[1] == "new-session" and loaded[0].status == "expired"


def test_one_check_blocks_never_outlive_a_change(tmp_path: Path) -> None:
    """``one_check()`` (the look-ups of one request) asks for the file's version once: a change another
    worker commits during the block is seen by the first look-up after it; the block's own writes are
    seen inside it; blocks nest."""

    worker_a, worker_b, key = two_workers(tmp_path / "shared.sqlite3")
    t0 = WORKERS_T0
    with worker_b.one_check():
        assert worker_b.find_keys_by_prefix("ABCDEFGH")[0][0].revoked_at is None
        worker_a.end_key(key.id, revoked_at=t0)  # another worker, during the request
        with worker_b.one_check():
            worker_b.find_keys_by_prefix("ABCDEFGH")  # as of the block's start, or newer: either is fine
    assert worker_b.find_keys_by_prefix("ABCDEFGH")[0][0].revoked_at == t0  # the next request sees it

    with worker_b.one_check():
        assert worker_b.load_connection("acc_1", None) is None
        worker_b.end_key(key.id, revoked_at=t0, expires_at=t0)  # its own write
        assert worker_b.find_keys_by_prefix("ABCDEFGH")[0][0].expires_at == t0
        worker_a.save_connection(
            Connection(id="con_1", account_id="acc_1", platform_user_id="u1", handle="h", name="n",
                       active=True, status="active", created_at=t0),
            "session",
        )  # fmt: skip
    loaded = worker_b.load_connection("acc_1", None)
    assert loaded is not None and loaded[1] == "session"


def test_a_unit_of_work_rolled_back_leaves_nothing_in_the_read_cache(store: SqliteKeyStore) -> None:
    """Inside a unit of work the cache is not used: a key read there and then rolled back would stay in it
    (a rollback does not undo the connection's count of changes, which the cache's stamp reads)."""
    secret = generate_secret()
    store.add_account(Account("acc_1", "ada@example.com", T0), "argon-hash")
    with pytest.raises(RuntimeError), store.unit_of_work():
        store.add_key(a_key(secret), hash_secret(secret))
        assert [key.id for key, _ in store.find_keys_by_prefix(display_prefix(secret))] == ["key_1"]
        raise RuntimeError("the step fails after its read")
    assert store.get_key("key_1") is None
    assert store.find_keys_by_prefix(display_prefix(secret)) == []


def test_a_unit_of_work_inside_another_joins_it_to_its_end(store: SqliteKeyStore) -> None:
    """After an inner block closes, the outer one is still one transaction: a write that takes the write
    lock of its own (``_immediate``) joins it, and a failure after it undoes both."""
    account = Account("acc_1", "ada@example.com", T0)
    session = WebSession("hash-1", "acc_1", "csrf", T0, T0 + timedelta(days=1))
    with pytest.raises(RuntimeError), store.unit_of_work():
        with store.unit_of_work():
            store.add_account(account, "argon-hash")
        store.add_web_session(session)
        assert store.get_web_session("hash-1") == session
        raise RuntimeError("the step fails at its end")
    assert store.get_account("acc_1") is None and store.get_web_session("hash-1") is None


def test_one_check_is_per_thread(tmp_path: Path) -> None:
    """A block on one thread does not hold back the look-ups of another thread's requests."""

    writer, store, key = two_workers(tmp_path / "shared.sqlite3")
    t0 = WORKERS_T0
    seen: list[datetime | None] = []

    def other_request() -> None:
        seen.append(store.find_keys_by_prefix("ABCDEFGH")[0][0].revoked_at)

    with store.one_check():
        store.find_keys_by_prefix("ABCDEFGH")
        writer.end_key(key.id, revoked_at=t0)
        thread = threading.Thread(target=other_request)
        thread.start()
        thread.join()
    assert seen == [t0]


def test_ready_commits_a_write_and_names_why_it_cannot(tmp_path: Path) -> None:
    """``GET /readyz``'s database check: a committed write, or SQLite's own reason (here: the write lock
    held elsewhere past the busy timeout)."""
    path = tmp_path / "ready.sqlite3"
    store = SqliteKeyStore(path, "s" * 40, busy_timeout_ms=200)
    assert store.ready() is None
    with sqlite3.connect(path) as other:
        assert other.execute("SELECT count(*) FROM health_checks").fetchone() == (1,)
    time.sleep(READY_VOUCH_SECONDS)  # past what the success vouches for
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        assert store.ready() == "the database does not take a write: database is locked"
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert store.ready() is None


def test_a_flood_of_readiness_checks_writes_once_a_second(tmp_path: Path) -> None:
    """``GET /readyz`` is open to anyone: a write per probe let a flood hold the write lock and make every
    worker's read cache read afresh. A success vouches for a second."""
    path = tmp_path / "ready.sqlite3"
    store = SqliteKeyStore(path, "s" * 40)

    def checked_at() -> str:
        with closing(sqlite3.connect(path)) as other:
            return str(other.execute("SELECT checked_at FROM health_checks").fetchone()[0])

    assert store.ready() is None
    first = checked_at()
    for _ in range(200):
        assert store.ready() is None
    assert checked_at() == first
    time.sleep(READY_VOUCH_SECONDS)
    assert store.ready() is None and checked_at() > first


def test_codes_a_day_past_their_expiry_are_deleted_as_new_ones_are_issued(store: SqliteKeyStore, db_path: str) -> None:
    """Nothing else would: each grant leaves its code's row behind (tests/contract keeps one known for a day)."""
    from tests.contract.test_key_store_oauth import code

    store.add_authorization_code(code(1))
    store.add_authorization_code(
        code(2, created_at=T0 + timedelta(days=2), expires_at=T0 + timedelta(days=2, minutes=10))
    )
    assert store.use_authorization_code(code(1).code_hash, T0 + timedelta(days=2)) is None
    with closing(sqlite3.connect(db_path)) as other:
        assert other.execute("SELECT count(*) FROM oauth_codes").fetchone()[0] == 1
