"""Password change, sign out everywhere, and account deletion, through the management API."""

from __future__ import annotations

import threading
from typing import Any

import falcon.testing
import pytest
from argon2 import PasswordHasher

from community_api import account_lifecycle, accounts, keys
from community_api.account_lifecycle import reset_password_unchecked
from community_api.errors import InvalidRequest, NotFound, ServiceError, Unauthorized
from community_api.model import IdempotencyRecord
from community_api.scopes import ALL_SCOPES
from tests.unit.web_support import WebBrowser
from tests.unit.world_support import PASSWORD, Browser, World

NEW_PASSWORD = "a brand new passphrase"


def me(world: World, browser: Browser) -> int:
    return world.client.simulate_get("/v1/me", headers=browser.headers()).status_code


def key_works(world: World, key: str) -> bool:
    """The key is accepted (without a linked connection the route then answers 409, not 401)."""
    return world.client.simulate_get("/v1/whoami", headers={"Authorization": f"Bearer {key}"}).status_code != 401


def test_a_password_change_ends_every_other_session_and_keeps_this_one(world: World) -> None:
    """This browser goes on under a new session cookie (its CSRF token kept); every other session ends, and
    so does a copy of this browser's old cookie, held by whoever the owner changes the password against."""
    here = world.sign_up()
    elsewhere = world.sign_in("owner@example.com")
    copied = Browser(here.cookie, here.csrf, here.account)
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
    renewed = changed.cookies["cda_session"]
    assert renewed.value != here.cookie and renewed.http_only and renewed.same_site == "Lax" and renewed.path == "/"
    assert me(world, copied) == 401 and me(world, elsewhere) == 401
    here = Browser(renewed.value, here.csrf, here.account)
    assert me(world, here) == 200
    assert world.client.simulate_post("/v1/keys", json={}, headers=here.headers()).status_code == 201  # same CSRF
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
    everywhere = world.client.simulate_delete("/v1/sessions", headers=here.headers())
    assert everywhere.status_code == 204 and everywhere.cookies["cda_session"].value == ""  # this one's cleared
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
    deleted = world.client.simulate_delete("/v1/me", headers=browser.headers(), json={"password": PASSWORD})
    assert deleted.status_code == 204
    assert deleted.cookies["cda_session"].value == ""  # the browser forgets the session cookie
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


def change(world: World, browser: Browser, current: str) -> falcon.testing.Result:
    return world.client.simulate_post(
        "/v1/me/password", headers=browser.headers(), json={"currentPassword": current, "newPassword": NEW_PASSWORD}
    )


def delete(world: World, browser: Browser, password: str) -> falcon.testing.Result:
    return world.client.simulate_delete("/v1/me", headers=browser.headers(), json={"password": password})


def test_a_stolen_session_cannot_guess_the_password_it_needs_to_take_the_account(world: World) -> None:
    """A session cookie taken from a browser acts as the account, but changing the password (which signs the
    owner out) or deleting the account needs the password. Its guesses are counted on that session: five
    wrong ones in 15 minutes, the change and the deletion alike, then 429 with Retry-After, even for the
    right password, before anything is checked. The owner's own session is not held back, and the Account
    page shows the wrong passwords."""
    owner = world.sign_up()
    stolen = world.sign_in("owner@example.com")
    for guess in range(3):
        assert change(world, stolen, f"guess number {guess}").status_code == 403
    assert delete(world, stolen, "guess number 3").status_code == 403
    assert change(world, stolen, "guess number 4").status_code == 403
    held = change(world, stolen, PASSWORD)
    assert held.status_code == 429, held.text
    assert held.json["error"]["code"] == "rate_limited" and held.headers["Retry-After"] == "900"
    assert "wrong passwords" in held.json["error"]["message"]
    assert delete(world, stolen, PASSWORD).status_code == 429
    assert me(world, owner) == 200 and me(world, stolen) == 200  # nothing changed, nothing deleted
    world.sign_in("owner@example.com")  # the password is still the old one
    rows = world.client.simulate_get("/account", headers=owner.headers()).text
    assert "A wrong password was given" in rows and "5 times" in rows
    # The owner's session has bounds of its own; a right password does not count.
    for _ in range(3):
        assert change(world, owner, "the owner mistypes").status_code == 403
    assert change(world, owner, PASSWORD).status_code == 204
    world.clock.advance(minutes=15)
    assert change(world, stolen, "guess number 5").status_code == 401  # the change signed it out


def test_the_guess_bound_lets_a_session_try_again_after_15_minutes(world: World) -> None:
    owner = world.sign_up()
    for guess in range(5):
        assert delete(world, owner, f"guess number {guess}").status_code == 403
    assert delete(world, owner, PASSWORD).status_code == 429
    world.clock.advance(minutes=14, seconds=59)
    assert delete(world, owner, PASSWORD).status_code == 429
    world.clock.advance(seconds=1)
    assert delete(world, owner, PASSWORD).status_code == 204


def test_twenty_guesses_at_once_through_one_session_are_checked_five_times(world: World) -> None:
    """Counting and checking are one step: guesses sent at once cannot all pass before any is counted."""
    world.sign_up()
    stolen = world.sign_in("owner@example.com")
    account, session = accounts.session_account(world.store, world.clock, stolen.cookie)
    barrier = threading.Barrier(20)
    outcomes: list[str] = []

    def guess(number: int) -> None:
        barrier.wait(10)
        try:
            account_lifecycle.change_password(
                world.store,
                world.clock,
                account,
                session,
                account_lifecycle.PasswordChange(f"guess number {number}", NEW_PASSWORD),
                hasher=world.deps.password_hasher,
            )
        except ServiceError as error:
            outcomes.append(error.code)

    threads = [threading.Thread(target=guess, args=(number,)) for number in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(outcomes) == ["forbidden"] * 5 + ["rate_limited"] * 15


def test_a_session_ended_while_its_password_change_runs_changes_nothing_and_comes_back_for_nobody(
    world: World,
) -> None:
    """The new password is hashed (slowly) between the check of the current one and the write: a "sign out
    everywhere" from another browser that lands then ends the session, and the change then acts as a
    request that came after it (401), changing nothing and starting no session."""
    here = world.sign_up()
    elsewhere = world.sign_in("owner@example.com")

    class SignsOutMeanwhile(PasswordHasher):
        def hash(self, password: str | bytes, *, salt: bytes | None = None) -> str:
            assert world.client.simulate_delete("/v1/sessions", headers=elsewhere.headers()).status_code == 204
            return super().hash(password, salt=salt)

    account, session = accounts.session_account(world.store, world.clock, here.cookie)
    change = account_lifecycle.PasswordChange(PASSWORD, NEW_PASSWORD)
    with pytest.raises(Unauthorized):
        account_lifecycle.change_password(
            world.store, world.clock, account, session, change, hasher=SignsOutMeanwhile()
        )
    assert me(world, here) == 401
    world.sign_in("owner@example.com", PASSWORD)  # the password did not change


def test_the_operator_names_an_account_by_its_email_or_id_as_pasted(world: World) -> None:
    """Spaces around a name pasted into the command line are not part of it."""
    account = world.add_account("owner@example.com")
    assert account_lifecycle.account_named(world.store, "  Owner@Example.com \n") == account
    assert account_lifecycle.account_named(world.store, f"\t{account.id} ") == account
    with pytest.raises(NotFound, match="no account with the email other@example.com"):
        account_lifecycle.account_named(world.store, " other@example.com ")
    # Without an "@" it is an id, whatever it looks like, and the refusal says how accounts are named.
    with pytest.raises(NotFound, match=r"no account with the id owner \(name an account by its email or its id\)"):
        account_lifecycle.account_named(world.store, "owner")


def test_the_operators_list_counts_live_keys_only(world: World) -> None:
    browser = world.sign_up()
    kept, revoked = world.mint(browser), world.mint(browser)
    rotated = world.client.simulate_post(
        f"/v1/keys/{kept['id']}/rotate", params={"grace": "0"}, headers=browser.headers()
    )
    assert rotated.status_code == 201
    assert world.client.simulate_delete(f"/v1/keys/{revoked['id']}", headers=browser.headers()).status_code == 204
    (summary,) = account_lifecycle.account_summaries(world.store, world.clock)
    assert summary.live_keys == 1  # the successor; the replaced key and the revoked one hold nothing


def test_deleting_the_account_forgets_its_connectors_tokens(world: World, connector: Any) -> None:
    """Revoked with their grant, and not kept: no dead credential of a deleted account stays in the store."""
    owner = WebBrowser(world)
    owner.sign_up()
    owner.link("alice")
    tokens = connector.redeem(connector.approve(owner)).json
    deleted = world.client.simulate_delete(
        "/v1/me", headers=owner.headers({"X-CSRF-Token": owner.csrf()}), json={"password": PASSWORD}
    )
    assert deleted.status_code == 204, deleted.text
    for value in (tokens["access_token"], tokens["refresh_token"]):
        assert world.store.get_oauth_token(keys.hash_secret(value)) is None
    assert connector.refresh(tokens["refresh_token"]).status_code == 400
