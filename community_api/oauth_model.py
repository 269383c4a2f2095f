"""Value types of OAuth for MCP connectors (``oauth.py``): registered clients, authorization codes and
tokens. Frozen and slotted like ``model.py``; secrets are never held, only their hex SHA-256.

A *grant* is a connector key (``ApiKey`` of kind ``connector``): codes and tokens name it by ``key_id``,
so revoking the key ends every token of the grant, and its scopes are what the person consented to.
"""

from __future__ import annotations

from datetime import datetime

import attrs

TOKEN_ACCESS = "access"  # noqa: S105 - a kind of token, not a secret
TOKEN_REFRESH = "refresh"  # noqa: S105


@attrs.frozen
class OAuthClient:
    """A client registered by dynamic client registration (RFC 7591). Public: it has no secret.
    ``approved_at``: when a person first approved a request of it on the consent page (None: never; such
    a client is forgotten a day after it registered, ``oauth_clients.UNAPPROVED_CLIENT_LIFETIME``)."""

    id: str
    name: str
    redirect_uris: tuple[str, ...]
    created_at: datetime
    approved_at: datetime | None = None


@attrs.frozen
class AuthorizationCode:
    """What the person approved on the consent page, redeemable once for tokens within its lifetime.

    ``used_at`` is set by the first redemption, successful or not; ``key_id`` names the grant that a
    successful one created, so that a replayed code can end it (OAuth 2.1 §4.1.3). ``redirect_uri_sent``:
    whether the authorization request named its redirect URI (it may leave out a client's only one); only
    then must the token request repeat it (OAuth 2.1 §4.1.3)."""

    code_hash: str
    client_id: str
    account_id: str
    redirect_uri: str
    code_challenge: str  # S256 only
    resource: str
    scopes: tuple[str, ...]
    connection_id: str | None
    created_at: datetime
    expires_at: datetime
    used_at: datetime | None = None
    key_id: str | None = None
    redirect_uri_sent: bool = True


@attrs.frozen
class OAuthToken:
    """An access or refresh token of a grant. ``used_at`` marks a refresh token that was rotated: a
    second use of it is a replay."""

    token_hash: str
    kind: str  # TOKEN_ACCESS or TOKEN_REFRESH
    key_id: str
    client_id: str
    resource: str
    created_at: datetime
    expires_at: datetime
    used_at: datetime | None = None
