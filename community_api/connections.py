"""Linking platform accounts ("connections") to an account of the service.

Rules (DESIGN §2):
- a connection is linked with the platform account's ``email`` and ``password`` (used once, to log in
  through the platform's own form, never stored) or with an existing ``sessionToken``;
- linking the same platform user again refreshes that connection in place (same id, status active);
- the first connection of an account is its active one; ``"active": true`` makes a new one active;
- what is kept is the platform session, encrypted at rest by the store.
"""

from __future__ import annotations

from collections.abc import Mapping

from community_api.deps import Deps
from community_api.errors import InvalidRequest, NotFound
from community_api.ids import new_id
from community_api.inputs import check_body
from community_api.model import CONNECTION_ACTIVE, Connection


def link_connection(deps: Deps, account_id: str, body: object) -> Connection:
    if not isinstance(body, Mapping):
        raise InvalidRequest("the request body must be a JSON object")
    fields = dict(body)
    make_active = fields.pop("active", False)
    if not isinstance(make_active, bool):
        raise InvalidRequest("active must be true or false", field="active")
    values = check_body(fields, optional={"email": 320, "password": 1024, "sessionToken": 8192})
    if values["sessionToken"] is not None:
        if values["email"] is not None or values["password"] is not None:
            raise InvalidRequest("give either email and password, or sessionToken, not both")
        linked = deps.gateway.adopt_session(values["sessionToken"])
    elif values["email"] is not None and values["password"] is not None:
        linked = deps.gateway.login(values["email"], values["password"])
    else:
        raise InvalidRequest("give the platform account's email and password, or a sessionToken")
    # The platform was asked above (slow, outside any step); what the account's connections are, and which
    # is active, is decided and written in one step.
    with deps.store.unit_of_work() as uow:
        existing = uow.connections.list_connections(account_id)
        connection = Connection(
            id=new_id("con"),
            account_id=account_id,
            platform_user_id=linked.user.id,
            handle=linked.user.handle,
            name=linked.user.name,
            active=not existing,
            status=CONNECTION_ACTIVE,
            created_at=deps.clock.now(),
        )
        stored = uow.connections.save_connection(connection, linked.session_token)
        if make_active or not any(c.active for c in existing if c.id != stored.id):
            uow.connections.set_active_connection(account_id, stored.id)
        uow.commit()
    return _reload(deps, stored.id)


def list_connections(deps: Deps, account_id: str) -> list[Connection]:
    return deps.store.list_connections(account_id)


def activate_connection(deps: Deps, account_id: str, connection_id: str) -> Connection:
    with deps.store.unit_of_work() as uow:
        connection = uow.connections.get_connection(connection_id)
        if connection is None or connection.account_id != account_id:
            raise NotFound(f"no connection {connection_id}")
        uow.connections.set_active_connection(account_id, connection_id)
        uow.commit()
    return _reload(deps, connection_id)


def _reload(deps: Deps, connection_id: str) -> Connection:
    connection = deps.store.get_connection(connection_id)
    assert connection is not None
    return connection
