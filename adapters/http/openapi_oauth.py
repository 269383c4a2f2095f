"""The OAuth routes in the OpenAPI document (``openapi.py``): what an MCP connector uses to get a token.

These speak OAuth's own wire, defined by RFCs rather than by this service: snake_case names, errors as
``{"error", "error_description"}`` (RFC 6749 §5.2), unknown client metadata ignored (RFC 7591 §2), the
token request form-encoded. So they are described here as those RFCs shape them, with the core's limits
(``oauth_clients``, ``oauth``), beside the registry rather than generated from it. The authorization
endpoint (``/oauth/authorize``) is the consent page a person sees, like the dashboard's pages: not an API.
"""

from __future__ import annotations

from typing import Any

from adapters.web.oauth_endpoints import (
    AUTHORIZATION_SERVER_PATH,
    PROTECTED_RESOURCE_PATHS,
    REGISTER_PATH,
    TOKEN_PATH,
)
from community_api import oauth_clients
from community_api.readable import READABLE_PATTERN
from community_api.scopes import ALL_SCOPES

_STR: dict[str, Any] = {"type": "string"}
_STRINGS: dict[str, Any] = {"type": "array", "items": _STR}
_FILLED: dict[str, Any] = {"type": "string", "minLength": 1}
_OAUTH_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {"error": _STR, "error_description": _STR},
}
_URI = {"type": "string", "format": "uri", "maxLength": oauth_clients.MAX_URI_LENGTH}

_REGISTRATION_REQUEST = {
    "type": "object",
    "required": ["redirect_uris"],
    "properties": {
        "redirect_uris": {
            "type": "array",
            "items": _URI,
            "minItems": 1,
            "maxItems": oauth_clients.MAX_REDIRECT_URIS,
            "description": "https URIs, or http on a loopback address (RFC 8252), or an app's own scheme.",
        },
        "client_name": {
            "type": "string",
            "pattern": READABLE_PATTERN,
            "description": f"Shown on the consent page; longer names are cut to {oauth_clients.MAX_CLIENT_NAME}.",
        },
        "grant_types": {
            **_STRINGS,
            "contains": {"const": "authorization_code"},
            "description": "Must include authorization_code when given.",
        },
        "response_types": {**_STRINGS, "contains": {"const": "code"}, "description": "Must include code when given."},
    },
    "additionalProperties": True,  # RFC 7591 §2: metadata the server does not use is ignored
}


def _answer(properties: dict[str, Any]) -> dict[str, Any]:
    """An answer's schema: every field it names is one the service always sends, so all are required (as
    in the data API's schemas), whatever the RFC calls optional: a generated client's attributes are then
    never optional."""
    return {"type": "object", "required": list(properties), "properties": properties}


_REGISTRATION = _answer(
    {
        "client_id": _STR,
        "client_id_issued_at": {"type": "integer"},
        "client_name": _STR,
        "redirect_uris": {"type": "array", "items": _STR},
        "grant_types": _STRINGS,
        "response_types": _STRINGS,
        "token_endpoint_auth_method": {"type": "string", "enum": ["none"]},
    }
)
_TOKEN_REQUEST = {
    "type": "object",
    "required": ["grant_type", "client_id"],
    "properties": {
        "grant_type": {"type": "string", "enum": ["authorization_code", "refresh_token"]},
        "client_id": _FILLED,
        "code": {**_FILLED, "description": "authorization_code: the code the redirect carried."},
        "redirect_uri": {
            **_FILLED,
            "description": "authorization_code: the redirect URI of the authorization request; required when"
            " that request named one (it may leave out a client's only one, and this request then may too).",
        },
        "code_verifier": {
            "type": "string",
            "pattern": "^[A-Za-z0-9._~-]{43,128}$",
            "description": "authorization_code: the PKCE verifier (RFC 7636, S256).",
        },
        "refresh_token": {**_FILLED, "description": "refresh_token: the refresh token (rotated on each use)."},
        "scope": {**_STR, "description": "refresh_token: at most the scopes granted, space-separated."},
        "resource": {**_STR, "description": "The MCP endpoint's URL (RFC 8707)."},
    },
    # What each grant needs besides (RFC 6749 §4.1.3, §6; PKCE, RFC 7636 §4.5).
    "oneOf": [
        {
            "properties": {"grant_type": {"const": "authorization_code"}},
            "required": ["code", "code_verifier"],
        },
        {"properties": {"grant_type": {"const": "refresh_token"}}, "required": ["refresh_token"]},
    ],
}
_TOKEN = _answer(
    {
        "access_token": _STR,
        "token_type": {"type": "string", "enum": ["Bearer"]},
        "expires_in": {"type": "integer"},
        "refresh_token": _STR,
        "scope": _STR,
    }
)
_SCOPES = {"type": "array", "items": {"type": "string", "enum": list(ALL_SCOPES)}}
_SERVER_METADATA = _answer(
    {
        "issuer": _STR,
        "authorization_endpoint": _STR,
        "token_endpoint": _STR,
        "registration_endpoint": _STR,
        "scopes_supported": _SCOPES,
        "response_types_supported": _STRINGS,
        "grant_types_supported": _STRINGS,
        "token_endpoint_auth_methods_supported": _STRINGS,
        "code_challenge_methods_supported": _STRINGS,
        "authorization_response_iss_parameter_supported": {"type": "boolean"},
    }
)
_RESOURCE_METADATA = _answer(
    {
        "resource": _STR,
        "authorization_servers": _STRINGS,
        "scopes_supported": _SCOPES,
        "bearer_methods_supported": _STRINGS,
        "resource_name": _STR,
    }
)


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _operation(operation_id: str, summary: str, status: int, answer: dict[str, Any]) -> dict[str, Any]:
    return {
        "operationId": operation_id,
        "tags": ["oauth"],
        "summary": summary,
        "security": [],
        "responses": {
            str(status): {"description": "success", "content": _json(answer)},
            "default": {"description": "an OAuth error (RFC 6749 §5.2)", "content": _json(_OAUTH_ERROR)},
        },
    }


def oauth_paths() -> dict[str, dict[str, Any]]:
    """The OpenAPI path items of the OAuth routes."""
    register = _operation(
        "register_oauth_client", "Register an OAuth client (RFC 7591; public clients)", 201, _REGISTRATION
    )
    register["requestBody"] = {"required": True, "content": _json(_REGISTRATION_REQUEST)}
    token = _operation("get_oauth_token", "Exchange a code or a refresh token for tokens (PKCE)", 200, _TOKEN)
    token["requestBody"] = {
        "required": True,
        "content": {"application/x-www-form-urlencoded": {"schema": _TOKEN_REQUEST}},
    }
    paths: dict[str, dict[str, Any]] = {
        REGISTER_PATH: {"post": register},
        TOKEN_PATH: {"post": token},
        AUTHORIZATION_SERVER_PATH: {
            "get": _operation(
                "get_authorization_server_metadata",
                "OAuth authorization server metadata (RFC 8414)",
                200,
                _SERVER_METADATA,
            )
        },
    }
    for index, path in enumerate(PROTECTED_RESOURCE_PATHS):
        suffix = "" if index == 0 else "_of_mcp"
        paths[path] = {
            "get": _operation(
                f"get_protected_resource_metadata{suffix}",
                "Protected resource metadata of the MCP endpoint (RFC 9728)",
                200,
                _RESOURCE_METADATA,
            )
        }
    return paths
