"""Who the connected account is, its groups, and a group's metadata with its labels."""

from __future__ import annotations

from community_api.access import Actor
from community_api.deps import GROUP_READS, ONE_READ, Deps, on_platform
from community_api.model import Group, PlatformUser
from community_api.platform_ids import path_group


def whoami(deps: Deps, actor: Actor) -> PlatformUser:
    """The connected platform account (id, handle, name): lets a client tell its own posts apart."""
    with on_platform(deps, actor.connection, reads=ONE_READ):
        return deps.gateway.whoami(actor.session)


def list_groups(deps: Deps, actor: Actor) -> list[Group]:
    """The account's groups with their labels: one platform read admitted first, then one per group as the
    gateway asks for each group's labels (``platform_meter``)."""
    with on_platform(deps, actor.connection, reads=ONE_READ):
        return deps.gateway.list_groups(actor.session)


def get_group(deps: Deps, actor: Actor, group: str) -> Group:
    group = path_group(group)
    with on_platform(deps, actor.connection, reads=GROUP_READS):
        return deps.gateway.get_group(actor.session, group)
