"""Checking a JSON request body (from REST) or tool arguments (from MCP) against what a use case takes.

One function for both adapters, so a bad input gets the same ``invalid_request`` message whichever way
it came: a missing required field, a wrong type, an empty string or an unknown field (a typo such as
``conversationID`` must not be silently ignored when it decides who receives a message).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from community_api.errors import InvalidRequest


def check_body(
    body: object,
    *,
    required: Mapping[str, int] = {},  # noqa: B006 - read-only defaults
    optional: Mapping[str, int] = {},  # noqa: B006
) -> dict[str, str | None]:
    """Each field maps to its maximum length; every value must be a string (``None`` allowed for an
    optional field). Answers the fields given, stripped of nothing: content is the client's."""
    if not isinstance(body, Mapping):
        raise InvalidRequest("the request body must be a JSON object")
    unknown = sorted(set(body) - set(required) - set(optional))
    if unknown:
        raise InvalidRequest(f"unknown field: {', '.join(unknown)}", unknown=unknown)
    values: dict[str, str | None] = {}
    for name, limit in {**required, **optional}.items():
        value: Any = body.get(name)
        if value is None:
            if name in required:
                raise InvalidRequest(f"{name} is required", field=name)
            values[name] = None
            continue
        if not isinstance(value, str):
            raise InvalidRequest(f"{name} must be a string", field=name)
        if not value.strip():
            if name in required:
                raise InvalidRequest(f"{name} must not be empty", field=name)
            values[name] = None
            continue
        if len(value) > limit:
            raise InvalidRequest(f"{name} is longer than {limit} characters", field=name, maxLength=limit)
        values[name] = value
    return values
