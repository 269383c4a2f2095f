"""The web side a person uses: the dashboard (server-rendered pages on the web session) and OAuth 2.1 for
MCP connectors. Its URLs stay outside ``/v1/``, which is the JSON API's."""

from __future__ import annotations

import falcon

from adapters.settings import Settings
from adapters.web import account_pages as account
from adapters.web import dashboard_pages as dashboard
from adapters.web import oauth_endpoints as oauth
from adapters.web import settings_pages
from adapters.web.consent_page import AuthorizePage
from adapters.web.pages import PageRefused, StaticResource, refusal_handler
from community_api.deps import Deps


def add_web_routes(app: falcon.App, deps: Deps, settings: Settings) -> None:
    """Mount the dashboard, the OAuth endpoints and the static files on ``app``."""
    app.add_error_handler(PageRefused, refusal_handler(settings))
    app.add_route("/", account.HomePage(deps, settings))
    app.add_route("/signup", account.SignupPage(deps, settings))
    app.add_route("/login", account.LoginPage(deps, settings))
    app.add_route("/logout", account.LogoutAction(deps, settings))
    app.add_route("/connections", dashboard.ConnectionsPage(deps, settings))
    app.add_route("/connections/{connection_id}/activate", dashboard.ConnectionActivation(deps, settings))
    app.add_route("/connections/{connection_id}/remove", dashboard.ConnectionRemoval(deps, settings))
    app.add_route("/keys", dashboard.KeysPage(deps, settings))
    app.add_route("/keys/{key_id}/rotate", dashboard.KeyRotation(deps, settings))
    app.add_route("/keys/{key_id}/revoke", dashboard.KeyRevocation(deps, settings))
    app.add_route("/usage", dashboard.UsagePage(deps, settings))
    app.add_route("/account", settings_pages.AccountPage(deps, settings))
    app.add_route("/account/password", settings_pages.PasswordChange(deps, settings))
    app.add_route("/account/sessions", settings_pages.SignOutEverywhere(deps, settings))
    app.add_route("/account/delete", settings_pages.AccountDeletion(deps, settings))
    app.add_route("/static/{name}", StaticResource())

    app.add_route(oauth.AUTHORIZE_PATH, AuthorizePage(deps, settings))
    app.add_route(oauth.TOKEN_PATH, oauth.TokenEndpoint(deps, settings))
    app.add_route(oauth.REGISTER_PATH, oauth.RegistrationEndpoint(deps, settings))
    app.add_route(oauth.AUTHORIZATION_SERVER_PATH, oauth.AuthorizationServerMetadata(deps, settings))
    metadata = oauth.ProtectedResourceMetadata(deps, settings)
    for path in oauth.PROTECTED_RESOURCE_PATHS:
        app.add_route(path, metadata)


__all__ = ["add_web_routes"]
