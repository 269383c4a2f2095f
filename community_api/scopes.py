"""Scope names and which are granted when a key is minted without a list (DESIGN §2)."""

from __future__ import annotations

from collections.abc import Iterable

from community_api.errors import InvalidRequest

GROUPS_READ = "groups:read"
POSTS_READ = "posts:read"
COMMENTS_READ = "comments:read"
DMS_READ = "dms:read"
POSTS_WRITE = "posts:write"
COMMENTS_WRITE = "comments:write"
DMS_WRITE = "dms:write"

ALL_SCOPES: tuple[str, ...] = (
    GROUPS_READ,
    POSTS_READ,
    COMMENTS_READ,
    DMS_READ,
    POSTS_WRITE,
    COMMENTS_WRITE,
    DMS_WRITE,
)
# Write scopes and dms:read act as the account or read its private inbox: granted only when asked for.
DEFAULT_SCOPES: tuple[str, ...] = (GROUPS_READ, POSTS_READ, COMMENTS_READ)
OPT_IN_SCOPES: frozenset[str] = frozenset(ALL_SCOPES) - frozenset(DEFAULT_SCOPES)


def normalise_scopes(requested: Iterable[str] | None) -> tuple[str, ...]:
    """The scopes a new key gets: the defaults when none are asked for, else exactly those asked for,
    in canonical order. Unknown names and an empty list are refused."""
    if requested is None:
        return DEFAULT_SCOPES
    wanted = list(requested)
    if not wanted:
        raise InvalidRequest("scopes must name at least one scope", field="scopes", allowed=list(ALL_SCOPES))
    unknown = sorted({s for s in wanted if s not in ALL_SCOPES})
    if unknown:
        raise InvalidRequest(
            f"unknown scope: {', '.join(unknown)}", field="scopes", unknown=unknown, allowed=list(ALL_SCOPES)
        )
    return tuple(s for s in ALL_SCOPES if s in wanted)
