"""The OAuth part of the ``KeyStore`` contract (clients, codes, tokens), against the fake and SQLite alike.
Beside ``test_key_store.py`` (whose ``store`` fixture it uses), to keep each module readable."""

from __future__ import annotations

import sqlite3
import threading
from datetime import timedelta
from pathlib import Path

import attrs
import pytest

from adapters.store.sqlite_key_store import SqliteKeyStore
from adapters.store.sqlite_schema import MIGRATIONS, SCHEMA_VERSION, run_step
from community_api.errors import Conflict
from community_api.oauth_model import TOKEN_ACCESS, TOKEN_REFRESH, AuthorizationCode, OAuthClient, OAuthToken
from community_api.ports import KeyStore
from tests.contract.test_key_store import T0, store  # noqa: F401 - the parametrised fixture

CLIENT = OAuthClient(
    id="ocl_1", name="Claude", redirect_uris=("https://b.example/cb", "http://127.0.0.1:9/cb"), created_at=T0
)


def code(n: int = 1, **changes: object) -> AuthorizationCode:
    record = AuthorizationCode(
        code_hash=f"{n:064x}",
        client_id="ocl_1",
        account_id="acc_1",
        redirect_uri="https://b.example/cb",
        code_challenge="c" * 43,
        resource="https://api.example/v1/mcp",
        scopes=("groups:read", "posts:write"),
        connection_id="con_1",
        created_at=T0,
        expires_at=T0 + timedelta(minutes=10),
    )
    return attrs.evolve(record, **changes)  # type: ignore[arg-type]


def token(n: int, kind: str = TOKEN_ACCESS, key_id: str = "key_1", **changes: object) -> OAuthToken:
    record = OAuthToken(
        token_hash=f"{n:064x}",
        kind=kind,
        key_id=key_id,
        client_id="ocl_1",
        resource="https://api.example/v1/mcp",
        created_at=T0,
        expires_at=T0 + timedelta(hours=1),
    )
    return attrs.evolve(record, **changes)  # type: ignore[arg-type]


def test_client_round_trip_keeps_redirect_uri_order(store: KeyStore) -> None:  # noqa: F811
    store.add_oauth_client(CLIENT)
    assert store.get_oauth_client("ocl_1") == CLIENT
    with pytest.raises(Conflict):
        store.add_oauth_client(CLIENT)


def test_code_round_trip_and_single_use(store: KeyStore) -> None:  # noqa: F811
    store.add_authorization_code(code())
    later = T0 + timedelta(seconds=5)
    first = store.use_authorization_code(code().code_hash, later)
    assert first == code()  # as it was before: unused
    second = store.use_authorization_code(code().code_hash, later + timedelta(seconds=1))
    assert second == code(used_at=later)  # the first use is kept, not moved
    third = store.use_authorization_code(code().code_hash, later + timedelta(seconds=2))
    assert third == code(used_at=later)  # nor by the second
    with pytest.raises(Conflict):
        store.add_authorization_code(code())


def test_a_used_code_past_its_expiry_is_still_known_for_a_day(store: KeyStore) -> None:  # noqa: F811
    """Its replay must still be told from a code never issued (the replay revokes what the code gave), while
    new codes are issued: the store forgets a code only a day after it expired."""
    store.add_authorization_code(code(1))
    store.use_authorization_code(code(1).code_hash, T0 + timedelta(minutes=1))
    store.add_authorization_code(code(2, created_at=T0 + timedelta(hours=23), expires_at=T0 + timedelta(hours=24)))
    replay = store.use_authorization_code(code(1).code_hash, T0 + timedelta(hours=23))
    assert replay == code(1, used_at=T0 + timedelta(minutes=1))


def test_code_remembers_whether_its_request_named_the_redirect_uri(store: KeyStore) -> None:  # noqa: F811
    store.add_authorization_code(code(1, redirect_uri_sent=False))
    store.add_authorization_code(code(2))
    assert store.use_authorization_code(code(1).code_hash, T0) == code(1, redirect_uri_sent=False)
    assert store.use_authorization_code(code(2).code_hash, T0) == code(2, redirect_uri_sent=True)


def test_codes_issued_before_version_9_still_need_their_redirect_uri_repeated(tmp_path: Path) -> None:
    """Upgrading from version 8, a code issued under the old rule (the token request repeats the URI)
    keeps it."""
    path = tmp_path / "v8.sqlite3"
    with sqlite3.connect(path) as conn:
        for step in MIGRATIONS[:8]:
            for statement in step:
                run_step(conn, statement)
        old = code()
        conn.execute(
            "INSERT INTO oauth_codes (code_hash, client_id, account_id, redirect_uri, code_challenge, resource,"
            " scopes, connection_id, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                old.code_hash, old.client_id, old.account_id, old.redirect_uri, old.code_challenge, old.resource,
                " ".join(old.scopes), old.connection_id, T0.isoformat(timespec="microseconds"),
                old.expires_at.isoformat(timespec="microseconds"),
            ),
        )  # fmt: skip
        conn.execute("PRAGMA user_version = 8")
    conn.close()
    migrated = SqliteKeyStore(str(path), secret="contract-test-secret")
    try:
        found = migrated.use_authorization_code(old.code_hash, T0)
        assert found == old and found.redirect_uri_sent  # the column's default: the old rule
    finally:
        migrated.close()


def test_code_remembers_the_grant_it_created(store: KeyStore) -> None:  # noqa: F811
    store.add_authorization_code(code(connection_id=None))
    store.use_authorization_code(code().code_hash, T0)
    store.set_authorization_code_key(code().code_hash, "key_9")
    again = store.use_authorization_code(code().code_hash, T0 + timedelta(seconds=1))
    assert again is not None and again.key_id == "key_9" and again.connection_id is None
    store.set_authorization_code_key("f" * 64, "key_9")  # unknown: not an error


def test_concurrent_code_redemptions_one_wins(store: KeyStore) -> None:  # noqa: F811
    store.add_authorization_code(code())
    winners: list[bool] = []
    barrier = threading.Barrier(8)

    def redeem() -> None:
        barrier.wait()
        found = store.use_authorization_code(code().code_hash, T0)
        winners.append(found is not None and found.used_at is None)

    threads = [threading.Thread(target=redeem) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(winners) == [False] * 7 + [True]


def test_token_round_trip_and_rotation_use(store: KeyStore) -> None:  # noqa: F811
    store.add_oauth_token(token(1))
    store.add_oauth_token(token(2, TOKEN_REFRESH, expires_at=T0 + timedelta(days=30)))
    assert store.get_oauth_token(token(1).token_hash) == token(1)
    later = T0 + timedelta(minutes=1)
    assert store.use_oauth_token(token(2).token_hash, later) == token(
        2, TOKEN_REFRESH, expires_at=T0 + timedelta(days=30)
    )
    replay = store.use_oauth_token(token(2).token_hash, later + timedelta(minutes=1))
    assert replay is not None and replay.used_at == later
    again = store.use_oauth_token(token(2).token_hash, later + timedelta(minutes=2))
    assert again is not None and again.used_at == later  # a replay never moves the first use
    with pytest.raises(Conflict):
        store.add_oauth_token(token(1))


def test_delete_tokens_of_one_grant_only(store: KeyStore) -> None:  # noqa: F811
    store.add_oauth_token(token(1))
    store.add_oauth_token(token(2, TOKEN_REFRESH))
    store.add_oauth_token(token(3, key_id="key_2"))
    store.delete_oauth_tokens("key_1")
    assert store.get_oauth_token(token(1).token_hash) is None
    assert store.get_oauth_token(token(2).token_hash) is None
    assert store.get_oauth_token(token(3).token_hash) == token(3, key_id="key_2")
    store.delete_oauth_tokens("key_404")  # not an error


def test_tokens_that_cannot_be_accepted_again_may_be_forgotten(store: KeyStore) -> None:  # noqa: F811
    store.add_oauth_token(token(1))  # expires T0 + 1 h
    store.add_oauth_token(token(2, key_id="key_2"))
    store.add_oauth_token(token(3, created_at=T0 + timedelta(hours=2), expires_at=T0 + timedelta(hours=3)))
    assert store.get_oauth_token(token(1).token_hash) is None  # past expiry, same grant
    assert store.get_oauth_token(token(2).token_hash) is not None  # another grant is left alone


def test_unknown_oauth_records_answer_none(store: KeyStore) -> None:  # noqa: F811
    assert store.get_oauth_client("ocl_404") is None
    assert store.use_authorization_code("0" * 64, T0) is None
    assert store.get_oauth_token("0" * 64) is None
    assert store.use_oauth_token("0" * 64, T0) is None


def test_a_version_1_file_is_migrated_with_its_records_kept(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite3"
    with sqlite3.connect(path) as conn:
        for statement in MIGRATIONS[0]:
            run_step(conn, statement)
        conn.execute(
            "INSERT INTO accounts (id, email, email_key, password_hash, created_at) VALUES (?, ?, ?, ?, ?)",
            ("acc_1", "a@example.com", "a@example.com", "hash", T0.isoformat(timespec="microseconds")),
        )
        conn.execute("PRAGMA user_version = 1")
    conn.close()
    migrated = SqliteKeyStore(str(path), secret="contract-test-secret")
    try:
        assert migrated.get_account("acc_1") is not None
        migrated.add_oauth_client(CLIENT)
        assert migrated.get_oauth_client("ocl_1") == CLIENT
    finally:
        migrated.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()


def test_clients_nobody_approved_are_counted_and_forgotten_approved_ones_kept(store: KeyStore) -> None:  # noqa: F811
    day = timedelta(days=1)
    for n, registered in enumerate((T0, T0 + timedelta(hours=1), T0 + day)):
        store.add_oauth_client(attrs.evolve(CLIENT, id=f"ocl_{n}", created_at=registered))
    assert store.count_unapproved_oauth_clients() == 3
    store.approve_oauth_client("ocl_0", T0 + timedelta(minutes=5))
    store.approve_oauth_client("ocl_0", T0 + timedelta(hours=5))  # the first approval stays
    store.approve_oauth_client("ocl_unknown", T0)  # no-op
    approved = store.get_oauth_client("ocl_0")
    assert approved is not None and approved.approved_at == T0 + timedelta(minutes=5)
    assert store.count_unapproved_oauth_clients() == 2
    # Registered before T0 + 1 day and never approved: only ocl_1.
    assert store.forget_unapproved_oauth_clients(T0 + day) == 1
    assert store.get_oauth_client("ocl_1") is None
    assert store.get_oauth_client("ocl_0") == approved  # approved: kept however old
    assert store.get_oauth_client("ocl_2") is not None  # registered exactly at the bound: kept
    assert store.count_unapproved_oauth_clients() == 1
    assert store.forget_unapproved_oauth_clients(T0 + 10 * day) == 1
    assert store.get_oauth_client("ocl_0") == approved


def test_clients_registered_before_approvals_were_kept_count_as_approved(tmp_path: Path) -> None:
    """Upgrading from version 5: no client in use is forgotten for want of an approval time."""
    path = tmp_path / "v5.sqlite3"
    with sqlite3.connect(path) as conn:
        for step in MIGRATIONS[:5]:
            for statement in step:
                run_step(conn, statement)
        conn.execute(
            "INSERT INTO oauth_clients (id, name, redirect_uris, created_at) VALUES (?, ?, ?, ?)",
            ("ocl_old", "Old", '["https://b.example/cb"]', T0.isoformat(timespec="microseconds")),
        )
        conn.execute("PRAGMA user_version = 5")
    conn.close()
    migrated = SqliteKeyStore(str(path), secret="contract-test-secret")
    try:
        old = migrated.get_oauth_client("ocl_old")
        assert old is not None and old.approved_at == T0
        assert migrated.count_unapproved_oauth_clients() == 0
        assert migrated.forget_unapproved_oauth_clients(T0 + timedelta(days=400)) == 0
    finally:
        migrated.close()
