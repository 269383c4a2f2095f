"""Password change, sign out everywhere, and account deletion, through the management API."""

from __future__ import annotations

import pytest

from community_api.account_lifecycle import reset_password_unchecked
from community_api.errors import InvalidRequest, NotFound
from community_api.model import IdempotencyRecord
from community_api.scopes import ALL_SCOPES
from tests.unit.world_support import PASSWORD, Browser, World

NEW_PASSWORD = "a brand new passphrase"


def me(world: World, browser: Browser) -> int:
    return world.client.simulate_get("/v1/me", headers=browser.headers()).status_code


def key_works(world: World, key: str) -> bool:
    """The key is accepted (without a linked connection the route then answers 409, not 401)."""
    return world.client.simulate_get("/v1/whoami", headers={"Authorization": f"Bearer {key}"}).status_code != 401


def test_a_password_change_ends_every_other_session_and_keeps_this_one(world: World) -> None:
    here = world.sign_up()
    elsewhere = world.sign_in("owner@example.com")
    key = world.mint(here)["secret"]
    wrong = world.client.simulate_post(
        "/v1/me/password",
        headers=here.headers(),
        json={"currentPassword": "not it at all", "newPassword": NEW_PASSWORD},
    )
    assert wrong.status_code == 403 and me(world, elsewhere) == 200  # nothing changed
    short = world.client.simulate_post(
        "/v1/me/password", headers=here.headers(), json={"currentPassword": PASSWORD, "newPassword": "short"}
    )
    assert short.status_code == 400 and short.json["error"]["details"]["field"] == "newPassword"
    changed = world.client.simulate_post(
        "/v1/me/password", headers=here.headers(), json={"currentPassword": PASSWORD, "newPassword": NEW_PASSWORD}
    )
    assert changed.status_code == 204
    assert me(world, here) == 200 and me(world, elsewhere) == 401
    assert key_works(world, key)  # API keys are not sessions
    assert (
        world.client.simulate_post("/v1/session", json={"email": "owner@example.com", "password": PASSWORD}).status_code
        == 401
    )
    world.sign_in("owner@example.com", NEW_PASSWORD)
    events = [e.event for e in world.store.list_audit(here.account["id"])]
    assert "account.password_changed" in events


def test_sign_out_everywhere_ends_every_session_but_no_key(world: World) -> None:
    here = world.sign_up()
    elsewhere = world.sign_in("owner@example.com")
    key = world.mint(here)["secret"]
    assert (
        world.client.simulate_delete("/v1/sessions", headers={"Cookie": f"cda_session={here.cookie}"}).status_code
        == 403
    )  # the CSRF token is needed
    assert world.client.simulate_delete("/v1/sessions", headers=here.headers()).status_code == 204
    assert me(world, here) == me(world, elsewhere) == 401
    assert key_works(world, key)


def test_deleting_the_account_takes_everything_with_it(world: World) -> None:
    browser = world.sign_up()
    connection = world.link(browser)
    key = world.mint(browser, scopes=ALL_SCOPES)["secret"]
    bound = world.mint(browser, connection_id=connection["id"])["secret"]
    # A DM sent with an Idempotency-Key: its answer (what was sent) is kept 24 hours for retries.
    sent = world.post(
        "/v1/dms",
        key,
        {"to": world.gateway.user("bob").id, "content": "a private message"},
        params={"group": "builders-club"},
        headers={"Idempotency-Key": "dm-1"},
    )
    assert sent.status_code == 201
    for body in ({}, {"password": ""}, {"password": "not the password"}):
        refused = world.client.simulate_delete("/v1/me", headers=browser.headers(), json=body)
        assert refused.status_code == 403, body
    assert key_works(world, key) and me(world, browser) == 200  # nothing deleted
    assert (
        world.client.simulate_delete("/v1/me", headers=browser.headers(), json={"password": PASSWORD}).status_code
        == 204
    )
    assert not key_works(world, key) and not key_works(world, bound)
    assert me(world, browser) == 401
    account_id = browser.account["id"]
    assert world.store.list_connections(account_id) == []
    assert world.store.get_platform_session(connection["id"]) is None
    # The kept answer went with the account: a claim of its key finds nothing.
    kept = IdempotencyRecord(f"{account_id}:dm-1", "fp", 0, "", world.clock.now())
    assert world.store.claim_idempotency(kept) is None
    audit = world.store.list_audit(account_id)
    assert "account.deleted" in [e.event for e in audit]
    assert not any("owner@example.com" in f"{e.subject} {e.detail}" for e in audit)  # no email in clear
    # The email signs up afresh (the service has no account again) and sees nothing of the old one.
    fresh = world.sign_up()
    state = world.client.simulate_get("/v1/me", headers=fresh.headers()).json
    assert fresh.account["id"] != account_id and state["keys"] == [] and state["connections"] == []


def test_the_operator_sets_a_forgotten_password_and_every_session_ends(world: World) -> None:
    """A self-hosted service sends no mail: a person who forgot the password asks the operator, whose
    command line sets a new one (``community-api accounts set-password``). Whoever held the old password
    may be signed in: every session ends. API keys are not sessions: they are kept."""
    here = world.sign_up()
    key = world.mint(here)["secret"]
    with pytest.raises(InvalidRequest, match="password"):
        reset_password_unchecked(world.store, world.clock, "owner@example.com", "short")
    assert me(world, here) == 200  # a refused reset changes nothing
    with pytest.raises(NotFound):
        reset_password_unchecked(world.store, world.clock, "nobody@example.com", NEW_PASSWORD)

    account = reset_password_unchecked(world.store, world.clock, " Owner@Example.com ", NEW_PASSWORD)
    assert account.id == here.account["id"]
    assert me(world, here) == 401 and key_works(world, key)
    old = world.client.simulate_post("/v1/session", json={"email": "owner@example.com", "password": PASSWORD})
    assert old.status_code == 401
    world.sign_in("owner@example.com", NEW_PASSWORD)
    assert "account.password_reset" in [e.event for e in world.store.list_audit(account.id)]
