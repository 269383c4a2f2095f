"""Who is acting, through which connection: shared by the REST resources and the MCP tools.

Rules (spec §5, DESIGN §2):
- a route needs one scope; a key without it is refused with ``Forbidden`` naming the scope;
- a key bound to a connection always uses it; a different ``X-Community-Connection`` is
  ``ConnectionMismatch`` (403);
- an unbound key may pick a connection of its own account with the header; a connection of another
  account (or none at all) answers ``NotFound``, never another account's data;
- a header naming two connections (sent twice: joined by a comma) is ``InvalidRequest``;
- without the header the account's active connection is used; no connection at all is ``Conflict``;
- a connection whose platform session expired answers ``ConnectionExpired`` before the platform is
  asked again.
"""

from __future__ import annotations

import attrs

from community_api.errors import (
    Conflict,
    ConnectionExpired,
    ConnectionMismatch,
    Forbidden,
    InvalidRequest,
    NotFound,
)
from community_api.ids import no_such
from community_api.model import CONNECTION_EXPIRED, ApiKey, Connection, PlatformSession
from community_api.ports import KeyStore

EXPIRED_MESSAGE = "the platform session of this connection has expired: link the account again"
TWO_CONNECTIONS = "X-Community-Connection names one connection (was the header sent twice? send it once)"


@attrs.frozen
class Actor:
    """An authenticated key acting through one connection."""

    key: ApiKey
    connection: Connection
    session: PlatformSession


def require_scope(key: ApiKey, scope: str) -> None:
    if scope not in key.scopes:
        raise Forbidden(f"this key lacks the scope {scope}", requiredScope=scope)


def select_connection(store: KeyStore, key: ApiKey, requested: str | None) -> tuple[Connection, str | None]:
    """The connection the key acts through, with its platform session (one store look-up)."""
    requested = (requested or "").strip() or None
    if requested is not None and "," in requested:
        # An HTTP server hands a header sent twice to the application as the two values joined by a comma;
        # no connection's id holds one.
        raise InvalidRequest(TWO_CONNECTIONS)
    if key.connection_id is not None:
        if requested is not None and requested != key.connection_id:
            raise ConnectionMismatch("this key is bound to another connection", boundConnectionId=key.connection_id)
        found = store.load_connection(key.account_id, key.connection_id)
        if found is None:
            raise NotFound("the connection this key is bound to no longer exists")
        return found
    found = store.load_connection(key.account_id, requested)
    if requested is not None and (found is None or found[0].account_id != key.account_id):
        raise NotFound(no_such("connection", requested))
    if found is None:
        raise Conflict("this account has no linked platform account: link one with POST /v1/connections")
    return found


def actor_for(store: KeyStore, key: ApiKey, scope: str, requested_connection: str | None) -> Actor:
    """Check the scope, pick the connection and load its platform session."""
    require_scope(key, scope)
    connection, token = select_connection(store, key, requested_connection)
    if connection.status == CONNECTION_EXPIRED or token is None:
        raise ConnectionExpired(EXPIRED_MESSAGE, connectionId=connection.id)
    return Actor(key=key, connection=connection, session=PlatformSession(connection.id, token))
