"""Linking platform accounts ("connections") to an account of the service.

Rules (DESIGN §2):
- a connection is linked with the platform account's ``email`` and ``password`` (used once, to log in
  through the platform's own form, never stored) or with an existing ``sessionToken``;
- linking the same platform user again refreshes that connection in place (same id, status active);
- the first connection of an account is its active one; ``"active": true`` makes a new one active;
- what is kept is the platform session, encrypted at rest by the store, with when the platform says it
  ends (its token's own expiry, read by the gateway): shown so that the account can link again in time;
- a session token the platform refuses, or one that has already ended, answers 400 naming
  ``sessionToken``; a session is *ending* within ``SESSION_ENDING_SOON`` of the end its token states,
  *ended* past it (the account should link it again; the platform still decides when it ends);
- removing a connection (its own account only: another's answers 404, as an unknown one) erases its
  platform session and revokes the keys bound to it (a connector grant loses its OAuth tokens), in one
  unit of work; unbound keys and other connections are kept; when the active connection goes, the
  oldest one left becomes active. The DM and read quotas stay with the platform account.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

import attrs

from community_api import sign_in_guard as guard
from community_api.commands import Matches, at_most, blank_as_none, expects
from community_api.deps import Deps
from community_api.email_address import email_key
from community_api.errors import InvalidRequest, NotFound, RateLimited
from community_api.ids import new_id, no_such
from community_api.model import CONNECTION_ACTIVE, KEY_CONNECTOR, ApiKey, AuditEvent, Connection, LinkedAccount

MAX_PLATFORM_EMAIL = 320
MAX_PLATFORM_PASSWORD = 1024
# A browser keeps a cookie whose name and value come to at most 4,096 bytes (RFC 6265 asks for at least as
# much; Chromium refuses one byte more), and the platform's cookie is named ``auth_token``: a longer token
# could never be sent.
MAX_SESSION_TOKEN = 4096 - len("auth_token")
# The token is the value of the platform's ``auth_token`` cookie, and a cookie's value is made of RFC 6265's
# cookie-octets. Anything else (a pasted ``Cookie`` header with its spaces and semicolons, a quote, a
# letter outside ASCII) could never be sent as that cookie: refused here, naming the field, before a
# browser is started for it. So is the cookie copied with its name (``auth_token=eyJ…``, as a browser's
# developer tools and ``document.cookie`` show it): a valid cookie value, but never the platform's session.
COOKIE_VALUE_PATTERN = "^(?!auth_token=)[\\x21\\x23-\\x2b\\x2d-\\x3a\\x3c-\\x5b\\x5d-\\x7e]+$"
COOKIE_VALUE_PROBLEM = (
    "must be the value of the platform's auth_token cookie alone, without its name: printable ASCII "
    "without spaces, quotes, commas, semicolons or backslashes"
)


def session_token_ended(ended_at: datetime) -> InvalidRequest:
    """What a gateway raises for a session token that says it has already ended (``adopt_session``)."""
    return InvalidRequest(
        f"the platform session token ended on {ended_at:%Y-%m-%d %H:%M} UTC: sign in to the platform again "
        "and copy the new session cookie, or link with the email and password",
        field="sessionToken",
    )


# How early the dashboard (and the operator's ``accounts list``) warns that a connection's platform session
# is about to end. The platform's sessions live about a year: a month leaves time to link again, however
# seldom the owner looks.
SESSION_ENDING_SOON = timedelta(days=30)
SESSION_ENDING = "ending"
SESSION_ENDED = "ended"


def session_ending(connection: Connection, now: datetime) -> str | None:
    """``SESSION_ENDED``, ``SESSION_ENDING`` (within ``SESSION_ENDING_SOON``), or None: not soon, or not known."""
    ends = connection.session_expires_at
    if ends is None:
        return None
    if ends <= now:
        return SESSION_ENDED
    return SESSION_ENDING if ends - now <= SESSION_ENDING_SOON else None


def needs_linking_again(connection: Connection, now: datetime) -> bool:
    """The platform said its session expired, or its token says the session ends soon or has ended."""
    return connection.status != CONNECTION_ACTIVE or session_ending(connection, now) is not None


def count_to_link_again(linked: Iterable[Connection], now: datetime) -> int:
    """How many of ``linked`` need linking again (the dashboard's banner, ``accounts list``, ``/metrics``)."""
    return sum(1 for connection in linked if needs_linking_again(connection, now))


@attrs.frozen
class LinkRequest:
    """How to link a platform account: its email and password, or a session token; and whether the new
    connection becomes the active one."""

    active: bool = attrs.field(default=False, metadata=expects("true or false"))
    email: str | None = attrs.field(default=None, converter=blank_as_none, validator=at_most(MAX_PLATFORM_EMAIL))
    password: str | None = attrs.field(
        default=None, converter=blank_as_none, validator=at_most(MAX_PLATFORM_PASSWORD), repr=False
    )
    session_token: str | None = attrs.field(
        default=None,
        converter=blank_as_none,
        validator=[at_most(MAX_SESSION_TOKEN), Matches(COOKIE_VALUE_PATTERN, COOKIE_VALUE_PROBLEM)],
        repr=False,
    )


# Linking logs in to the platform from this server. Unbounded, anyone with an account here could guess a
# platform account's password through it (and get this server's address blocked for every user). Refused
# attempts are bounded as failed sign-ins are (``sign_in_guard``: checked and counted in one step before
# the platform is asked; an attempt that was not refused stops counting): per account, per client
# address, and per platform email over every account and address. A stranger can thus hold back linking
# one platform email with a password for 15 minutes, never with a session token.
LINK_PER_ACCOUNT = (10, timedelta(minutes=15))
LINK_PER_ADDRESS = (20, timedelta(minutes=15))
LINK_PER_PLATFORM_EMAIL = (5, timedelta(minutes=15))
LINK_EVENTS = ("link.attempt", "link.cleared")
LINK_REFUSAL = "too many refused attempts to link a platform account"


def _link_bounds(account_id: str, link: LinkRequest, client_address: str | None) -> tuple[guard.Bound, ...]:
    bounds = [guard.Bound("link-account", account_id, *LINK_PER_ACCOUNT)]
    if client_address is not None:
        bounds.append(guard.Bound("link-addr", guard.client_key(client_address), *LINK_PER_ADDRESS))
    if link.email is not None:
        # However it is written (case, its domain in IDNA form or not), as the platform's login reads it
        bounds.append(guard.Bound("link-email", email_key(link.email), *LINK_PER_PLATFORM_EMAIL))
    return tuple(bounds)


# A refusal of how the fields combine names every field of the rule (``details.fields``), none alone.
LINK_FIELDS = ["email", "password", "sessionToken"]


def link_connection(deps: Deps, account_id: str, link: LinkRequest, client_address: str | None = None) -> Connection:
    """Link (or re-link) a platform account; ``client_address`` is the caller's, for the bounds above."""
    make_active = link.active
    if link.session_token is not None:
        if link.email is not None or link.password is not None:
            raise InvalidRequest("give either email and password, or sessionToken, not both", fields=LINK_FIELDS)
    elif link.email is None or link.password is None:
        raise InvalidRequest("give the platform account's email and password, or a sessionToken", fields=LINK_FIELDS)
    bounds = _link_bounds(account_id, link, client_address)
    with deps.linking.call(account_id):  # one at a time: each holds a browser (``in_flight.linking``)
        linked = _sign_in(deps, account_id, link, bounds)
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
            session_expires_at=linked.session_expires_at,
        )
        stored = uow.connections.save_connection(connection, linked.session_token)
        if make_active or not any(c.active for c in existing if c.id != stored.id):
            uow.connections.set_active_connection(account_id, stored.id)
        uow.commit()
    return _reload(deps, stored.id)


def _sign_in(deps: Deps, account_id: str, link: LinkRequest, bounds: tuple[guard.Bound, ...]) -> LinkedAccount:
    try:
        guard.admit(deps.store, deps.clock, bounds, events=LINK_EVENTS, refusal=LINK_REFUSAL)
    except RateLimited as held:
        if held.details.get("bound") == "link-email":  # held for this platform email, by whoever guessed
            held.message += ", or link it now with a session token (the platform's session cookie)"
        raise
    try:
        if link.session_token is not None:
            linked = deps.gateway.adopt_session(link.session_token)
        else:
            linked = deps.gateway.login(link.email or "", link.password or "")
    except InvalidRequest as refused:
        if link.session_token is not None:
            refused.details.setdefault("field", "sessionToken")  # the one thing given: name it
        raise  # the platform refused the credentials (or asked for a second factor): the attempt counts
    except BaseException:
        # Not the credentials' fault (the platform was slow or failing): the attempt stops counting.
        guard.succeeded(deps.store, deps.clock, bounds, account_id, event=LINK_EVENTS[1], trail=False)
        raise
    guard.succeeded(deps.store, deps.clock, bounds, account_id, event=LINK_EVENTS[1], trail=False)
    return linked


def list_connections(deps: Deps, account_id: str) -> list[Connection]:
    return deps.store.list_connections(account_id)


def activate_connection(deps: Deps, account_id: str, connection_id: str) -> Connection:
    with deps.store.unit_of_work() as uow:
        connection = uow.connections.get_connection(connection_id)
        if connection is None or connection.account_id != account_id:
            raise NotFound(no_such("connection", connection_id))
        uow.connections.set_active_connection(account_id, connection_id)
        uow.commit()
    # As written, rather than read again: a removal right after the commit would leave nothing to read.
    return attrs.evolve(connection, active=True)


def own_connection(deps: Deps, account_id: str, connection_id: str) -> Connection:
    """The account's connection; another account's answers ``NotFound`` as an unknown one."""
    connection = deps.store.get_connection(connection_id)
    if connection is None or connection.account_id != account_id:
        raise NotFound(no_such("connection", connection_id))
    return connection


def live_keys_bound_to(deps: Deps, account_id: str, connection_id: str) -> list[ApiKey]:
    """The keys that removing the connection would stop (what the confirmation names)."""
    now = deps.clock.now()
    return [k for k in deps.store.list_keys(account_id) if k.connection_id == connection_id and k.is_live(now)]


def remove_connection(deps: Deps, account_id: str, connection_id: str) -> Connection:
    """Unlink a platform account from the service account; answers the connection as it was."""
    now = deps.clock.now()
    with deps.store.unit_of_work() as uow:
        connection = uow.connections.get_connection(connection_id)
        if connection is None or connection.account_id != account_id:
            raise NotFound(no_such("connection", connection_id))
        for key in uow.keys.list_keys(account_id):
            if key.connection_id == connection_id:
                uow.keys.end_key(key.id, revoked_at=now)  # a bound key would act through nothing
                if key.kind == KEY_CONNECTOR:
                    uow.oauth.delete_oauth_tokens(key.id)
        uow.connections.delete_connection(connection_id)
        left = uow.connections.list_connections(account_id)  # oldest first
        if connection.active and left:
            uow.connections.set_active_connection(account_id, left[0].id)
        uow.audit.add_audit(
            AuditEvent(
                at=now,
                event="connection.removed",
                account_id=account_id,
                subject=connection_id,
                detail=connection.handle,  # the account's Account page names it: the connection is gone
            )
        )
        uow.commit()
    return connection


def _reload(deps: Deps, connection_id: str) -> Connection:
    connection = deps.store.get_connection(connection_id)
    assert connection is not None
    return connection
