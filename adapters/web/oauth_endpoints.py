"""The JSON endpoints of OAuth for MCP connectors: metadata (RFC 9728, RFC 8414), dynamic client
registration (RFC 7591) and the token endpoint.

They speak OAuth's own format, not the service's error body: a refusal is ``{"error", "error_description"}``
(400; ``invalid_client`` 401; too many registrations 429 with ``Retry-After``), tokens come with
``Cache-Control: no-store``. They allow any origin (CORS, without credentials): a browser-based MCP
client registers and redeems codes from its own page, and no cookie is read here.
"""

from __future__ import annotations

import json
from typing import Any

import falcon

from adapters.commands import structure_metadata
from adapters.http.body import read_json
from adapters.http.errors import STATUS_BY_CODE
from adapters.web.consent_page import MCP_PATH, mcp_resource
from adapters.web.pages import WebResource, read_form, security_headers
from community_api import oauth, oauth_clients
from community_api.errors import InvalidRequest, ServiceError
from community_api.oauth_clients import ClientMetadata, OAuthError, RegistrationThrottled
from community_api.scopes import ALL_SCOPES

AUTHORIZE_PATH = "/oauth/authorize"
TOKEN_PATH = "/oauth/token"  # noqa: S105 - a path
REGISTER_PATH = "/oauth/register"
PROTECTED_RESOURCE_PATHS = ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource" + MCP_PATH)
AUTHORIZATION_SERVER_PATH = "/.well-known/oauth-authorization-server"


class OAuthJsonResource(WebResource):
    """Answers in OAuth's JSON, with CORS for browser-based clients."""

    def answer(self, req: falcon.Request, resp: falcon.Response, body: Any, status: int = 200) -> None:
        resp.status = status
        resp.content_type = falcon.MEDIA_JSON
        resp.text = json.dumps(body)
        resp.set_header("Access-Control-Allow-Origin", "*")
        security_headers(resp, https=self.https(req))

    def refuse(self, req: falcon.Request, resp: falcon.Response, error: ServiceError) -> None:
        if isinstance(error, RegistrationThrottled):
            resp.set_header("Retry-After", str(error.retry_after))
            status = 429
        elif isinstance(error, OAuthError):
            status = 401 if error.error == "invalid_client" else 400
        else:  # our own refusals of the request itself: size, media type, JSON syntax
            status = STATUS_BY_CODE.get(error.code, 400)
        code = error.error if isinstance(error, OAuthError) else "invalid_request"
        self.answer(req, resp, {"error": code, "error_description": error.message}, status)

    def on_options(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.status = falcon.HTTP_204
        resp.set_header("Access-Control-Allow-Origin", "*")
        resp.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
        resp.set_header("Access-Control-Allow-Headers", "Content-Type, Authorization, MCP-Protocol-Version")
        resp.set_header("Access-Control-Max-Age", "600")
        security_headers(resp, https=self.https(req))


class ProtectedResourceMetadata(OAuthJsonResource):
    """RFC 9728, at the root and at the MCP endpoint's path-specific location."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        base = self.base(req)
        self.answer(
            req,
            resp,
            {
                "resource": mcp_resource(base),
                "authorization_servers": [base],
                "scopes_supported": list(ALL_SCOPES),
                "bearer_methods_supported": ["header"],
                "resource_name": "Community Data API (MCP)",
            },
        )


class AuthorizationServerMetadata(OAuthJsonResource):
    """RFC 8414. The issuer is the service's base URL, without a trailing slash."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        base = self.base(req)
        self.answer(
            req,
            resp,
            {
                "issuer": base,
                "authorization_endpoint": base + AUTHORIZE_PATH,
                "token_endpoint": base + TOKEN_PATH,
                "registration_endpoint": base + REGISTER_PATH,
                "scopes_supported": list(ALL_SCOPES),
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "token_endpoint_auth_methods_supported": ["none"],
                "code_challenge_methods_supported": ["S256"],
                "authorization_response_iss_parameter_supported": True,
            },
        )


class RegistrationEndpoint(OAuthJsonResource):
    """``POST /oauth/register``: dynamic client registration; every client is public."""

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        try:
            body, _ = read_json(req)
            client = oauth_clients.register_client(
                self.deps.store, self.deps.clock, client_metadata(body), self.client(req)
            )
        except ServiceError as error:
            self.refuse(req, resp, error)
            return
        self.answer(
            req,
            resp,
            {
                "client_id": client.id,
                "client_id_issued_at": int(client.created_at.timestamp()),
                "client_name": client.name,
                "redirect_uris": list(client.redirect_uris),
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "none",
            },
            201,
        )


def client_metadata(body: object) -> ClientMetadata:
    """RFC 7591 metadata as the core's command; a field missing or of the wrong type is refused in RFC
    7591's terms (``invalid_redirect_uri`` for ``redirect_uris``, else ``invalid_client_metadata``)."""
    try:
        return structure_metadata(body, ClientMetadata)
    except InvalidRequest as refused:  # a validator's OAuthError is not one: it passes as it is
        field = refused.details.get("field")
        error = "invalid_redirect_uri" if field == "redirect_uris" else "invalid_client_metadata"
        raise OAuthError(error, refused.message) from None


class TokenEndpoint(OAuthJsonResource):
    """``POST /oauth/token``: ``authorization_code`` (with PKCE) and ``refresh_token`` grants."""

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        try:
            form = read_form(req)
            grant_type = form.one("grant_type")
            fields = {
                "client_id": form.one("client_id"),
                "resource": form.one("resource"),
            }
            if grant_type == "authorization_code":
                issued = oauth.exchange_code(
                    self.deps.store,
                    self.deps.clock,
                    code=form.one("code"),
                    redirect_uri=form.one("redirect_uri"),
                    code_verifier=form.one("code_verifier"),
                    **fields,
                )
            elif grant_type == "refresh_token":
                issued = oauth.refresh(
                    self.deps.store,
                    self.deps.clock,
                    refresh_token=form.one("refresh_token"),
                    scope=form.one("scope"),
                    **fields,
                )
            else:
                raise OAuthError("unsupported_grant_type", "grant_type must be authorization_code or refresh_token")
        except ServiceError as error:
            self.refuse(req, resp, error)
            return
        resp.set_header("Pragma", "no-cache")
        self.answer(
            req,
            resp,
            {
                "access_token": issued.access_token,
                "token_type": "Bearer",
                "expires_in": issued.expires_in,
                "refresh_token": issued.refresh_token,
                "scope": issued.scope,
            },
        )
