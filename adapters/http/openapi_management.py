"""The management routes in the OpenAPI document (accounts, the web session, connections, keys, the MCP
endpoint and the document itself): what each takes, from the core's commands, and what each answers, from
the core's attrs classes. ``openapi.py`` puts them beside the data operations."""

from __future__ import annotations

from typing import Any

from adapters.commands import command_schema
from adapters.http.errors import SAFE_METHODS
from adapters.http.openapi_mcp import MCP_MESSAGE, mcp_responses
from adapters.http.openapi_parts import (
    CSRF_PARAM,
    ERROR,
    MCP_CONNECTION_PARAM,
    OBJECT,
    RATE_LIMITED,
    json_content,
    param,
)
from adapters.schemas import Fields, ListOf, Refs, Result, WithSecret, result_schema
from community_api import account_lifecycle, accounts, connections, keys
from community_api.commands import FILLED_PATTERN
from community_api.ids import own_id_pattern
from community_api.me import Me
from community_api.model import Account, ApiKey, Connection


def _query(command: type) -> list[dict[str, Any]]:
    """The query parameters of a management route: its command's fields, read as schemas."""
    schema = command_schema(command)
    params = []
    for name, field in schema["properties"].items():
        described = {"description": field.pop("description")} if "description" in field else {}
        params.append(param(name, schema=field, required=name in schema["required"], **described))
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


_KEY_ID = param(
    "key_id",
    "path",
    {"type": "string", "pattern": own_id_pattern("key")},
    description="The key's id (`key_…`), as minting answers it and `GET /v1/me` lists it.",
)
_CONNECTION_ID = param(
    "connection_id",
    "path",
    {"type": "string", "pattern": own_id_pattern("con")},
    description="The connection's id (`con_…`), as linking answers it and `GET /v1/me` lists it.",
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
        "/v1/connections/{connection_id}/activate",
        "Make a connection the active one: the one unbound keys act as when a request names none "
        "(X-Community-Connection)",
        "session",
        [_CONNECTION_ID],
        None,
        200,
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
    ("POST", "/v1/connections/{connection_id}/activate"): "activate_connection",
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
    ("POST", "/v1/connections/{connection_id}/activate"): Connection,
    ("POST", "/v1/keys"): WithSecret(ApiKey),
    ("POST", "/v1/keys/{key_id}/rotate"): WithSecret(ApiKey),
    ("GET", "/v1/me"): Me,
}


def _answer(method: str, path: str, refs: Refs) -> dict[str, Any]:
    result = RESULTS.get((method, path))
    return OBJECT if result is None else result_schema(result, refs)


def paths_of_management(paths: dict[str, dict[str, Any]], refs: Refs) -> None:
    """Add every management route to ``paths``."""
    for method, path, summary, security, parameters, body, status in ROUTES:
        operation: dict[str, Any] = {
            "operationId": OPERATION_IDS[(method, path)],
            "tags": ["mcp" if path == "/v1/mcp" else "meta" if path == "/v1/openapi.json" else "account"],
            "summary": summary,
            "parameters": ([MCP_CONNECTION_PARAM] if path == "/v1/mcp" else [])
            + ([CSRF_PARAM] if security == "session" and method not in SAFE_METHODS else [])
            + parameters,
            "responses": {
                str(status): {"description": "success"}
                if status == 204
                else {"description": "success", "content": json_content(_answer(method, path, refs))},
                "default": {"description": "error", "content": {"application/json": {"schema": ERROR}}},
            },
        }
        if (method, path) in RATE_LIMITED_ROUTES:
            operation["responses"]["429"] = RATE_LIMITED
        if path == "/v1/mcp":
            operation["responses"] = mcp_responses(ERROR)
        if security.startswith("key:"):
            operation["security"] = [{"apiKey": [security[4:]] if security[4:] else []}]
        elif security == "session":
            operation["security"] = [{"webSession": []}]
        else:
            operation["security"] = []
        if body is not None:
            operation["requestBody"] = body
        paths.setdefault(path, {})[method.lower()] = operation
