"""The OpenAPI 3.1 document of every live route, served at ``GET /v1/openapi.json``.

The data operations are generated from the operation table (``adapters/operations.py``): ``operationId`` is
the MCP tool's name, each parameter and body field carries the tool's own schema (its limits, patterns,
enums and defaults), and each answer refers to named components (``Post``, ``Comment``, ``Group``…)
generated from the core's attrs classes, shared by every operation that answers them — what client
generators turn into typed classes. The management routes are described in ``openapi_management.py``,
their bodies and answers from the core's attrs classes; the OAuth routes an MCP connector uses in
``openapi_oauth.py``; what they all share in ``openapi_parts.py``.

A test compares the document with the app's route table (nothing missing, nothing extra, no Planned
route), so it is kept true by CI rather than by memory.
"""

from __future__ import annotations

import json
from typing import Any

import falcon

from adapters.http.auth import CSRF_HEADER
from adapters.http.openapi_management import paths_of_management
from adapters.http.openapi_oauth import oauth_paths
from adapters.http.openapi_parts import (
    CONNECTION_PARAM,
    ERROR,
    OBJECT,
    RATE_LIMITED,
    STRING,
    UNAVAILABLE,
    json_content,
)
from adapters.operation import Operation
from adapters.operations import OPERATIONS
from adapters.schemas import Refs, result_schema

# What an error's details may say, for a client (or an agent) that acts on them rather than on the message:
# the common members, each present only where it applies; others appear beside them (``maxLength``,
# ``pattern``, ``maxLiveKeys``…), so the object stays open.
ERROR_DETAILS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "field": {**STRING, "description": "The body field (or MCP argument) refused."},
        "parameter": {**STRING, "description": "The query parameter refused."},
        "fields": {
            "type": "array",
            "items": STRING,
            "description": "Every field of a rule on how fields combine (exactly one of to and conversationId).",
        },
        "unknown": {
            "type": "array",
            "items": STRING,
            "description": "Names (or scope names) sent that are not taken, at most five repeated.",
        },
        "allowed": {
            "type": "array",
            "items": {"anyOf": [STRING, OBJECT]},
            "description": "What is taken instead: names, or labels with their id.",
        },
        "reason": {
            **STRING,
            "description": "Which limit or conflict: dm_throttle, read_pace, write_pace, platform_hold, busy; "
            "in_progress, different_request, never_finished.",
        },
        "retryAfter": {"type": "integer", "minimum": 1, "description": "Seconds to wait, as Retry-After says."},
        "requiredScope": {**STRING, "description": "The scope the key lacks."},
        "outcomeUnknown": {
            "type": "boolean",
            "description": "The platform may have acted: look before sending again under a new Idempotency-Key.",
        },
    },
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
    parameters: list[dict[str, Any]] = [CONNECTION_PARAM]
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
            else {"description": "success", "content": json_content(result_schema(spec.result, refs))},
            "429": RATE_LIMITED,
            "503": UNAVAILABLE,
            "default": {"description": "error", "content": json_content(ERROR)},
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
        operation["requestBody"] = {"required": True, "content": json_content(body_schema)}
    return operation


def document() -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    refs: Refs = {}
    for spec in OPERATIONS:
        paths.setdefault(spec.http.path, {})[spec.http.method.lower()] = _data_operation(spec, refs)
    paths_of_management(paths, refs)
    paths.update(oauth_paths())
    return {
        "openapi": "3.1.0",
        "info": {"title": "Community Data API", "version": "1"},
        "paths": paths,
        "components": {
            "securitySchemes": {
                "apiKey": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An API key (`cda_…`; on /v1/mcp an OAuth access token too), in "
                    "`Authorization: Bearer …` only (never in the URL), and once: the header sent twice answers "
                    "400 invalid_request.",
                },
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
                            "properties": {"code": STRING, "message": STRING, "details": ERROR_DETAILS},
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
