"""Each kind of audit line in the words the Account page shows (``community_api/activity.py``); the page
itself: test_web_account_page.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from community_api.activity import recent_activity
from community_api.model import KEY_CONNECTOR, KEY_STANDARD, ApiKey, AuditEvent
from community_api.oauth_model import OAuthClient
from fakes.key_store import FakeKeyStore

T0 = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
ACCOUNT = "acc_owner"


def key(key_id: str, name: str, kind: str = KEY_STANDARD, account_id: str = ACCOUNT) -> ApiKey:
    return ApiKey(
        id=key_id,
        account_id=account_id,
        name=name,
        prefix="AbCd1234",
        scopes=("groups:read",),
        connection_id=None,
        kind=kind,
        created_at=T0,
        lineage_id=key_id,
    )


@pytest.fixture
def store() -> FakeKeyStore:
    store = FakeKeyStore()
    store.add_key(key("key_script", "nightly script"), "hash-1")
    store.add_key(key("key_claude", "Claude", kind=KEY_CONNECTOR), "hash-2")
    store.add_key(key("key_other", "someone else's", account_id="acc_other"), "hash-3")
    store.add_oauth_client(
        OAuthClient(id="ocl_1", name="Claude", redirect_uris=("https://c.example/cb",), created_at=T0)
    )
    return store


@pytest.mark.parametrize(
    ("line", "words"),
    [
        (AuditEvent(T0, "login.succeeded"), "Signed in"),
        (AuditEvent(T0, "login.succeeded", detail="new-browser"), "Signed in from a browser new to this account"),
        (AuditEvent(T0, "account.password_reset"), "Password set by the operator; every browser was signed out"),
        (AuditEvent(T0, "account.signed_out_everywhere"), "Signed out everywhere"),
        (AuditEvent(T0, "key.minted", key_id="key_script"), "Key “nightly script” (cda_AbCd1234…) created"),
        (
            AuditEvent(T0, "key.rotated", key_id="key_script", detail="successor=key_2 grace=24h"),
            "Key “nightly script” (cda_AbCd1234…) rotated; the old value keeps working for 24 hours",
        ),
        (AuditEvent(T0, "key.revoked", key_id="key_script"), "Key “nightly script” (cda_AbCd1234…) revoked"),
        (
            AuditEvent(T0, "key.revoked", key_id="key_script", detail="leaked: by the operator"),
            "Key “nightly script” (cda_AbCd1234…) revoked by the operator, as leaked",
        ),
        (
            AuditEvent(T0, "key.refused", key_id="key_script", subject="AbCd1234", detail="revoked"),
            "A request with key “nightly script” (cda_AbCd1234…) was refused: it was revoked",
        ),
        (AuditEvent(T0, "key.minted", key_id="key_claude"), "Connector “Claude” connected"),
        (AuditEvent(T0, "key.revoked", key_id="key_claude"), "Connector “Claude” revoked"),
        (
            AuditEvent(T0, "oauth.token_refused", key_id="key_claude", detail="revoked"),
            "A request with an access token of connector “Claude” was refused: the connector was revoked",
        ),
        (
            AuditEvent(T0, "oauth.token_refused", key_id="key_claude", detail="other resource"),
            "A request with an access token of connector “Claude” was refused: it was sent to another address "
            "than the one it was issued for",
        ),
        (AuditEvent(T0, "oauth.consented", detail="ocl_1"), "Connector “Claude” approved"),
        (AuditEvent(T0, "oauth.consented", detail="ocl_forgotten"), "A connector was approved"),
        (
            AuditEvent(T0, "oauth.refresh_replayed", key_id="key_claude"),
            "A connector's refresh token was used a second time: that connector was revoked",
        ),
        (
            AuditEvent(T0, "connection.expired", subject="con_1", detail="alice"),
            "The platform ended the session of “alice”: requests through it answer connection_expired until it is "
            "linked again",
        ),
        (AuditEvent(T0, "connection.removed", subject="con_1", detail="alice"), "Platform account “alice” unlinked"),
        (AuditEvent(T0, "connection.removed", subject="con_1"), "A platform account was unlinked"),  # before session 35
        # Another account's key is never named, nor a key the store no longer has.
        (AuditEvent(T0, "key.revoked", key_id="key_other"), "A key revoked"),
        (AuditEvent(T0, "key.minted", key_id="key_gone"), "A key created"),
        (
            AuditEvent(T0, "key.refused", key_id="key_script", detail="a new reason"),
            "A request with key “nightly script” (cda_AbCd1234…) was refused: a new reason",
        ),
        (
            AuditEvent(T0, "oauth.token_refused", key_id="key_claude", detail="a new reason"),
            "A request with an access token of connector “Claude” was refused: a new reason",
        ),
        (AuditEvent(T0, "something.new"), "something.new"),  # a line this release does not know: named as written
    ],
)
def test_each_line_in_words(store: FakeKeyStore, line: AuditEvent, words: str) -> None:
    store.add_audit(AuditEvent(line.at, line.event, ACCOUNT, line.key_id, line.subject, line.detail))
    [shown] = recent_activity(store, ACCOUNT)
    assert shown.text == words and shown.at == T0


def test_an_expired_access_token_is_not_shown(store: FakeKeyStore) -> None:
    """A connector's access token lives an hour; its client then refreshes it: nothing to tell the owner."""
    store.add_audit(AuditEvent(T0, "login.succeeded", ACCOUNT))
    store.add_audit(AuditEvent(T0, "oauth.token_refused", ACCOUNT, "key_claude", detail="expired"))
    assert [line.text for line in recent_activity(store, ACCOUNT)] == ["Signed in"]


def test_newest_first_and_at_most_the_limit(store: FakeKeyStore) -> None:
    for minute in range(6):  # alternating: six rows
        event = "login.succeeded" if minute % 2 else "account.signed_out_everywhere"
        store.add_audit(AuditEvent(T0 + timedelta(minutes=minute), event, ACCOUNT))
    shown = recent_activity(store, ACCOUNT, limit=3)
    assert [(line.at, line.text) for line in shown] == [
        (T0 + timedelta(minutes=5), "Signed in"),
        (T0 + timedelta(minutes=4), "Signed out everywhere"),
        (T0 + timedelta(minutes=3), "Signed in"),
    ]
    assert recent_activity(store, "acc_nobody") == []


def test_the_same_words_in_a_row_are_one_row_with_their_count(store: FakeKeyStore) -> None:
    store.add_audit(AuditEvent(T0, "key.minted", ACCOUNT, key_id="key_script"))
    for second in range(1, 61):  # a script sending its revoked key: a line a minute, here denser
        store.add_audit(
            AuditEvent(T0 + timedelta(seconds=second), "key.refused", ACCOUNT, "key_script", detail="revoked")
        )
    store.add_audit(AuditEvent(T0 + timedelta(minutes=2), "login.succeeded", ACCOUNT))
    shown = recent_activity(store, ACCOUNT)
    assert [(line.text, line.times, line.since) for line in shown] == [
        ("Signed in", 1, None),
        (
            "A request with key “nightly script” (cda_AbCd1234…) was refused: it was revoked",
            60,
            T0 + timedelta(seconds=1),
        ),
        ("Key “nightly script” (cda_AbCd1234…) created", 1, None),
    ]
    assert shown[1].at == T0 + timedelta(seconds=60)


def test_only_the_scanned_lines_are_read(store: FakeKeyStore) -> None:
    store.add_audit(AuditEvent(T0, "key.minted", ACCOUNT, key_id="key_script"))
    for second in range(1, 11):
        store.add_audit(AuditEvent(T0 + timedelta(seconds=second), "login.succeeded", ACCOUNT))
    shown = recent_activity(store, ACCOUNT, scanned=10)
    assert [(line.text, line.times) for line in shown] == [("Signed in", 10)]
