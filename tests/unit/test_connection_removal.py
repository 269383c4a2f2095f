"""Unlinking a platform account: `DELETE /v1/connections/{id}` and the dashboard's Remove button.

Before, the only way to make the service forget a linked platform account and its session was to delete
the whole service account. Removing one connection erases its platform session, revokes the keys bound
to it (connector grants with their tokens), and leaves every other connection and key as it was; when the
active connection goes, the oldest one left becomes active."""

from __future__ import annotations

from typing import Any

from community_api.keys import hash_secret, mint_key, revoke_key
from community_api.model import KEY_CONNECTOR
from community_api.scopes import ALL_SCOPES
from tests.unit.web_support import WebBrowser, account_id, key_id_of
from tests.unit.world_support import Browser, World


def remove(world: World, browser: Browser, connection_id: str, **headers: str) -> Any:
    return world.client.simulate_delete(f"/v1/connections/{connection_id}", headers={**browser.headers(), **headers})


def listed(world: World, browser: Browser) -> list[dict[str, Any]]:
    return list(world.client.simulate_get("/v1/connections", headers=browser.headers()).json["connections"])


def test_removing_a_connection_erases_its_session_and_revokes_only_its_bound_keys(world: World) -> None:
    owner = world.sign_up()
    alice, bob = world.link(owner), world.link(owner, "bob")
    unbound = world.mint(owner, scopes=ALL_SCOPES)["secret"]
    bound_to_bob = world.mint(owner, connection_id=bob["id"])["secret"]
    bound_to_alice = world.mint(owner, connection_id=alice["id"])["secret"]

    assert remove(world, owner, bob["id"]).status_code == 204
    assert [c["handle"] for c in listed(world, owner)] == ["alice"]
    assert world.store.get_platform_session(bob["id"]) is None and world.store.get_connection(bob["id"]) is None
    assert world.get("/v1/whoami", bound_to_bob).status_code == 401  # revoked with its connection
    assert world.get("/v1/whoami", bound_to_alice).json["handle"] == "alice"
    assert world.get("/v1/whoami", unbound).json["handle"] == "alice"
    events = [(e.event, e.subject) for e in world.store.list_audit(owner.account["id"])]
    assert ("connection.removed", bob["id"]) in events
    assert remove(world, owner, bob["id"]).status_code == 404  # already gone


def test_removing_the_active_connection_makes_the_oldest_left_active(world: World) -> None:
    owner = world.sign_up()
    alice = world.link(owner)
    world.link(owner, "bob")
    world.link(owner, "carol")
    key = world.mint(owner)["secret"]
    assert remove(world, owner, alice["id"]).status_code == 204
    assert [(c["handle"], c["active"]) for c in listed(world, owner)] == [("bob", True), ("carol", False)]
    assert world.get("/v1/whoami", key).json["handle"] == "bob"
    for connection in listed(world, owner):
        assert remove(world, owner, connection["id"]).status_code == 204
    nothing = world.get("/v1/whoami", key)  # the key is kept: it acts through whatever is linked next
    assert nothing.status_code == 409 and "POST /v1/connections" in nothing.json["error"]["message"]
    world.link(owner, "dave")
    assert world.get("/v1/whoami", key).json["handle"] == "dave"


def test_a_connection_is_removed_only_by_its_own_account_with_the_csrf_token(world: World) -> None:
    owner = world.sign_up()
    alice = world.link(owner)
    world.add_account("two@example.com", "another long password")
    stranger = world.sign_in("two@example.com", "another long password")
    assert remove(world, stranger, alice["id"]).status_code == 404  # never says it exists
    assert remove(world, owner, "con_nope").status_code == 404
    no_token = world.client.simulate_delete(
        f"/v1/connections/{alice['id']}", headers={"Cookie": f"cda_session={owner.cookie}"}
    )
    assert no_token.status_code == 403
    with_key = world.client.simulate_delete(
        f"/v1/connections/{alice['id']}", headers={"Authorization": f"Bearer {world.mint(owner)['secret']}"}
    )
    assert with_key.status_code == 401
    assert [c["id"] for c in listed(world, owner)] == [alice["id"]]


def test_a_connector_grant_bound_to_the_connection_loses_its_tokens(world: World) -> None:
    owner = world.sign_up()
    alice = world.link(owner)
    grant = mint_key(
        world.store,
        world.clock,
        account_id=owner.account["id"],
        name="Agent",
        scopes=None,
        connection_id=alice["id"],
        kind=KEY_CONNECTOR,
    )
    assert remove(world, owner, alice["id"]).status_code == 204
    ended = world.store.get_key(grant.key.id)
    assert ended is not None and ended.revoked_at is not None


def test_the_dashboard_asks_then_removes(world: World) -> None:
    page = WebBrowser(world)
    page.sign_up()
    page.link("alice")
    key = page.mint({"scope": ["groups:read"]})
    alice_id = world.store.list_connections(account_id(world))[0].id
    bound = page.mint({"name": "bound one", "connection_id": alice_id})
    assert f'href="/connections/{alice_id}/remove"' in page.get("/connections").text
    asked = page.get(f"/connections/{alice_id}/remove")
    assert asked.status_code == 200 and "@alice" in asked.text and "erased" in asked.text
    assert "bound one" in asked.text and f"cda_{bound[4:12]}" in asked.text and "web key" not in asked.text
    done = page.submit(asked, f"/connections/{alice_id}/remove")
    assert done.status_code == 303 and done.headers["location"] == "/connections?notice=removed"
    shown = page.follow(done)
    assert "The platform account is unlinked" in shown.text and "No platform account is linked yet" in shown.text
    assert world.store.get_connection(alice_id) is None
    assert world.get("/v1/whoami", key).status_code == 409
    assert page.get("/connections/con_nope/remove").status_code == 404


def test_another_accounts_confirmation_page_is_not_found_and_names_nothing(world: World) -> None:
    """The page that asks "Unlink @alice?" is the owner's: to another account it is as a connection that
    does not exist, without the handle or the keys bound to it."""
    owner = WebBrowser(world)
    owner.sign_up()
    owner.link("alice")
    alice_id = world.store.list_connections(account_id(world))[0].id
    owner.mint({"name": "bound one", "connection_id": alice_id})
    world.add_account("two@example.com", "another long password")
    stranger = WebBrowser(world)
    assert stranger.sign_in("two@example.com", "another long password").status_code == 303
    asked = stranger.get(f"/connections/{alice_id}/remove")
    assert asked.status_code == 404 and asked.headers["content-type"].startswith("text/html")
    assert "There is no such connection." in asked.text  # the dashboard's page, as for an id of nothing
    assert "@alice" not in asked.text and "bound one" not in asked.text


def test_the_removal_form_sent_again_from_another_tab_says_it_is_gone(world: World) -> None:
    """The same confirmation page, open in two tabs: the second Remove finds nothing to remove, and says so
    on a page rather than failing; a visitor who is not signed in is sent to sign in first."""
    page = WebBrowser(world)
    page.sign_up()
    page.link("alice")
    alice_id = world.store.list_connections(account_id(world))[0].id
    asked = page.get(f"/connections/{alice_id}/remove")
    assert page.submit(asked, f"/connections/{alice_id}/remove").status_code == 303
    again = page.submit(asked, f"/connections/{alice_id}/remove")
    assert again.status_code == 404 and "text/html" in again.headers["content-type"]
    assert "There is no such connection: it may have been unlinked already." in again.text
    stranger = WebBrowser(world)
    sent_away = stranger.get(f"/connections/{alice_id}/remove")
    assert sent_away.status_code == 303 and sent_away.headers["location"].startswith("/login")


def test_a_connector_grant_bound_to_the_connection_has_its_tokens_forgotten(world: World, connector: Any) -> None:
    """Through the whole OAuth flow, the grant bound on the consent page ("Always @alice"): its access and
    refresh tokens are gone from the store with the connection, not only refused."""
    owner = WebBrowser(world)
    owner.sign_up()
    owner.link("alice")
    alice = world.store.list_connections(account_id(world))[0]
    tokens = connector.redeem(connector.approve(owner, {"connection_id": alice.id})).json
    removed = world.client.simulate_delete(
        f"/v1/connections/{alice.id}", headers=owner.headers({"X-CSRF-Token": owner.csrf()})
    )
    assert removed.status_code == 204
    for value in (tokens["access_token"], tokens["refresh_token"]):
        assert world.store.get_oauth_token(hash_secret(value)) is None


def test_the_confirmation_names_only_the_keys_the_removal_would_stop(world: World) -> None:
    page = WebBrowser(world)
    page.sign_up()
    page.link("alice")
    alice_id = world.store.list_connections(account_id(world))[0].id
    page.mint({"name": "bound one", "connection_id": alice_id})
    old = page.mint({"name": "revoked one", "connection_id": alice_id})
    assert revoke_key(world.store, world.clock, account_id=account_id(world), key_id=key_id_of(world, old)).revoked_at
    asked = page.get(f"/connections/{alice_id}/remove")
    assert "bound one" in asked.text and "revoked one" not in asked.text


def test_removing_a_connection_that_is_not_active_leaves_the_active_one(world: World) -> None:
    owner = world.sign_up()
    world.link(owner)
    bob, carol = world.link(owner, handle="bob"), world.link(owner, handle="carol")
    chosen = world.client.simulate_post(f"/v1/connections/{carol['id']}/activate", headers=owner.headers())
    assert chosen.status_code == 200, chosen.text
    assert remove(world, owner, bob["id"]).status_code == 204
    assert [(c["handle"], c["active"]) for c in listed(world, owner)] == [("alice", False), ("carol", True)]
