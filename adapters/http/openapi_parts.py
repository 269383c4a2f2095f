"""Pieces of the OpenAPI document that the data operations (``openapi.py``) and the management routes
(``openapi_management.py``) share: the error answer, the 429 with its ``Retry-After`` (and the 503 with
one when the wait is known), the headers every
key or session request may carry, and how a parameter and a JSON body are written."""

from __future__ import annotations

from typing import Any

from adapters.http.auth import CONNECTION_HEADER, CSRF_HEADER
from community_api.accounts import CSRF_TOKEN_PATTERN
from community_api.ids import own_id_pattern

ERROR = {"$ref": "#/components/schemas/Error"}
# A limit reached: every data operation (the connected account's platform pace, its calls in progress, the
# platform's own 429, the DM throttle) and the management routes that say so. The wait is in a header as well
# as in the body, so that a client need not read the body to back off.
RATE_LIMITED = {
    "description": "rate_limited: a limit was reached; nothing was done. Wait Retry-After seconds (also "
    "details.retryAfter) before trying again; details.reason names the limit where there are several "
    "(dm_throttle, read_pace, write_pace, platform_hold, busy).",
    "headers": {
        "Retry-After": {
            "description": "Seconds to wait before trying again.",
            "required": True,
            "schema": {"type": "integer", "minimum": 1},
        }
    },
    "content": {"application/json": {"schema": ERROR}},
}
# Every data operation may find no browser free or the platform silent (platform_unavailable), or the
# service's storage unwritable (service_unavailable). When the service knows how long to wait, it says so.
UNAVAILABLE = {
    "description": "platform_unavailable: no browser was free (nothing was sent; Retry-After says when to try "
    "again), or the platform did not answer in time (after a write, details.outcomeUnknown: look first whether "
    "it was done); service_unavailable: the service cannot write its storage (Retry-After).",
    "headers": {
        "Retry-After": {
            "description": "Seconds to wait before trying again, when the service knows (also details.retryAfter).",
            "required": False,
            "schema": {"type": "integer", "minimum": 1},
        }
    },
    "content": {"application/json": {"schema": ERROR}},
}
OBJECT: dict[str, Any] = {"type": "object"}
STRING = {"type": "string"}


def param(name: str, where: str = "query", schema: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {"name": name, "in": where, "required": where == "path", "schema": schema or {"type": "string"}, **extra}


def json_content(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


# Empty is allowed: a header sent blank is one not sent (``access.select_connection``); an HTTP server strips
# the blanks around a value, so none reach the service. A value of another shape answers 404, two ids joined
# by a comma (the header sent twice) 400.
CONNECTION_PARAM = param(
    CONNECTION_HEADER,
    "header",
    schema={"type": "string", "pattern": "^$|" + own_id_pattern("con")},
    description="Connection to act through (unbound keys only): a `con_…` id, as linking answers it.",
)
# On ``/v1/mcp`` the header is read by each tool call, which answers the same refusals as a tool error; a
# message that calls no tool (``initialize``, a notification) is answered whatever the header holds, so the
# document gives no pattern there.
MCP_CONNECTION_PARAM = param(
    CONNECTION_HEADER,
    "header",
    description="Connection each tool call acts through (unbound keys only): a `con_…` id. A tool call with "
    "an id of another shape, or of no connection of the key's account, answers a not_found tool error.",
)
# A web-session request that changes something echoes the session's CSRF token (``web_session`` in
# ``auth.py``); a cookie alone, which a browser attaches to any site's request, is not enough.
CSRF_PARAM = param(
    CSRF_HEADER,
    "header",
    # ``accounts.new_session``: 32 random bytes, base64url. Two joined by a comma (sent twice) answer 400,
    # any other wrong one 403.
    {"type": "string", "pattern": CSRF_TOKEN_PATTERN},
    required=True,
    description="The session's CSRF token: the `csrfToken` that signing in (`POST /v1/session`) answered.",
)
