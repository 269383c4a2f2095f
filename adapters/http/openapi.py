"""The OpenAPI 3.1 document of every live route, served at ``GET /v1/openapi.json``.

A test compares it with the app's route table (nothing missing, nothing extra, no Planned route), so
this table is kept true by CI rather than by memory.
"""

from __future__ import annotations

import json
from typing import Any

import falcon

from community_api.feed import MAX_PAGES, SINCE_PATTERN, SORTS
from community_api.platform_ids import GROUP_PATTERN, ID_HINT, MAX_SLUG, PLATFORM_ID_PATTERN

_ERROR = {"$ref": "#/components/schemas/Error"}
_OBJECT: dict[str, Any] = {"type": "object"}


def _param(name: str, where: str = "query", schema: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {"name": name, "in": where, "required": where == "path", "schema": schema or {"type": "string"}, **extra}


def _body(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": properties,
                    "required": required,
                    "additionalProperties": False,
                }
            }
        },
    }


_STR = {"type": "string"}
# What names a thing on the platform (``community_api.platform_ids``): an id in a path that does not have
# this shape answers 404, a body or query field 400 naming it.
_ID = {"type": "string", "pattern": PLATFORM_ID_PATTERN, "description": f"A platform id: {ID_HINT}."}
_GROUP = {
    "type": "string",
    "pattern": GROUP_PATTERN,
    "maxLength": MAX_SLUG,
    "description": "A group id, or its slug (lowercase letters, digits and dashes).",
}
_POST_ID = _param("post_id", "path", schema=_ID)
_THREAD_CURSOR = _param("cursor", schema=_ID, description="A message id (nextCursor): older messages.")
_GID = _param("gid", "path", schema=_GROUP)
_GROUP_Q = _param("group", schema=_GROUP, description="Group id or slug of the post (optional).")
_IDEMPOTENCY = _param(
    "Idempotency-Key", "header", description="Retry-safe creation: the same key and body act once in 24 hours."
)
_CONNECTION = _param("X-Community-Connection", "header", description="Connection to act through (unbound keys only).")

# (method, path, summary, security: "key:<scope>" | "session" | "none", parameters, body, success status)
ROUTES: list[tuple[str, str, str, str, list[dict[str, Any]], dict[str, Any] | None, int]] = [
    ("GET", "/v1/whoami", "The connected platform account", "key:groups:read", [], None, 200),
    ("GET", "/v1/groups", "Groups of the connection", "key:groups:read", [], None, 200),
    ("GET", "/v1/groups/{gid}", "Group metadata and labels", "key:groups:read", [_GID], None, 200),
    (
        "GET",
        "/v1/groups/{gid}/posts",
        "The feed of a group",
        "key:posts:read",
        [
            _GID,
            _param("pages", schema={"type": "integer", "minimum": 1, "maximum": MAX_PAGES, "default": 1}),
            _param("sort", schema={"type": "string", "enum": list(SORTS), "default": "newest"}),
            _param("since", schema={"type": "string", "pattern": SINCE_PATTERN}),
        ],
        None,
        200,
    ),
    (
        "POST",
        "/v1/groups/{gid}/posts",
        "Publish a post as the connected account",
        "key:posts:write",
        [_GID, _IDEMPOTENCY],
        _body({"title": _STR, "content": _STR, "label": _STR}, ["title"]),
        201,
    ),
    (
        "GET",
        "/v1/posts/{post_id}",
        "A post with all its comments",
        "key:posts:read",
        [_POST_ID, _GROUP_Q],
        None,
        200,
    ),
    ("DELETE", "/v1/posts/{post_id}", "Delete a post", "key:posts:write", [_POST_ID], None, 204),
    (
        "GET",
        "/v1/posts/{post_id}/comments",
        "Comments of a post, flat",
        "key:comments:read",
        [_POST_ID, _GROUP_Q],
        None,
        200,
    ),
    (
        "POST",
        "/v1/posts/{post_id}/comments",
        "Comment on a post, or reply to a comment",
        "key:comments:write",
        [_POST_ID, _GROUP_Q, _IDEMPOTENCY],
        _body({"content": _STR, "parentId": _ID}, ["content"]),
        201,
    ),
    (
        "DELETE",
        "/v1/comments/{comment_id}",
        "Delete a comment",
        "key:comments:write",
        [_param("comment_id", "path", schema=_ID)],
        None,
        204,
    ),
    (
        "GET",
        "/v1/dms",
        "The DM inbox",
        "key:dms:read",
        [_param("cursor"), _param("awaitingReply", schema={"type": "boolean"})],
        None,
        200,
    ),
    (
        "POST",
        "/v1/dms",
        "Send a DM (throttled per connection: one per 30-45 s, 20 an hour, 100 a day)",
        "key:dms:write",
        [_param("group", schema=_GROUP, description="Group shared with `to`."), _IDEMPOTENCY],
        _body({"to": _ID, "conversationId": _ID, "content": _STR}, ["content"]),
        201,
    ),
    (
        "GET",
        "/v1/dms/{conversation_id}",
        "A DM thread, oldest to newest",
        "key:dms:read",
        [_param("conversation_id", "path", schema=_ID), _THREAD_CURSOR],
        None,
        200,
    ),
    (
        "POST",
        "/v1/accounts",
        "Create an account",
        "none",
        [],
        _body({"email": _STR, "password": _STR}, ["email", "password"]),
        201,
    ),
    (
        "POST",
        "/v1/session",
        "Sign in (sets the session cookie)",
        "none",
        [],
        _body({"email": _STR, "password": _STR}, ["email", "password"]),
        200,
    ),
    ("DELETE", "/v1/session", "Sign out", "session", [], None, 204),
    ("GET", "/v1/connections", "List connections", "session", [], None, 200),
    (
        "POST",
        "/v1/connections",
        "Link a platform account",
        "session",
        [],
        _body({"email": _STR, "password": _STR, "sessionToken": _STR, "active": {"type": "boolean"}}, []),
        201,
    ),
    (
        "POST",
        "/v1/keys",
        "Mint a key (the value is shown once)",
        "session",
        [],
        _body({"name": _STR, "scopes": {"type": "array", "items": _STR}, "connectionId": _STR}, []),
        201,
    ),
    (
        "POST",
        "/v1/keys/{key_id}/rotate",
        "Rotate a key (24-hour grace for the old one)",
        "session",
        [_param("key_id", "path"), _param("grace", schema={"type": "string", "enum": ["0", "24h"]})],
        None,
        201,
    ),
    ("DELETE", "/v1/keys/{key_id}", "Revoke a key at once", "session", [_param("key_id", "path")], None, 204),
    ("GET", "/v1/me", "The account, connections, keys and usage", "session", [], None, 200),
    (
        "DELETE",
        "/v1/me",
        "Delete the account: keys and grants revoked, connections and their platform sessions erased",
        "session",
        [],
        _body({"password": {"type": "string", "minLength": 1}}, ["password"]),
        204,
    ),
    (
        "POST",
        "/v1/me/password",
        "Change the password; every other web session ends",
        "session",
        [],
        _body(
            {
                "currentPassword": {"type": "string", "minLength": 1},
                "newPassword": {"type": "string", "minLength": 10, "maxLength": 1024},
            },
            ["currentPassword", "newPassword"],
        ),
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
        {"required": True, "content": {"application/json": {"schema": _OBJECT}}},
        200,
    ),
    ("GET", "/v1/openapi.json", "This document", "none", [], None, 200),
]


def document() -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for method, path, summary, security, parameters, body, status in ROUTES:
        operation: dict[str, Any] = {
            "summary": summary,
            "parameters": ([_CONNECTION] if security.startswith("key:") else []) + parameters,
            "responses": {
                str(status): {"description": "success"}
                if status == 204
                else {"description": "success", "content": {"application/json": {"schema": _OBJECT}}},
                "default": {"description": "error", "content": {"application/json": {"schema": _ERROR}}},
            },
        }
        if security.startswith("key:"):
            operation["security"] = [{"apiKey": [security[4:]] if security[4:] else []}]
        elif security == "session":
            operation["security"] = [{"webSession": []}]
        else:
            operation["security"] = []
        if body is not None:
            operation["requestBody"] = body
        paths.setdefault(path, {})[method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "Community Data API", "version": "1"},
        "paths": paths,
        "components": {
            "securitySchemes": {
                "apiKey": {"type": "http", "scheme": "bearer"},
                "webSession": {"type": "apiKey", "in": "cookie", "name": "cda_session"},
            },
            "schemas": {
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
                }
            },
        },
    }


class OpenApiResource:
    def __init__(self) -> None:
        self._text = json.dumps(document())

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.content_type = falcon.MEDIA_JSON
        resp.text = self._text
