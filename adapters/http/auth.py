"""Authentication of requests: API keys (Bearer) on data routes, web sessions on management routes.

The two never mix: a key is not accepted on a management route and a session cookie is not accepted on
a data route, so a page in someone's browser cannot spend their keys' scopes, nor a leaked key manage
the account.
"""

from __future__ import annotations

import falcon

from community_api import accounts
from community_api.access import Actor, actor_for
from community_api.deps import Deps
from community_api.errors import Unauthorized
from community_api.keys import UNAUTHORIZED_MESSAGE, authenticate_key
from community_api.model import Account, ApiKey, WebSession

SESSION_COOKIE = "cda_session"
CONNECTION_HEADER = "X-Community-Connection"
CSRF_HEADER = "X-CSRF-Token"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def bearer_key(deps: Deps, req: falcon.Request) -> ApiKey:
    """The live key of the request, counted in its usage; ``Unauthorized`` otherwise."""
    for values in req.params.values():
        for value in values if isinstance(values, list) else [values]:
            if isinstance(value, str) and value.startswith("cda_"):
                raise Unauthorized(
                    "API keys are accepted only in the Authorization header, never in the URL "
                    "(URLs end up in logs): rotate this key"
                )
    header = req.get_header("Authorization") or ""
    scheme, _, presented = header.partition(" ")
    if scheme.lower() != "bearer" or not presented:
        raise Unauthorized(UNAUTHORIZED_MESSAGE)
    key = authenticate_key(deps.store, deps.clock, presented)
    deps.usage.record(key.id)
    req.context.key = key
    return key


def api_actor(deps: Deps, req: falcon.Request, scope: str) -> Actor:
    key = bearer_key(deps, req)
    return actor_for(deps.store, key, scope, req.get_header(CONNECTION_HEADER))


def web_session(deps: Deps, req: falcon.Request) -> tuple[Account, WebSession]:
    """The signed-in account; unsafe methods must also carry the session's CSRF token."""
    req.context.web_route = True
    cookies = req.get_cookie_values(SESSION_COOKIE) or []
    account, session = accounts.session_account(deps.store, deps.clock, cookies[0] if cookies else None)
    if req.method not in _SAFE_METHODS:
        accounts.check_csrf(session, req.get_header(CSRF_HEADER))
    return account, session
