"""``/oauth/authorize``: the authorization endpoint of OAuth 2.1, and the consent page behind it.

The request is checked before anything is shown (``community_api.oauth_clients``): a bad client or
redirect URI is explained on a page of ours and never sent anywhere; any other fault goes back to the
client's redirect URI with ``error``, ``state`` and ``iss`` (RFC 9207). A signed-out browser signs in
first and comes back. The consent form repeats the request's parameters; they are checked again when it
is posted, with the web session's CSRF token. Approving yields a code (``oauth.approve``) sent back with
``state`` and ``iss``; declining answers ``access_denied``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import falcon

from adapters.web.dashboard_pages import SCOPE_CHOICES, status_of
from adapters.web.pages import PageRefused, WebResource, form_target
from community_api import connections, oauth, oauth_clients
from community_api.errors import ServiceError
from community_api.model import Account
from community_api.oauth_clients import AUTHORIZATION_PARAMS, AuthorizationParams, AuthorizationRequest, OAuthError

MCP_PATH = "/v1/mcp"  # the one protected resource: the MCP endpoint


def mcp_resource(base: str) -> str:
    return base + MCP_PATH


class AuthorizePage(WebResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        given: dict[str, str | None] = {}
        for name in AUTHORIZATION_PARAMS:
            value = req.params.get(name)
            if isinstance(value, list):
                raise PageRefused(400, f"The parameter {name} appears more than once in this request.")
            given[name] = value
        request = self._check(req, resp, AuthorizationParams(**given))
        if request is None:
            return
        found = self.page_session(req, resp)
        if found is not None:
            self._show(req, resp, found[0], request, chosen=request.requested_scopes)

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        account, _, form = self.form_session(req)
        try:
            params = AuthorizationParams(**{name: form.one(name) for name in AUTHORIZATION_PARAMS})
        except ServiceError as error:
            raise PageRefused(400, error.message) from None
        request = self._check(req, resp, params)
        if request is None:
            return
        if form.get("decision") != "approve":
            self._back(
                req,
                resp,
                request.redirect_uri,
                request.state,
                error="access_denied",
                error_description="the person declined to connect this application",
            )
            return
        # Not "scope": that field repeats the request's own scope parameter, checked again like the rest.
        chosen = form.getall("granted_scope")
        try:
            code = oauth.approve(
                self.deps.store,
                self.deps.clock,
                request,
                account_id=account.id,
                scopes=chosen,
                connection_id=form.get("connection_id") or None,
            )
        except ServiceError as error:
            self._show(req, resp, account, request, chosen=chosen, error=error.message, status=status_of(error))
            return
        self._back(req, resp, request.redirect_uri, request.state, code=code)

    def _check(
        self, req: falcon.Request, resp: falcon.Response, params: AuthorizationParams
    ) -> AuthorizationRequest | None:
        """The checked request, or None once the refusal has been answered."""
        try:
            client, redirect_uri = oauth_clients.check_client_redirect(
                self.deps.store, params.client_id, params.redirect_uri
            )
        except OAuthError as error:
            self.render(
                req,
                resp,
                "oauth_error.html",
                status=400,
                title="This connection request cannot be completed",
                message=error.message,
            )
            return None
        try:
            return oauth_clients.check_authorization_request(client, redirect_uri, params, mcp_resource(self.base(req)))
        except OAuthError as error:
            self._back(req, resp, redirect_uri, params.state, error=error.error, error_description=error.message)
            return None

    def _show(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        account: Account,
        request: AuthorizationRequest,
        *,
        chosen: Any,
        error: str | None = None,
        status: int = 200,
    ) -> None:
        self.render(
            req,
            resp,
            "consent.html",
            status=status,
            title=f"Connect {request.client.name}?",
            request=request,
            hidden={name: value for name, value in self._hidden(request).items() if value is not None},
            scopes=SCOPE_CHOICES,
            chosen=set(chosen),
            connections=connections.list_connections(self.deps, account.id),
            error=error,
            # The approval's redirect leads to the client: Chromium checks it against form-action.
            form_targets=[form_target(request.redirect_uri)],
        )

    @staticmethod
    def _hidden(request: AuthorizationRequest) -> dict[str, str | None]:
        return {
            "response_type": "code",
            "client_id": request.client.id,
            # Left out as the client left it out: the token request then need not repeat it.
            "redirect_uri": request.redirect_uri if request.redirect_uri_sent else None,
            "state": request.state,
            "code_challenge": request.code_challenge,
            "code_challenge_method": "S256",
            "scope": " ".join(request.requested_scopes),
            "resource": request.resource,
        }

    def _back(
        self, req: falcon.Request, resp: falcon.Response, redirect_uri: str, state: str | None, **values: str
    ) -> None:
        """Redirect to the client with ``values``, its ``state`` and our ``iss``, keeping the URI's query."""
        answer = {**values, **({"state": state} if state is not None else {}), "iss": self.base(req)}
        separator = "&" if "?" in redirect_uri else "?"
        self.redirect(req, resp, redirect_uri + separator + urlencode(answer))
