"""The MCP endpoint in the OpenAPI document (``openapi.py``): it speaks JSON-RPC 2.0 (the Model Context
Protocol), not the service's own bodies. The message schema says what ``adapters/mcp/envelope.py`` lets
through to the transport: exactly one kind of message, ids that are strings or integers.
"""

from __future__ import annotations

from typing import Any

_STR: dict[str, Any] = {"type": "string"}
_OBJECT: dict[str, Any] = {"type": "object"}
_JSONRPC_ERROR = {
    "type": "object",
    "required": ["code", "message"],
    "properties": {"code": {"type": "integer"}, "message": _STR, "data": {}},
}
MCP_MESSAGE = {
    "type": "object",
    "description": "One JSON-RPC 2.0 message: a request (id and method), a notification (method, no id) or a "
    "response to the server (id, and result or error).",
    "required": ["jsonrpc"],
    "properties": {
        "jsonrpc": {"const": "2.0"},
        "id": {"type": ["string", "integer"]},
        "method": _STR,
        "params": _OBJECT,
        "result": _OBJECT,
        "error": _JSONRPC_ERROR,
    },
    # Exactly one kind: a request or notification carries no result or error, a response not both.
    "anyOf": [
        {"required": ["method"], "not": {"anyOf": [{"required": ["result"]}, {"required": ["error"]}]}},
        {"required": ["id", "result"], "not": {"anyOf": [{"required": ["method"]}, {"required": ["error"]}]}},
        {"required": ["id", "error"], "not": {"anyOf": [{"required": ["method"]}, {"required": ["result"]}]}},
    ],
}
_MCP_ANSWER = {
    "type": "object",
    "required": ["jsonrpc", "id"],
    "properties": {
        "jsonrpc": {"const": "2.0"},
        "id": {"type": ["string", "integer", "null"]},
        "result": _OBJECT,
        "error": _JSONRPC_ERROR,
    },
}


def mcp_responses(error: dict[str, Any]) -> dict[str, Any]:
    """The endpoint's answers: JSON-RPC for 200, 400 and 406; ``error`` (the service's error body) otherwise."""
    return {
        "200": {
            "description": "the answer to a request: its result or a JSON-RPC error (a tool that fails answers a "
            "result with isError true)",
            "content": {"application/json": {"schema": _MCP_ANSWER}},
        },
        "202": {"description": "a notification or a response, accepted"},
        "400": {"description": "not a JSON-RPC message", "content": {"application/json": {"schema": _MCP_ANSWER}}},
        "406": {
            "description": "the Accept header does not take application/json",
            "content": {"application/json": {"schema": _MCP_ANSWER}},
        },
        "default": {"description": "error", "content": {"application/json": {"schema": error}}},
    }
