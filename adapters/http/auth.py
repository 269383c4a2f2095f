"""Authentication of requests: API keys (Bearer) on data routes, web sessions on management routes.

The two never mix: a key is not accepted on a management route and a session cookie is not accepted on
a data route, so a page in someone's browser cannot spend their keys' scopes, nor a leaked key manage
the account.

OAuth access tokens (``community_api/oauth.py``) are Bearer credentials too, but only on a route that
names itself as their resource (``bearer_key(..., resource=resource_url(settings, req))``: the MCP
endpoint). There a 401 also points the client at the protected resource metadata (RFC 9728), from which
an MCP client finds where to get a token.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import falcon

from adapters.http.errors import SAFE_METHODS
from adapters.settings import Settings
from community_api import accounts
from community_api.access import Actor, actor_for
from community_api.deps import Deps
from community_api.errors import InvalidRequest, Unauthorized
from community_api.keys import UNAUTHORIZED_MESSAGE
from community_api.model import Account, ApiKey, WebSession
from community_api.oauth import ACCESS_PREFIX, REFRESH_PREFIX, authenticate_bearer
from community_api.scopes import DEFAULT_SCOPES

SESSION_COOKIE = "cda_session"
# Proof that this browser signed in to an email before (``community_api.sign_in_guard``): its holder is
# never held back by a stranger's failed guesses.
DEVICE_COOKIE = "cda_device"


def device_cookie(req: falcon.Request) -> str | None:
    values = req.get_cookie_values(DEVICE_COOKIE) or []
    return values[0] if values else None


CONNECTION_HEADER = "X-Community-Connection"
CSRF_HEADER = "X-CSRF-Token"
_SECRET_PREFIXES = ("cda_", ACCESS_PREFIX, REFRESH_PREFIX)
PROTECTED_RESOURCE_METADATA = "/.well-known/oauth-protected-resource"
TWO_CSRF_TOKENS = "X-CSRF-Token holds more than one token (was it sent twice? send it once)"
TWO_CREDENTIALS = "the Authorization header holds more than one credential (was it sent twice? send one key, once)"


def public_base(settings: Settings, req: falcon.Request) -> str:
    """The service's own origin: ``settings.public_url`` when set (behind a proxy the
    request's host may be an internal one), else the request's scheme and host."""
    return settings.public_url or req.prefix


def resource_url(settings: Settings, req: falcon.Request) -> str:
    """The URL of the resource this request is for (its path on the public base): for an OAuth token
    presented to the MCP endpoint, ``{base}/v1/mcp``."""
    return public_base(settings, req) + req.path


def resource_metadata_url(resource: str) -> str:
    """RFC 9728 §3.1: the metadata of ``https://host/path`` is at ``https://host/.well-known/…/path``."""
    parts = urlsplit(resource)
    return f"{parts.scheme}://{parts.netloc}{PROTECTED_RESOURCE_METADATA}{parts.path.rstrip('/')}"


def bearer_credentials(header: str | None) -> str | None:
    """The credentials of an ``Authorization: Bearer …`` header, or None for another scheme or none at all.
    The scheme's name is case-insensitive, and one or more spaces may follow it (RFC 6750 §2.1,
    RFC 9110 §11.4: ``"Bearer" 1*SP b64token``)."""
    scheme, _, presented = (header or "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return presented.lstrip(" ") or None


def bearer_key(deps: Deps, req: falcon.Request, *, resource: str | None = None) -> ApiKey:
    """The live key of the request, counted in its usage; ``Unauthorized`` otherwise.

    ``resource`` None (REST routes): API keys only. ``resource`` given (the MCP endpoint): OAuth access
    tokens issued for that resource are accepted too, answering their connector key, and a 401 carries
    ``WWW-Authenticate: Bearer realm=…, resource_metadata="…", scope="<default read scopes>"``. A 401 for
    a credential sent and refused adds ``error="invalid_token"``; one for none sent adds nothing.
    """
    if resource is not None:
        req.context.www_authenticate = (
            f'Bearer realm="community-api", resource_metadata="{resource_metadata_url(resource)}", '
            f'scope="{" ".join(DEFAULT_SCOPES)}"'
        )
    for values in req.params.values():
        for value in values if isinstance(values, list) else [values]:
            if isinstance(value, str) and value.startswith(_SECRET_PREFIXES):
                raise Unauthorized(
                    "API keys and tokens are accepted only in the Authorization header, never in the URL "
                    "(URLs end up in logs): rotate this key"
                )
    presented = bearer_credentials(req.get_header("Authorization"))
    if not presented:
        raise Unauthorized(UNAUTHORIZED_MESSAGE)
    if "," in presented:
        # The header sent twice reaches the service as its two values joined by a comma; no key or token holds
        # one. RFC 6750 §3.1: a request that repeats its credential is invalid_request, 400 (not "invalid key").
        req.context.credential_repeated = True
        raise InvalidRequest(TWO_CREDENTIALS)
    try:
        key = authenticate_bearer(deps.store, deps.clock, presented, resource, deps.refusals)
    except Unauthorized:
        # A credential refused, rather than none sent: the challenge says invalid_token (RFC 6750 §3.1),
        # never why (unknown, revoked, expired and malformed are one answer).
        req.context.credential_refused = True
        raise
    deps.usage.record(key.id)
    req.context.key = key
    return key


def api_actor(deps: Deps, req: falcon.Request, scope: str) -> Actor:
    # The key and the connection as the store stood when the request arrived (one freshness check).
    with deps.store.one_check():
        key = bearer_key(deps, req)
        actor = actor_for(deps.store, key, scope, req.get_header(CONNECTION_HEADER))
    req.context.connection_id = actor.connection.id  # for the request's log line
    return actor


def web_session(deps: Deps, req: falcon.Request) -> tuple[Account, WebSession]:
    """The signed-in account; unsafe methods must also carry the session's CSRF token."""
    req.context.web_route = True
    cookies = req.get_cookie_values(SESSION_COOKIE) or []
    account, session = accounts.session_account(deps.store, deps.clock, cookies[0] if cookies else None)
    if req.method not in SAFE_METHODS:
        presented = req.get_header(CSRF_HEADER)
        if presented is not None and "," in presented:  # sent twice, joined (no token holds a comma)
            raise InvalidRequest(TWO_CSRF_TOKENS)
        accounts.check_csrf(session, presented)
    return account, session
