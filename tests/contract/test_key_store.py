"""The ``KeyStore`` contract (``community_api/ports.py``), run against the in-memory fake and the SQLite
store alike, so that unit tests written against the fake hold for production."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import attrs
import pytest

from adapters.store.sqlite_key_store import SqliteKeyStore
from community_api.errors import Conflict
from community_api.model import (
    CONNECTION_ACTIVE,
    CONNECTION_EXPIRED,
    KEY_CONNECTOR,
    KEY_STANDARD,
    Account,
    ApiKey,
    AuditEvent,
    Connection,
    IdempotencyRecord,
    KeyUsage,
    WebSession,
)
from community_api.ports import KeyStore
from community_api.store_ports import ATTEMPT_RETENTION, MAX_WEB_SESSIONS
from fakes.key_store import FakeKeyStore

# Microseconds on purpose: they must survive the round trip.
T0 = datetime(2026, 11, 1, 12, 0, 0, 123456, tzinfo=UTC)


@pytest.fixture(params=["fake", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KeyStore]:
    if request.param == "fake":
        yield FakeKeyStore()
        return
    real = SqliteKeyStore(str(tmp_path / "store.db"), secret="contract-test-secret")
    yield real
    real.close()


def account(n: int = 1, email: str | None = None, at: datetime = T0) -> Account:
    return Account(id=f"acc_{n}", email=email or f"user{n}@example.com", created_at=at)


def connection(
    n: int,
    account_id: str = "acc_1",
    platform_user_id: str | None = None,
    *,
    active: bool = False,
    at: datetime = T0,
    handle: str | None = None,
    status: str = CONNECTION_ACTIVE,
) -> Connection:
    return Connection(
        id=f"con_{n}",
        account_id=account_id,
        platform_user_id=platform_user_id or f"u{n}",
        handle=handle or f"handle{n}",
        name=f"Name {n}",
        active=active,
        status=status,
        created_at=at,
    )


def key(n: int, account_id: str = "acc_1", prefix: str | None = None, at: datetime = T0) -> ApiKey:
    return ApiKey(
        id=f"key_{n}",
        account_id=account_id,
        name=f"key {n}",
        prefix=prefix or f"pre{n:05d}",
        scopes=("posts:read", "groups:read", "dms:write"),
        connection_id=None,
        kind=KEY_STANDARD,
        created_at=at,
        lineage_id=f"key_{n}",
    )


def claim(key_name: str, at: datetime, fingerprint: str = "fp1") -> IdempotencyRecord:
    return IdempotencyRecord(key=key_name, fingerprint=fingerprint, status=0, body="", created_at=at)


# --- accounts ------------------------------------------------------------------------------------


def test_account_round_trip_and_count(store: KeyStore) -> None:
    assert store.count_accounts() == 0
    store.add_account(account(1), "hash-1")
    store.add_account(account(2), "hash-2")
    assert store.get_account("acc_1") == account(1)
    assert store.count_accounts() == 2


def test_accounts_are_listed_oldest_first(store: KeyStore) -> None:
    assert store.list_accounts() == []
    store.add_account(account(2), "hash-2")
    store.add_account(account(1), "hash-1")
    later = attrs.evolve(account(3), created_at=account(3).created_at + timedelta(seconds=5))
    store.add_account(later, "hash-3")
    listed = store.list_accounts()
    assert listed[-1] == later and sorted(a.id for a in listed[:2]) == ["acc_1", "acc_2"]


def test_find_account_by_email_ignores_case(store: KeyStore) -> None:
    store.add_account(account(1, email="Ada@Example.com"), "argon-hash")
    assert store.find_account_by_email("ada@example.COM") == (account(1, email="Ada@Example.com"), "argon-hash")
    assert store.find_account_by_email("bob@example.com") is None


def test_an_email_is_found_however_its_domain_is_written(store: KeyStore) -> None:
    """A browser sends a domain outside ASCII in its IDNA form; the command line and the API take it as
    typed. Both are one account."""
    store.add_account(account(1, email="max@bücher.example"), "h")
    for written in (
        "max@bücher.example",
        "MAX@BÜCHER.EXAMPLE",
        "max@xn--bcher-kva.example",
        " max@XN--BCHER-KVA.example",
    ):
        found = store.find_account_by_email(written)
        assert found is not None and found[0].id == "acc_1", written
    with pytest.raises(Conflict):
        store.add_account(account(2, email="max@xn--bcher-kva.example"), "h2")
    assert store.count_accounts() == 1


def test_email_taken_in_another_case_is_a_conflict(store: KeyStore) -> None:
    store.add_account(account(1, email="ada@example.com"), "h")
    with pytest.raises(Conflict):
        store.add_account(account(2, email="ADA@example.com"), "h2")
    assert store.count_accounts() == 1
    found = store.find_account_by_email("ada@example.com")
    assert found is not None and found[0].id == "acc_1"


def test_account_id_taken_is_a_conflict(store: KeyStore) -> None:
    store.add_account(account(1), "h")
    with pytest.raises(Conflict):
        store.add_account(account(1, email="other@example.com"), "h")


# --- web sessions --------------------------------------------------------------------------------


def test_web_session_add_get_delete(store: KeyStore) -> None:
    session = WebSession("th1", "acc_1", "csrf1", T0, T0 + timedelta(days=14))
    store.add_web_session(session)
    assert store.get_web_session("th1") == session
    with pytest.raises(Conflict):
        store.add_web_session(session)
    store.delete_web_session("th1")
    assert store.get_web_session("th1") is None
    store.delete_web_session("th1")  # deleting twice is not an error


def test_every_web_session_of_an_account_ends_but_the_one_kept(store: KeyStore) -> None:
    for token, account_id in (("th1", "acc_1"), ("th2", "acc_1"), ("th3", "acc_1"), ("other", "acc_2")):
        store.add_web_session(WebSession(token, account_id, "csrf", T0, T0 + timedelta(days=14)))
    store.delete_web_sessions("acc_1", keep="th2")
    assert [store.get_web_session(t) is not None for t in ("th1", "th2", "th3", "other")] == [False, True, False, True]
    store.delete_web_sessions("acc_1")
    assert store.get_web_session("th2") is None and store.get_web_session("other") is not None


def test_expired_web_sessions_are_removed_when_one_is_added(store: KeyStore) -> None:
    store.add_web_session(WebSession("old", "acc_1", "csrf", T0, T0 + timedelta(days=14)))
    store.add_web_session(WebSession("other", "acc_2", "csrf", T0 + timedelta(days=1), T0 + timedelta(days=15)))
    later = T0 + timedelta(days=14, seconds=1)
    store.add_web_session(WebSession("new", "acc_3", "csrf", later, later + timedelta(days=14)))
    assert store.get_web_session("old") is None  # expired: removed
    assert store.get_web_session("other") is not None and store.get_web_session("new") is not None


def test_an_account_keeps_its_newest_web_sessions_only(store: KeyStore) -> None:
    """A script that signs in on every run would otherwise leave a session a run, each for 14 days."""
    for n in range(MAX_WEB_SESSIONS + 2):
        at = T0 + timedelta(minutes=n)
        store.add_web_session(WebSession(f"th{n:03d}", "acc_1", "csrf", at, at + timedelta(days=14)))
    store.add_web_session(WebSession("other", "acc_2", "csrf", T0, T0 + timedelta(days=14)))
    assert store.get_web_session("th000") is None and store.get_web_session("th001") is None  # the oldest ended
    kept = [n for n in range(MAX_WEB_SESSIONS + 2) if store.get_web_session(f"th{n:03d}") is not None]
    assert kept == list(range(2, MAX_WEB_SESSIONS + 2))
    assert store.get_web_session("other") is not None  # another account's are its own


def test_a_password_hash_is_replaced(store: KeyStore) -> None:
    store.add_account(account(1), "old-hash")
    store.set_password_hash("acc_1", "new-hash")
    assert store.find_account_by_email("user1@example.com") == (account(1), "new-hash")
    store.set_password_hash("acc_404", "x")  # unknown: nothing happens


def test_a_deleted_account_is_gone_with_its_sessions_and_its_email_is_free(store: KeyStore) -> None:
    store.add_account(account(1), "hash")
    store.add_account(account(2), "hash")
    store.add_web_session(WebSession("th1", "acc_1", "csrf", T0, T0 + timedelta(days=14)))
    store.add_web_session(WebSession("th2", "acc_2", "csrf", T0, T0 + timedelta(days=14)))
    store.delete_account("acc_1")
    assert store.get_account("acc_1") is None and store.find_account_by_email("user1@example.com") is None
    assert store.get_web_session("th1") is None and store.get_web_session("th2") is not None
    store.add_account(account(3, email="USER1@example.com"), "hash")  # the email signs up afresh
    assert store.count_accounts() == 2
    store.delete_account("acc_404")


# --- connections ---------------------------------------------------------------------------------


def test_connection_round_trip_with_platform_session(store: KeyStore) -> None:
    saved = store.save_connection(connection(1, active=True), "session-token-1")
    assert saved == connection(1, active=True)
    assert store.get_connection("con_1") == saved
    assert store.get_platform_session("con_1") == "session-token-1"


def test_linking_the_same_platform_user_refreshes_in_place(store: KeyStore) -> None:
    first = store.save_connection(connection(1, platform_user_id="u7", active=True), "old-token")
    store.set_connection_status("con_1", CONNECTION_EXPIRED)
    again = connection(2, platform_user_id="u7", at=T0 + timedelta(hours=3), handle="renamed", active=False)
    stored = store.save_connection(again, "new-token")
    assert stored.id == first.id and stored.created_at == first.created_at
    assert (stored.handle, stored.name, stored.status) == ("renamed", "Name 2", CONNECTION_ACTIVE)
    assert stored.active is True  # refreshing does not change which connection is active
    assert store.list_connections("acc_1") == [stored]
    assert store.get_connection("con_2") is None
    assert store.get_platform_session("con_1") == "new-token"


def test_a_connection_keeps_when_its_platform_session_ends_and_a_new_link_replaces_it(store: KeyStore) -> None:
    ends = T0 + timedelta(days=365, microseconds=7)
    saved = store.save_connection(attrs.evolve(connection(1, active=True), session_expires_at=ends), "t1")
    assert saved.session_expires_at == ends
    assert store.get_connection("con_1") == saved
    found = store.load_connection("acc_1", None)
    assert found is not None and found[0].session_expires_at == ends
    # Linked again with a token that does not say when it ends: the old date no longer holds.
    store.save_connection(connection(2, platform_user_id="u1"), "t2")
    assert store.get_connection("con_1") is not None
    assert store.get_connection("con_1").session_expires_at is None  # type: ignore[union-attr]
    later = ends + timedelta(days=30)
    store.save_connection(attrs.evolve(connection(3, platform_user_id="u1"), session_expires_at=later), "t3")
    assert [c.session_expires_at for c in store.list_connections("acc_1")] == [later]


def test_the_same_platform_user_in_two_accounts_gives_two_connections(store: KeyStore) -> None:
    assert store.all_connections() == []
    store.save_connection(connection(1, "acc_1", "u7"), "t1")
    store.save_connection(connection(2, "acc_2", "u7"), "t2")
    assert [c.id for c in store.list_connections("acc_1")] == ["con_1"]
    assert [c.id for c in store.list_connections("acc_2")] == ["con_2"]
    assert sorted(store.all_connections(), key=lambda c: c.id) == [
        connection(1, "acc_1", "u7"),
        connection(2, "acc_2", "u7"),
    ]
    assert store.get_platform_session("con_2") == "t2"


def test_list_connections_oldest_first(store: KeyStore) -> None:
    store.save_connection(connection(1, at=T0 + timedelta(minutes=2)), "t")
    store.save_connection(connection(2, at=T0), "t")
    store.save_connection(connection(3, at=T0 + timedelta(minutes=1)), "t")
    assert [c.id for c in store.list_connections("acc_1")] == ["con_2", "con_3", "con_1"]


def test_set_active_connection_leaves_exactly_one_active(store: KeyStore) -> None:
    for n in (1, 2, 3):
        store.save_connection(connection(n, at=T0 + timedelta(seconds=n)), "t")
    store.save_connection(connection(9, "acc_2", active=True), "t")

    def active_ids(account_id: str = "acc_1") -> list[str]:
        return [c.id for c in store.list_connections(account_id) if c.active]

    store.set_active_connection("acc_1", "con_2")
    assert active_ids() == ["con_2"]
    store.set_active_connection("acc_1", "con_3")
    assert active_ids() == ["con_3"]
    store.set_active_connection("acc_1", "con_3")
    assert active_ids() == ["con_3"]
    assert active_ids("acc_2") == ["con_9"]  # another account is untouched
    # An unknown connection, or another account's, changes nothing.
    store.set_active_connection("acc_1", "con_404")
    store.set_active_connection("acc_1", "con_9")
    assert active_ids() == ["con_3"]
    assert active_ids("acc_2") == ["con_9"]


def test_load_connection_by_id_or_the_active_one_with_its_session(store: KeyStore) -> None:
    assert store.load_connection("acc_1", None) is None
    assert store.load_connection("acc_1", "con_404") is None
    store.save_connection(connection(1, at=T0), "token-1")
    store.save_connection(connection(2, at=T0 + timedelta(seconds=1)), "token-2")
    store.save_connection(connection(9, "acc_2", active=True), "token-9")
    # None active: the oldest.
    found = store.load_connection("acc_1", None)
    assert found is not None and found[0].id == "con_1" and found[1] == "token-1"
    store.set_active_connection("acc_1", "con_2")
    found = store.load_connection("acc_1", None)
    assert found is not None and found[0].id == "con_2" and found[0].active and found[1] == "token-2"
    assert found[0] == store.get_connection("con_2")
    # By id, whatever the account: the caller checks ownership.
    other = store.load_connection("acc_1", "con_9")
    assert other is not None and other[0].account_id == "acc_2" and other[1] == "token-9"


def test_saving_a_new_active_connection_deactivates_the_others(store: KeyStore) -> None:
    store.save_connection(connection(1, active=True), "t")
    store.save_connection(connection(2, active=True, at=T0 + timedelta(seconds=1)), "t")
    assert [c.id for c in store.list_connections("acc_1") if c.active] == ["con_2"]


def test_set_connection_status(store: KeyStore) -> None:
    store.save_connection(connection(1), "t")
    store.set_connection_status("con_1", CONNECTION_EXPIRED)
    found = store.get_connection("con_1")
    assert found is not None and found.status == CONNECTION_EXPIRED
    store.set_connection_status("con_404", CONNECTION_EXPIRED)  # not an error


def test_the_connections_of_an_account_are_deleted_with_their_sessions(store: KeyStore) -> None:
    store.save_connection(connection(1, active=True), "session-1")
    store.save_connection(connection(2), "session-2")
    store.save_connection(connection(3, account_id="acc_2", active=True), "session-3")
    store.delete_connections("acc_1")
    assert store.list_connections("acc_1") == [] and store.get_platform_session("con_1") is None
    assert store.load_connection("acc_1", None) is None
    assert store.get_platform_session("con_3") == "session-3"


def test_one_connection_is_deleted_with_its_session_and_no_other(store: KeyStore) -> None:
    store.save_connection(connection(1, active=True), "session-1")
    store.save_connection(connection(2, at=T0 + timedelta(seconds=1)), "session-2")
    store.delete_connection("con_1")
    assert store.get_connection("con_1") is None and store.get_platform_session("con_1") is None
    assert store.load_connection("acc_1", "con_1") is None
    assert [c.id for c in store.list_connections("acc_1")] == ["con_2"]
    assert store.get_platform_session("con_2") == "session-2"
    left = store.load_connection("acc_1", None)  # none active: the oldest, as the port says
    assert left is not None and left[0].id == "con_2" and not left[0].active
    store.delete_connection("con_404")  # not an error


def test_connection_id_taken_is_a_conflict(store: KeyStore) -> None:
    store.save_connection(connection(1, "acc_1", "u1"), "t")
    with pytest.raises(Conflict):
        store.save_connection(connection(1, "acc_1", "u2"), "t")


# --- API keys ------------------------------------------------------------------------------------


def test_key_round_trip(store: KeyStore) -> None:
    full = attrs.evolve(
        key(1),
        connection_id="con_1",
        kind=KEY_CONNECTOR,
        last_used_at=T0 + timedelta(seconds=1, microseconds=1),
        expires_at=T0 + timedelta(days=1),
        revoked_at=T0 + timedelta(hours=2),
    )
    store.add_key(full, "a" * 64)
    store.add_key(attrs.evolve(key(2), scopes=()), "b" * 64)
    assert store.get_key("key_1") == full
    assert store.get_key("key_2") == attrs.evolve(key(2), scopes=())


def test_find_keys_by_prefix_answers_every_match_with_its_hash(store: KeyStore) -> None:
    store.add_key(key(1, prefix="AbCd1234"), "1" * 64)
    store.add_key(key(2, prefix="AbCd1234", at=T0 + timedelta(seconds=1)), "2" * 64)
    store.add_key(key(3, prefix="abcd1234"), "3" * 64)  # prefixes are case-sensitive
    found = store.find_keys_by_prefix("AbCd1234")
    assert [(k.id, h) for k, h in found] == [("key_1", "1" * 64), ("key_2", "2" * 64)]
    assert found[0][0] == key(1, prefix="AbCd1234")
    assert store.find_keys_by_prefix("zzzzzzzz") == []


def test_key_id_or_secret_hash_taken_is_a_conflict(store: KeyStore) -> None:
    store.add_key(key(1), "1" * 64)
    with pytest.raises(Conflict):
        store.add_key(key(2), "1" * 64)
    with pytest.raises(Conflict):
        store.add_key(key(1), "2" * 64)
    assert [k.id for k in store.list_keys("acc_1")] == ["key_1"]


def test_list_keys_oldest_first_with_revoked_ones(store: KeyStore) -> None:
    store.add_key(attrs.evolve(key(1, at=T0 + timedelta(hours=1)), revoked_at=T0), "1" * 64)
    store.add_key(key(2, at=T0), "2" * 64)
    store.add_key(key(3, account_id="acc_2"), "3" * 64)
    assert [k.id for k in store.list_keys("acc_1")] == ["key_2", "key_1"]
    assert store.list_keys("acc_404") == []


def test_end_key_only_ever_ends_a_key_earlier(store: KeyStore) -> None:
    """The change, not the row: a stale copy can never make a key live again."""
    store.add_key(key(1), "1" * 64)
    store.end_key("key_1", expires_at=T0 + timedelta(hours=24))
    store.end_key("key_1", expires_at=T0 + timedelta(hours=48))  # later: ignored
    found = store.get_key("key_1")
    assert found is not None and found.expires_at == T0 + timedelta(hours=24) and found.revoked_at is None
    store.end_key("key_1", expires_at=T0, revoked_at=T0 + timedelta(hours=1))
    store.end_key("key_1", revoked_at=T0 + timedelta(hours=2))  # already revoked: kept
    found = store.get_key("key_1")
    assert found == attrs.evolve(key(1), expires_at=T0, revoked_at=T0 + timedelta(hours=1))
    store.end_key("key_404", revoked_at=T0)  # unknown: nothing happens
    assert store.get_key("key_404") is None


def test_a_unit_of_work_lands_whole_at_commit_or_not_at_all(store: KeyStore) -> None:
    with store.unit_of_work() as uow:
        uow.store.add_key(key(1), "1" * 64)
        uow.store.end_key("key_1", revoked_at=T0)
        with uow.store.unit_of_work() as inner:  # joins the outer block
            inner.store.add_key(key(2), "2" * 64)
            inner.commit()
        assert uow.store.get_key("key_2") is not None  # its own writes are seen inside
    assert store.get_key("key_1") is None and store.get_key("key_2") is None  # never committed
    with pytest.raises(RuntimeError), store.unit_of_work() as uow:
        uow.store.add_key(key(1), "1" * 64)
        uow.commit()
        raise RuntimeError("the step failed after its writes")
    assert store.get_key("key_1") is None
    with store.unit_of_work() as uow:
        uow.store.add_key(key(1), "1" * 64)
        uow.store.add_audit(AuditEvent(at=T0, event="key.minted", account_id="acc_1", key_id="key_1"))
        uow.commit()
    assert store.get_key("key_1") is not None and [e.event for e in store.list_audit("acc_1")] == ["key.minted"]


def test_usage_by_day_month_and_total(store: KeyStore) -> None:
    store.add_key(key(1), "1" * 64)
    store.add_usage({("key_1", "2026-10-31"): 4, ("key_1", "2026-11-01"): 2, ("key_2", "2026-11-01"): 7}, {})
    store.add_usage({("key_1", "2026-11-01"): 3, ("key_1", "2026-11-15"): 1}, {})
    assert store.key_usage("key_1", "2026-11-01") == KeyUsage(5, 6, 10)
    assert store.key_usage("key_1", "2026-11-15") == KeyUsage(1, 6, 10)
    assert store.key_usage("key_1", "2026-10-31") == KeyUsage(4, 4, 10)
    assert store.key_usage("key_1", "2026-12-01") == KeyUsage(0, 0, 10)
    assert store.key_usage("key_2", "2026-11-01") == KeyUsage(7, 7, 7)
    assert store.key_usage("key_404", "2026-11-01") == KeyUsage(0, 0, 0)


def test_last_used_only_moves_forward(store: KeyStore) -> None:
    store.add_key(key(1), "1" * 64)
    later, earlier = T0 + timedelta(minutes=10, microseconds=7), T0 + timedelta(minutes=1)
    store.add_usage({("key_1", "2026-11-01"): 1}, {"key_1": later})
    store.add_usage({("key_1", "2026-11-01"): 1}, {"key_1": earlier, "key_404": later})
    found = store.get_key("key_1")
    assert found is not None and found.last_used_at == later
    assert store.get_key("key_404") is None  # usage of an unknown key creates no key


# --- audit ---------------------------------------------------------------------------------------


def test_count_attempts_counts_from_since_inclusive(store: KeyStore) -> None:
    for minutes in (0, 5, 10):
        store.add_attempt("login.attempt", "login-email:a", T0 + timedelta(minutes=minutes))
    store.add_attempt("login.attempt", "login-email:b", T0 + timedelta(minutes=6))
    store.add_attempt("login.succeeded", "login-email:a", T0 + timedelta(minutes=6))
    assert store.count_attempts("login.attempt", "login-email:a", T0) == 3
    assert store.count_attempts("login.attempt", "login-email:a", T0 + timedelta(minutes=5)) == 2
    assert store.count_attempts("login.attempt", "login-email:a", T0 + timedelta(minutes=5, microseconds=1)) == 1
    assert store.count_attempts("login.attempt", "login-email:a", T0 + timedelta(minutes=11)) == 0
    assert store.count_attempts("login.attempt", "login-email:zzz", T0) == 0
    assert store.count_attempts("login.succeeded", "login-email:a", T0) == 1


def test_attempt_counts_are_forgotten_past_their_retention(store: KeyStore) -> None:
    """Strangers write them (each failed sign-in counted three ways): kept a day, not for good."""
    for n in range(50):
        store.add_attempt("login.attempt", f"login-addr:{n}", T0)
    store.add_attempt("login.attempt", "login-addr:0", T0 + ATTEMPT_RETENTION)
    assert store.count_attempts("login.attempt", "login-addr:0", T0) == 2  # exactly a day old: still kept
    store.add_attempt("login.attempt", "login-addr:late", T0 + ATTEMPT_RETENTION + timedelta(microseconds=1))
    assert sum(store.count_attempts("login.attempt", f"login-addr:{n}", T0) for n in range(50)) == 1


def test_list_audit_of_an_account_oldest_first(store: KeyStore) -> None:
    late = AuditEvent(at=T0 + timedelta(seconds=2), event="key.revoked", account_id="acc_1", key_id="key_1")
    early = AuditEvent(at=T0, event="key.refused", account_id="acc_1", key_id="key_1", subject="pre", detail="revoked")
    store.add_audit(late)
    store.add_audit(early)
    store.add_audit(AuditEvent(at=T0, event="key.minted", account_id="acc_2"))
    assert store.list_audit("acc_1") == [early, late]
    assert store.list_audit("acc_404") == []


def test_recent_audit_of_an_account_newest_first_and_at_most_the_limit(store: KeyStore) -> None:
    lines = [AuditEvent(at=T0 + timedelta(seconds=n), event=f"e.{n}", account_id="acc_1") for n in range(5)]
    same_time = [AuditEvent(at=T0 + timedelta(seconds=9), event=f"same.{n}", account_id="acc_1") for n in range(2)]
    for line in [lines[3], lines[0], lines[4], lines[1], lines[2], *same_time]:
        store.add_audit(line)
    store.add_audit(AuditEvent(at=T0 + timedelta(days=1), event="other", account_id="acc_2"))
    assert store.recent_audit("acc_1", 3) == [same_time[1], same_time[0], lines[4]]  # last written first
    assert store.recent_audit("acc_1", 100) == [same_time[1], same_time[0], *reversed(lines)]
    assert store.recent_audit("acc_404", 10) == []


# --- idempotency ---------------------------------------------------------------------------------


def test_idempotency_claim_complete_release(store: KeyStore) -> None:
    first = claim("k1", T0)
    assert store.claim_idempotency(first) is None
    assert store.claim_idempotency(claim("k1", T0 + timedelta(seconds=1), "fp2")) == first
    store.complete_idempotency("k1", 201, '{"id": "p1"}')
    done = attrs.evolve(first, status=201, body='{"id": "p1"}')
    assert store.claim_idempotency(claim("k1", T0 + timedelta(hours=1))) == done
    store.release_idempotency("k1")  # a completed answer is kept for the retries
    assert store.claim_idempotency(claim("k1", T0 + timedelta(hours=2))) == done


def test_released_claim_may_be_claimed_again(store: KeyStore) -> None:
    assert store.claim_idempotency(claim("k1", T0)) is None
    store.release_idempotency("k1")
    retry = claim("k1", T0 + timedelta(seconds=5), "fp2")
    assert store.claim_idempotency(retry) is None
    assert store.claim_idempotency(claim("k1", T0 + timedelta(seconds=6))) == retry


def test_idempotency_records_last_24_hours(store: KeyStore) -> None:
    store.claim_idempotency(claim("k1", T0))
    store.complete_idempotency("k1", 201, "first")
    found = store.claim_idempotency(claim("k1", T0 + timedelta(hours=24) - timedelta(microseconds=1)))
    assert found is not None and found.body == "first"
    newer = claim("k1", T0 + timedelta(hours=24), "fp-new")
    assert store.claim_idempotency(newer) is None  # 24 hours old: replaced
    assert store.claim_idempotency(claim("k1", T0 + timedelta(hours=25))) == newer


def test_records_past_24_hours_are_removed_by_a_later_claim(store: KeyStore) -> None:
    store.claim_idempotency(claim("acc_1:old", T0))
    store.complete_idempotency("acc_1:old", 201, "what was posted")
    store.claim_idempotency(claim("acc_1:recent", T0 + timedelta(hours=1)))
    store.claim_idempotency(claim("acc_2:any", T0 + timedelta(hours=24, microseconds=1)))
    # The old record is gone (a claim of its key now wins afresh, even one dated before the removal).
    assert store.claim_idempotency(claim("acc_1:old", T0 + timedelta(hours=2))) is None
    assert store.claim_idempotency(claim("acc_1:recent", T0 + timedelta(hours=2))) is not None


def test_an_accounts_records_are_forgotten_and_no_others(store: KeyStore) -> None:
    for key in ("acc_1:a", "acc_1:b", "acc_10:a", "acc_2:a", "accX1:a", "acc%1:a"):
        assert store.claim_idempotency(claim(key, T0)) is None
        store.complete_idempotency(key, 201, "body")
    store.forget_idempotency("acc_1:")
    left = {
        key: store.claim_idempotency(claim(key, T0 + timedelta(seconds=1))) is not None
        for key in ("acc_1:a", "acc_1:b", "acc_10:a", "acc_2:a", "accX1:a", "acc%1:a")
    }
    # ``_`` and ``%`` are not wildcards: only keys that start with the prefix itself are gone.
    assert left == {
        "acc_1:a": False,
        "acc_1:b": False,
        "acc_10:a": True,
        "acc_2:a": True,
        "accX1:a": True,
        "acc%1:a": True,
    }


def test_idempotency_keys_are_independent(store: KeyStore) -> None:
    assert store.claim_idempotency(claim("k1", T0)) is None
    assert store.claim_idempotency(claim("k2", T0)) is None
    store.complete_idempotency("k404", 201, "x")  # unknown: not an error
    store.release_idempotency("k404")


def test_concurrent_claims_from_threads_one_wins(store: KeyStore) -> None:
    barrier = threading.Barrier(8)
    results: list[bool] = []
    lock = threading.Lock()

    def attempt(n: int) -> None:
        barrier.wait()
        won = store.claim_idempotency(claim("race", T0, f"fp{n}")) is None
        with lock:
            results.append(won)

    threads = [threading.Thread(target=attempt, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False] * 7 + [True]


# --- nothing found -------------------------------------------------------------------------------


def test_unknown_ids_answer_none(store: KeyStore) -> None:
    assert store.get_account("acc_404") is None
    assert store.find_account_by_email("nobody@example.com") is None
    assert store.get_web_session("nope") is None
    assert store.get_connection("con_404") is None
    assert store.list_connections("acc_404") == []
    assert store.get_platform_session("con_404") is None
    assert store.get_key("key_404") is None
    assert store.find_keys_by_prefix("nope0000") == []
    assert store.list_keys("acc_404") == []
    assert store.list_audit("acc_404") == []
    assert store.count_attempts("login.attempt", "x", T0) == 0
    assert store.key_usage("key_404", "2026-11-01") == KeyUsage(0, 0, 0)
    store.delete_web_session("nope")
    store.set_active_connection("acc_404", "con_404")
    store.set_connection_status("con_404", CONNECTION_EXPIRED)
    store.end_key("key_404", revoked_at=T0)
    store.add_usage({}, {})
