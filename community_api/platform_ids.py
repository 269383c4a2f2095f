"""What a caller may use to name something on the platform, checked before any gateway sees it.

Caller input is data: an id, slug, label or cursor from a client (REST or MCP) must never change which
platform route is called or what query it carries. An agent can be talked into passing a crafted id
(``../self/chat-channels?x=``) by text it read, so every value that names something on the platform is
held to the shape the platform itself uses (PLATFORM.md, "Hosts"), here, in one place:

- a platform identifier (group, post, comment, user, label, conversation, message) is 32 lowercase hex
  characters, as in every captured payload;
- a group is named by its id or its slug; the platform writes slugs in ``[a-z0-9-]`` (an id is also a
  valid slug-shaped name, and the gateway tells them apart by looking the group up);
- a label is named by its id or its name; a name is only ever compared with the group's own labels,
  never put into a URL, so it is only held to being short, readable text.

Two kinds of refusal, because they mean different things to a client:
- a path segment that cannot be an id names nothing: ``NotFound`` (404), exactly as an unknown id;
- a body or query field that cannot be one is a bad request: ``InvalidRequest`` naming the field (400).

REST resources and MCP tools both reach these checks through the use cases; the MCP and OpenAPI
schemas publish the same patterns so that agents and generated clients see the rule up front. The
gateway still percent-encodes every path segment: these checks are the first line, not the only one.
"""

from __future__ import annotations

import re

from community_api.errors import InvalidRequest, NotFound

PLATFORM_ID_LENGTH = 32
PLATFORM_ID_PATTERN = r"^[0-9a-f]{32}$"
# A slug: lowercase letters, digits and dashes, starting and ending with a letter or digit.
MAX_SLUG = 100
GROUP_PATTERN = r"^[a-z0-9](?:[a-z0-9-]{0,98}[a-z0-9])?$"
MAX_LABEL_NAME = 100

_PLATFORM_ID = re.compile(PLATFORM_ID_PATTERN.strip("^$"))
_GROUP = re.compile(GROUP_PATTERN.strip("^$"))

ID_HINT = "32 lowercase hexadecimal characters"
GROUP_HINT = "a group id or slug (lowercase letters, digits and dashes)"
# What a refusal of a body or query field says of it, after its name.
ID_PROBLEM = f"must be an id of {ID_HINT}"
GROUP_PROBLEM = f"must be {GROUP_HINT}"


def is_platform_id(value: object) -> bool:
    return isinstance(value, str) and _PLATFORM_ID.fullmatch(value) is not None


def is_group_name(value: object) -> bool:
    return isinstance(value, str) and _GROUP.fullmatch(value) is not None


# --- path segments: a value that cannot be an id names nothing (404) -----------------------------


def path_id(value: str, what: str) -> str:
    """A platform id taken from a URL path (or an MCP argument standing for one)."""
    if not is_platform_id(value):
        raise NotFound(f"{what} not found: ids are {ID_HINT}")
    return value


def path_group(value: str) -> str:
    if not is_group_name(value):
        raise NotFound(f"group not found: a group is named by {GROUP_HINT}")
    return value


# --- fields of a body or query: a bad one is a bad request naming the field (400) ----------------


def field_group(value: str | None) -> str | None:
    """An optional ``group`` named in a query or a tool's argument: empty is not given (a query string's empty
    value, an agent's "")."""
    if value is None or value == "":
        return None
    if not is_group_name(value):
        raise InvalidRequest(f"group {GROUP_PROBLEM}", field="group", pattern=GROUP_PATTERN)
    return value
