"""Who the connected account is, its groups, and a group's metadata with its labels."""

from __future__ import annotations

from community_api.access import Actor
from community_api.deps import Deps, marking_expiry
from community_api.model import Group, PlatformUser


def whoami(deps: Deps, actor: Actor) -> PlatformUser:
    """The connected platform account (id, handle, name): lets a client tell its own posts apart."""
    with marking_expiry(deps, actor.connection.id):
        return deps.gateway.whoami(actor.session)


def list_groups(deps: Deps, actor: Actor) -> list[Group]:
    with marking_expiry(deps, actor.connection.id):
        return deps.gateway.list_groups(actor.session)


def get_group(deps: Deps, actor: Actor, group: str) -> Group:
    with marking_expiry(deps, actor.connection.id):
        return deps.gateway.get_group(actor.session, group)
