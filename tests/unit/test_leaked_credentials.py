"""What ``community-api keys revoke`` does with a leaked value, on fakes: a key is revoked with its
predecessors in grace; an OAuth access or refresh token revokes its grant, ending every token of it."""

from __future__ import annotations

import pytest

from community_api import keys
from community_api.errors import InvalidRequest
from community_api.oauth import ACCESS_PREFIX, revoke_leaked_token
from tests.unit.oauth_support import Connector, accepted
from tests.unit.web_support import WebBrowser
from tests.unit.world_support import Ready, World


def test_a_leaked_key_and_its_predecessor_in_grace_are_revoked(ready: Ready) -> None:
    world = ready.world
    minted = world.mint(ready.browser)
    rotated = world.client.simulate_post(f"/v1/keys/{minted['id']}/rotate", headers=ready.browser.headers()).json
    leaked = keys.revoke_leaked_key(world.store, world.clock, f"  {rotated['secret']}\n")
    assert leaked.key is not None and leaked.key.id == rotated["id"] and leaked.was_live
    assert world.get("/v1/whoami", rotated["secret"]).status_code == 401
    assert world.get("/v1/whoami", minted["secret"]).status_code == 401  # its predecessor, in grace
    assert world.get("/v1/whoami", ready.key).status_code == 200  # other keys are kept
    trail = [e for e in world.store.list_audit(ready.browser.account["id"]) if e.event == "key.revoked"]
    assert trail[-1].detail == "leaked: by the operator"
    again = keys.revoke_leaked_key(world.store, world.clock, rotated["secret"])
    assert again.key is not None and not again.was_live
    assert keys.revoke_leaked_key(world.store, world.clock, keys.new_secret(keys.KEY_PREFIX)).key is None
    for bad in ("", "cda_short", ready.key[:-1] + ("A" if ready.key[-1] != "A" else "B")):
        with pytest.raises(InvalidRequest):
            keys.revoke_leaked_key(world.store, world.clock, bad)


@pytest.mark.parametrize("which", ["access_token", "refresh_token"])
def test_a_leaked_oauth_token_revokes_its_grant(world: World, connector: Connector, which: str) -> None:
    owner = WebBrowser(world)
    owner.sign_up()
    owner.link("alice")
    tokens = connector.redeem(connector.approve(owner)).json
    assert accepted(world, tokens["access_token"])
    leaked = revoke_leaked_token(world.store, world.clock, tokens[which])
    assert leaked.key is not None and leaked.key.kind == "connector" and leaked.was_live
    assert not accepted(world, tokens["access_token"])
    assert connector.refresh(tokens["refresh_token"]).status_code == 400
    # Its tokens are forgotten with the grant: the value names nothing any more.
    assert revoke_leaked_token(world.store, world.clock, tokens[which]).key is None
    with pytest.raises(InvalidRequest):
        revoke_leaked_token(world.store, world.clock, ACCESS_PREFIX + "x" * 49)


def test_a_leaked_token_pasted_with_spaces_and_a_newline_is_still_found(world: World, connector: Connector) -> None:
    """As a key's value is: an operator pastes what a scanner reported, often with the line's spaces."""
    owner = WebBrowser(world)
    owner.sign_up()
    owner.link("alice")
    tokens = connector.redeem(connector.approve(owner)).json
    leaked = revoke_leaked_token(world.store, world.clock, f"  {tokens['refresh_token']}\n")
    assert leaked.key is not None and leaked.was_live
    assert not accepted(world, tokens["access_token"])
