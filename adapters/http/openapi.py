"""The OpenAPI 3.1 document of every live route, served at ``GET /v1/openapi.json``.

The data operations are generated from the operation table (``adapters/operations.py``): ``operationId`` is
the MCP tool's name, each parameter and body field carries the tool's own schema (its limits, patterns,
enums and defaults), and each answer refers to named components (``Post``, ``Comment``, ``Group``…)
generated from the core's attrs classes, shared by every operation that answers them — what client
generators turn into typed classes. The management routes are described in ``ROUTES`` below, their bodies
and answers from the core's attrs classes; the OAuth routes an MCP connector uses in ``openapi_oauth.py``.

A test compares the document with the app's route table (nothing missing, nothing extra, no Planned
route), so it is kept true by CI rather than by memory.
"""

from __future__ import annotations

import json
from typing import Any

import falcon

from adapters.commands import command_schema
from adapters.http.auth import CONNECTION_HEADER, CSRF_HEADER
from adapters.http.errors import SAFE_METHODS
from adapters.http.openapi_mcp import MCP_MESSAGE, mcp_responses
from adapters.http.openapi_oauth import oauth_paths
from adapters.operations import OPERATIONS, Operation
from adapters.schemas import Fields, ListOf, Refs, Result, WithSecret, result_schema
from community_api import account_lifecycle, accounts, connections, keys
from community_api.commands import FILLED_PATTERN
from community_api.me import Me
from community_api.model import Account, ApiKey, Connection

_ERROR = {"$ref": "#/components/schemas/Error"}
# A limit reached: every data operation (the connected account's platform pace, its calls in progress, the
# platform's own 429, the DM throttle) and the management routes below. The wait is in a header as well
# as in the body, so that a client need not read the body to back off.
_RATE_LIMITED = {
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
    "content": {"application/json": {"schema": _ERROR}},
}
_OBJECT: dict[str, Any] = {"type": "object"}
_STR = {"type": "string"}


def _param(name: str, where: str = "query", schema: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {"name": name, "in": where, "required": where == "path", "schema": schema or {"type": "string"}, **extra}


def _query(command: type) -> list[dict[str, Any]]:
    """The query parameters of a management route: its command's fields, read as schemas."""
    schema = command_schema(command)
    params = []
    for name, field in schema["properties"].items():
        described = {"description": field.pop("description")} if "description" in field else {}
        params.append(_param(name, schema=field, required=name in schema["required"], **described))
    return params


def _body(command: type, *, required: tuple[str, ...] = (), optional: bool = False, **extra: Any) -> dict[str, Any]:
    """A request body: the core's command it is structured into (``adapters/commands.py``), read as a schema,
    so its types and limits are the ones the core checks. ``required``: fields the route needs although
    the command lets them be missing (the core then answers with a refusal of its own, such as 403).
    ``optional``: the resource reads a missing body as ``{}`` (``read_json(..., allow_empty=True)``).
    ``extra``: what the core checks across fields (``oneOf``), added to the schema."""
    schema = command_schema(command)
    schema["required"] = [*schema["required"], *required]
    schema.update(extra)
    return {"required": not optional, "content": {"application/json": {"schema": schema}}}


# A field given: present and not blank (a blank one is one not given: ``blank_as_none``).
_FILLED = {"pattern": FILLED_PATTERN}


def _given(*names: str) -> dict[str, Any]:
    return {"required": list(names), "properties": dict.fromkeys(names, _FILLED)}


# Linking takes the platform account's email and password, or a session token: exactly one of the two
# forms (``connections.link_connection``, which refuses any other body with a message of its own).
_LINK_FORMS = [
    {**_given("email", "password"), "not": _given("sessionToken")},
    {**_given("sessionToken"), "not": {"anyOf": [_given("email"), _given("password")]}},
]


_KEY_ID = _param(
    "key_id", "path", description="The key's id (`key_…`), as minting answers it and `GET /v1/me` lists it."
)
_CONNECTION_ID = _param(
    "connection_id",
    "path",
    description="The connection's id (`con_…`), as linking answers it and `GET /v1/me` lists it.",
)
_CONNECTION = _param(CONNECTION_HEADER, "header", description="Connection to act through (unbound keys only).")
# A web-session request that changes something echoes the session's CSRF token (``web_session`` in
# ``auth.py``); a cookie alone, which a browser attaches to any site's request, is not enough.
_CSRF = _param(
    CSRF_HEADER,
    "header",
    required=True,
    description="The session's CSRF token: the `csrfToken` that signing in (`POST /v1/session`) answered.",
)

# (method, path, summary, security: "key:<scope>" | "session" | "none", parameters, body, success status)
ROUTES: list[tuple[str, str, str, str, list[dict[str, Any]], dict[str, Any] | None, int]] = [
    (
        "POST",
        "/v1/accounts",
        "Create an account",
        "none",
        [],
        _body(accounts.NewAccount),
        201,
    ),
    (
        "POST",
        "/v1/session",
        "Sign in (sets the session cookie)",
        "none",
        [],
        _body(accounts.Credentials),
        200,
    ),
    ("DELETE", "/v1/session", "Sign out", "session", [], None, 204),
    ("GET", "/v1/connections", "List connections", "session", [], None, 200),
    (
        "POST",
        "/v1/connections",
        "Link a platform account (one at a time per account: 429 busy while another is in progress)",
        "session",
        [],
        _body(connections.LinkRequest, oneOf=_LINK_FORMS),
        201,
    ),
    (
        "DELETE",
        "/v1/connections/{connection_id}",
        "Unlink a platform account: its session erased, the keys bound to it revoked",
        "session",
        [_CONNECTION_ID],
        None,
        204,
    ),
    (
        "POST",
        "/v1/keys",
        f"Mint a key (the value is shown once); 409 when the account holds {keys.MAX_LIVE_KEYS} live keys already",
        "session",
        [],
        _body(keys.NewKey, optional=True),
        201,
    ),
    (
        "POST",
        "/v1/keys/{key_id}/rotate",
        "Rotate a key (24-hour grace for the old one)",
        "session",
        [_KEY_ID, *_query(keys.KeyRotation)],
        None,
        201,
    ),
    ("DELETE", "/v1/keys/{key_id}", "Revoke a key at once", "session", [_KEY_ID], None, 204),
    ("GET", "/v1/me", "The account, connections, keys and usage", "session", [], None, 200),
    (
        "DELETE",
        "/v1/me",
        "Delete the account: keys and grants revoked, connections and their platform sessions erased "
        "(403 for a wrong password; 429 after five wrong ones from this session in 15 minutes)",
        "session",
        [],
        _body(account_lifecycle.AccountDeletion, required=("password",)),
        204,
    ),
    (
        "POST",
        "/v1/me/password",
        "Change the password; every other web session ends, and this one goes on under a new session cookie "
        "(set by the answer; its CSRF token is kept). 403 for a wrong current password; 429 after five wrong "
        "ones from this session in 15 minutes",
        "session",
        [],
        _body(account_lifecycle.PasswordChange),
        204,
    ),
    (
        "DELETE",
        "/v1/sessions",
        "Sign out everywhere: every web session ends, this one included",
        "session",
        [],
        None,
        204,
    ),
    (
        "POST",
        "/v1/mcp",
        "The remote MCP server (Streamable HTTP, JSON-RPC); tools are listed per the key's scopes",
        "key:",
        [],
        {"required": True, "content": {"application/json": {"schema": MCP_MESSAGE}}},
        200,
    ),
    ("GET", "/v1/openapi.json", "This document", "none", [], None, 200),
]


# The management routes' operationIds, as a generated client names its functions.
OPERATION_IDS = {
    ("POST", "/v1/accounts"): "create_account",
    ("POST", "/v1/session"): "sign_in",
    ("DELETE", "/v1/session"): "sign_out",
    ("GET", "/v1/connections"): "list_connections",
    ("POST", "/v1/connections"): "link_connection",
    ("DELETE", "/v1/connections/{connection_id}"): "unlink_connection",
    ("POST", "/v1/keys"): "mint_key",
    ("POST", "/v1/keys/{key_id}/rotate"): "rotate_key",
    ("DELETE", "/v1/keys/{key_id}"): "revoke_key",
    ("GET", "/v1/me"): "get_me",
    ("DELETE", "/v1/me"): "delete_account",
    ("POST", "/v1/me/password"): "change_password",
    ("DELETE", "/v1/sessions"): "end_other_sessions",
    ("POST", "/v1/mcp"): "mcp",
    ("GET", "/v1/openapi.json"): "get_openapi",
}


# The management routes that answer 429: sign-up and sign-in (their guards), linking (its guard, one link at
# a time), and the two that ask for the password again (counted per session).
RATE_LIMITED_ROUTES = {
    ("POST", "/v1/accounts"),
    ("POST", "/v1/session"),
    ("POST", "/v1/connections"),
    ("DELETE", "/v1/me"),
    ("POST", "/v1/me/password"),
}


# What the management routes answer, written from the same attrs classes as the data operations' answers.
RESULTS: dict[tuple[str, str], Result] = {
    ("POST", "/v1/accounts"): Fields({"account": Account}),
    ("POST", "/v1/session"): Fields({"account": Account, "csrfToken": str}),
    ("GET", "/v1/connections"): ListOf("connections", Connection),
    ("POST", "/v1/connections"): Connection,
    ("POST", "/v1/keys"): WithSecret(ApiKey),
    ("POST", "/v1/keys/{key_id}/rotate"): WithSecret(ApiKey),
    ("GET", "/v1/me"): Me,
}


# OpenAPI links: where a data operation's answer names what another operation takes in its path, so that
# a client, or a tool such as schemathesis, can go from a feed to a post, or from a new post to its comments.
# (operation: {path field: JSON pointer into its answer}); a list names its first item.
ANSWER_NAMES: dict[str, dict[str, str]] = {
    "list_groups": {"gid": "/groups/0/id"},
    "get_group": {"gid": "/id"},
    "get_feed": {"post_id": "/posts/0/id"},
    "get_post": {"post_id": "/post/id", "comment_id": "/comments/0/id"},
    "list_comments": {"comment_id": "/comments/0/id"},
    "create_post": {"post_id": "/id"},
    "create_comment": {"comment_id": "/id"},
    "list_dms": {"conversation_id": "/conversations/0/id"},
    "get_dm_thread": {"conversation_id": "/conversation/id"},
    "send_dm": {"conversation_id": "/conversation/id"},
}


def links(spec: Operation) -> dict[str, Any]:
    """The links of ``spec``'s answer: each other operation whose path fields all have a value in it."""
    names = ANSWER_NAMES.get(spec.name, {})
    found: dict[str, Any] = {}
    for other in OPERATIONS:
        fields = [name for _, name in other.path_args()]
        if other is spec or not fields or not set(fields) <= set(names):
            continue
        found[other.name] = {
            "operationId": other.name,
            "parameters": {field: f"$response.body#{names[field]}" for field in fields},
        }
    return found


def _data_operation(spec: Operation, refs: Refs) -> dict[str, Any]:
    """One data operation, from its entry in the operation table."""
    http = spec.http
    schema = spec.input_schema
    required = set(schema.get("required", []))
    parameters: list[dict[str, Any]] = [_CONNECTION]
    in_body = spec.body_fields()  # the registry's own rule for what REST takes in the body
    body: dict[str, Any] = {}
    for arg, arg_schema in schema["properties"].items():
        if arg in in_body:
            body[arg] = arg_schema
            continue
        field = {k: v for k, v in arg_schema.items() if k != "description"}
        described = {"description": arg_schema["description"]} if "description" in arg_schema else {}
        if arg == "idempotencyKey":
            parameters.append(
                {"name": "Idempotency-Key", "in": "header", "required": False, "schema": field, **described}
            )
        elif arg in http.where:
            where, name = http.where[arg]
            parameters.append(
                {
                    "name": name,
                    "in": where,
                    "required": where == "path" or arg in required,
                    "schema": field,
                    **described,
                }
            )
        else:
            parameters.append({"name": arg, "in": "query", "required": arg in required, "schema": field, **described})
    operation: dict[str, Any] = {
        "operationId": spec.name,
        "summary": spec.title,
        "description": spec.description,
        "tags": ["data"],
        "security": [{"apiKey": [spec.scope]}],
        "parameters": parameters,
        "responses": {
            str(http.status): {"description": "success"}
            if http.status == 204
            else {"description": "success", "content": _json(result_schema(spec.result, refs))},
            "429": _RATE_LIMITED,
            "default": {"description": "error", "content": _json(_ERROR)},
        },
    }
    linked = links(spec)
    if linked:
        operation["responses"][str(http.status)]["links"] = linked
    if body:
        body_schema: dict[str, Any] = {
            "type": "object",
            "properties": body,
            "required": [name for name in body if name in required],
            "additionalProperties": False,
        }
        alternatives = schema.get("oneOf")
        if alternatives and all(set(option["required"]) <= set(body) for option in alternatives):
            body_schema["oneOf"] = alternatives  # send_dm: exactly one recipient form
        operation["requestBody"] = {"required": True, "content": _json(body_schema)}
    return operation


def _answer(method: str, path: str, refs: Refs) -> dict[str, Any]:
    result = RESULTS.get((method, path))
    return _OBJECT if result is None else result_schema(result, refs)


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def document() -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    refs: Refs = {}
    for spec in OPERATIONS:
        paths.setdefault(spec.http.path, {})[spec.http.method.lower()] = _data_operation(spec, refs)
    for method, path, summary, security, parameters, body, status in ROUTES:
        operation: dict[str, Any] = {
            "operationId": OPERATION_IDS[(method, path)],
            "tags": ["mcp" if path == "/v1/mcp" else "meta" if path == "/v1/openapi.json" else "account"],
            "summary": summary,
            "parameters": ([_CONNECTION] if security.startswith("key:") else [])
            + ([_CSRF] if security == "session" and method not in SAFE_METHODS else [])
            + parameters,
            "responses": {
                str(status): {"description": "success"}
                if status == 204
                else {"description": "success", "content": _json(_answer(method, path, refs))},
                "default": {"description": "error", "content": {"application/json": {"schema": _ERROR}}},
            },
        }
        if (method, path) in RATE_LIMITED_ROUTES:
            operation["responses"]["429"] = _RATE_LIMITED
        if path == "/v1/mcp":
            operation["responses"] = mcp_responses(_ERROR)
        if security.startswith("key:"):
            operation["security"] = [{"apiKey": [security[4:]] if security[4:] else []}]
        elif security == "session":
            operation["security"] = [{"webSession": []}]
        else:
            operation["security"] = []
        if body is not None:
            operation["requestBody"] = body
        paths.setdefault(path, {})[method.lower()] = operation
    paths.update(oauth_paths())
    return {
        "openapi": "3.1.0",
        "info": {"title": "Community Data API", "version": "1"},
        "paths": paths,
        "components": {
            "securitySchemes": {
                "apiKey": {"type": "http", "scheme": "bearer"},
                "webSession": {
                    "type": "apiKey",
                    "in": "cookie",
                    "name": "cda_session",
                    "description": f"The cookie that signing in (`POST /v1/session`) sets. A request that changes "
                    f"something also sends {CSRF_HEADER}: the `csrfToken` that signing in answered.",
                },
            },
            "schemas": {
                **dict(sorted(refs.items())),
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {
                        "error": {
                            "type": "object",
                            "required": ["code", "message", "details"],
                            "properties": {"code": _STR, "message": _STR, "details": _OBJECT},
                        }
                    },
                },
            },
        },
    }


class OpenApiResource:
    def __init__(self) -> None:
        self._text = json.dumps(document())

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.content_type = falcon.MEDIA_JSON
        resp.text = self._text
