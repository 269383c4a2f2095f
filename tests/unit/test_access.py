"""Who acts, through which connection (``community_api/access.py``), at the edges the routes' own tests
reach only through a race: a key read just before its connection was removed, a key holding no scope, a
connection header padded with spaces."""

from __future__ import annotations

import attrs
import pytest

from community_api import access
from community_api.errors import Forbidden, NotFound
from community_api.model import ApiKey
from tests.unit.world_support import Ready


def key_record(ready: Ready, key_id: str) -> ApiKey:
    key = ready.world.store.get_key(key_id)
    assert key is not None
    return key


def test_a_bound_key_read_just_before_its_connection_was_removed_names_nothing(ready: Ready) -> None:
    """A request authenticates its key, then the owner removes the connection the key is bound to (which
    revokes the key, one step too late for this request): it answers 404, never a 500 or another
    connection's data."""
    world, browser = ready.world, ready.browser
    bob = world.link(browser, handle="bob")
    minted = world.mint(browser, connection_id=bob["id"])
    stale = key_record(ready, minted["id"])  # as the request read it
    removed = world.client.simulate_delete(f"/v1/connections/{bob['id']}", headers=browser.headers())
    assert removed.status_code == 204, removed.text
    with pytest.raises(NotFound, match="the connection this key is bound to no longer exists"):
        access.actor_for(world.store, stale, "posts:read", None)


def test_a_key_holding_no_scope_may_do_nothing(ready: Ready) -> None:
    key = attrs.evolve(ready.world.store.list_keys(ready.browser.account["id"])[0], scopes=())
    with pytest.raises(Forbidden) as refused:
        access.actor_for(ready.world.store, key, "posts:read", None)
    assert refused.value.details == {"requiredScope": "posts:read"}


@pytest.mark.parametrize("padding", ["", " ", "  \t"])
def test_the_connection_header_is_read_without_its_padding(ready: Ready, padding: str) -> None:
    world, browser = ready.world, ready.browser
    bob = world.link(browser, handle="bob")
    key = key_record(ready, world.mint(browser)["id"])
    assert access.actor_for(world.store, key, "posts:read", f"{padding}{bob['id']}{padding}").connection.id == bob["id"]
    # Only padding is no connection named: the active one (alice's, linked first).
    active = access.actor_for(world.store, key, "posts:read", padding or None).connection
    assert active.id == ready.connection["id"]
