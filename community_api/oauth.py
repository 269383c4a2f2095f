"""OAuth 2.1 grants for MCP connectors: consent → authorization code → tokens, refresh with rotation, and
the check of a Bearer credential (an API key or an access token). Registration and the checks of an
authorization request are in ``oauth_clients.py``.

Rules:
- On the consent page the person picks the scopes (at least one) and, optionally, a connection to bind.
  That yields an authorization code: ``cdc_`` + random + checksum, stored hashed, valid 10 minutes,
  bound to the client, the redirect URI, the PKCE challenge, the resource and the account. A code is
  redeemed once: the first redemption uses it up whether or not it succeeds.
- Redeeming it takes the S256 verifier, the same client, the same redirect URI (which may be left out
  only if the authorization request left out the client's only one, OAuth 2.1 §4.1.3), and (if given)
  the same resource. It mints the *grant*: a connector key (``keys.mint_key(kind=connector)``, its own secret
  thrown away) with the consented scopes and binding, listed with the account's other keys. A second
  redemption of a code revokes the grant the first one created (OAuth 2.1 §4.1.3).
- Access tokens (``cdo_``, 1 hour) and refresh tokens (``cdr_``, 30 days) have the API keys' shape and
  are stored hashed. A refresh rotates: the refresh token is used up and a new pair issued. Presenting a
  used refresh token again is a replay: the whole grant is revoked (its key and every token of it).
- A refresh may ask for fewer scopes than were granted but never more: a new scope needs a new consent
  (the connector is added again). Tokens always carry the grant's scopes.
- An access token is accepted only for the resource it was issued for (this service's MCP endpoint),
  and only while its connector key is live, so revoking the key ends it at once in every worker.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Iterable
from datetime import timedelta
from typing import NoReturn

import attrs

from community_api.errors import Conflict, InvalidRequest, NotFound, Unauthorized
from community_api.ids import no_such
from community_api.keys import (
    MAX_LIVE_KEYS,
    TOO_MANY_KEYS,
    UNAUTHORIZED_MESSAGE,
    LeakedKey,
    authenticate_key,
    has_secret_shape,
    hash_secret,
    live_keys,
    mint_key,
    new_secret,
    revoke_key,
)
from community_api.model import KEY_CONNECTOR, ApiKey, AuditEvent
from community_api.oauth_clients import IGNORED_SCOPES, AuthorizationRequest, OAuthError, same_resource
from community_api.oauth_model import TOKEN_ACCESS, TOKEN_REFRESH, AuthorizationCode, OAuthClient, OAuthToken
from community_api.ports import Clock, KeyStore
from community_api.refusal_audit import RefusalAudit
from community_api.scopes import normalise_scopes

ACCESS_PREFIX = "cdo_"
REFRESH_PREFIX = "cdr_"
CODE_PREFIX = "cdc_"
CODE_LIFETIME = timedelta(minutes=10)
ACCESS_LIFETIME = timedelta(hours=1)
REFRESH_LIFETIME = timedelta(days=30)
_VERIFIER = re.compile(r"[A-Za-z0-9._~-]{43,128}")  # RFC 7636 §4.1


@attrs.frozen
class IssuedTokens:
    """The answer of the token endpoint. The secrets exist only here."""

    access_token: str
    refresh_token: str
    expires_in: int
    key: ApiKey  # the grant

    @property
    def scope(self) -> str:
        return " ".join(self.key.scopes)


def s256(verifier: str) -> str:
    """The PKCE S256 challenge of a verifier: base64url(SHA-256), unpadded."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def approve(
    store: KeyStore,
    clock: Clock,
    request: AuthorizationRequest,
    *,
    account_id: str,
    scopes: Iterable[str],
    connection_id: str | None,
) -> str:
    """The person approved ``request`` with these scopes (at least one, known names) and an optional
    connection of their own to bind. Answers the authorization code for the redirect."""
    granted = normalise_scopes(list(scopes))
    if connection_id is not None:
        connection = store.get_connection(connection_id)
        if connection is None or connection.account_id != account_id:
            raise NotFound(no_such("connection", connection_id))
    now = clock.now()
    if live_keys(store, account_id, now) >= MAX_LIVE_KEYS:  # said on the consent page, not after it
        raise Conflict(TOO_MANY_KEYS, maxLiveKeys=MAX_LIVE_KEYS)
    code = new_secret(CODE_PREFIX)
    with store.unit_of_work() as uow:
        uow.oauth.add_authorization_code(
            AuthorizationCode(
                code_hash=hash_secret(code),
                client_id=request.client.id,
                account_id=account_id,
                redirect_uri=request.redirect_uri,
                redirect_uri_sent=request.redirect_uri_sent,
                code_challenge=request.code_challenge,
                resource=request.resource,
                scopes=granted,
                connection_id=connection_id,
                created_at=now,
                expires_at=now + CODE_LIFETIME,
            )
        )
        uow.oauth.approve_oauth_client(request.client.id, now)  # kept for good from now on
        uow.audit.add_audit(
            AuditEvent(at=now, event="oauth.consented", account_id=account_id, detail=request.client.id)
        )
        uow.commit()
    return code


def _client(store: KeyStore, client_id: str | None) -> OAuthClient:
    # A public client authenticates by its client_id alone (RFC 6749 §3.2.1): none sent is no client
    # authentication, ``invalid_client`` as an unknown one is (§5.2), but told apart in the description.
    if not client_id:
        raise OAuthError("invalid_client", "client_id is required")
    client = store.get_oauth_client(client_id)
    if client is None:
        raise OAuthError("invalid_client", "unknown client_id")
    return client


def exchange_code(
    store: KeyStore,
    clock: Clock,
    *,
    client_id: str | None,
    code: str | None,
    redirect_uri: str | None,
    code_verifier: str | None,
    resource: str | None,
) -> IssuedTokens:
    """``grant_type=authorization_code``: the grant and its first pair of tokens."""
    client = _client(store, client_id)
    if not code or not has_secret_shape(code, CODE_PREFIX):
        raise OAuthError("invalid_grant", "unknown authorization code")
    now = clock.now()
    record = store.use_authorization_code(hash_secret(code), now)
    if record is None:
        raise OAuthError("invalid_grant", "unknown authorization code")
    if record.used_at is not None:
        if record.key_id is not None:
            # The code leaked, or a client retried: either way its tokens may be in the wrong hands.
            revoke_key(store, clock, account_id=record.account_id, key_id=record.key_id)
        store.add_audit(
            AuditEvent(at=now, event="oauth.code_replayed", account_id=record.account_id, key_id=record.key_id)
        )
        raise OAuthError("invalid_grant", "this authorization code was already used; its tokens are revoked")
    if now >= record.expires_at:
        raise OAuthError("invalid_grant", "the authorization code has expired")
    if record.client_id != client.id:
        raise OAuthError("invalid_grant", "the authorization code was issued to another client")
    if redirect_uri is None and record.redirect_uri_sent:
        raise OAuthError("invalid_grant", "redirect_uri is required: the authorization request named one")
    if redirect_uri is not None and redirect_uri != record.redirect_uri:
        raise OAuthError("invalid_grant", "redirect_uri differs from the one of the authorization request")
    if not code_verifier:
        raise OAuthError("invalid_request", "code_verifier is required (PKCE)")
    if not _VERIFIER.fullmatch(code_verifier):
        # Said as it is: a verifier of the wrong shape may well hash to the challenge the client sent.
        raise OAuthError(
            "invalid_grant",
            "code_verifier must be 43 to 128 characters: letters, digits, '-', '.', '_' and '~' (RFC 7636)",
        )
    if not hmac.compare_digest(s256(code_verifier), record.code_challenge):
        raise OAuthError("invalid_grant", "code_verifier does not match the code_challenge")
    if resource is not None and not same_resource(resource, record.resource):
        raise OAuthError("invalid_target", f"this authorization code is for {record.resource}")
    # The grant, its link to the code and its first tokens land together or not at all. (The code was
    # used above, in a step of its own: a failed exchange still burns it.)
    with store.unit_of_work() as uow:
        try:
            issued = mint_key(
                uow.store,
                clock,
                account_id=record.account_id,
                name=client.name,
                scopes=record.scopes,
                connection_id=record.connection_id,
                kind=KEY_CONNECTOR,
            )
        except NotFound:
            raise OAuthError("invalid_grant", "the connection chosen on the consent page no longer exists") from None
        except Conflict:  # keys minted since the consent reached the account's most
            raise OAuthError("invalid_grant", TOO_MANY_KEYS) from None
        uow.oauth.set_authorization_code_key(record.code_hash, issued.key.id)
        tokens = _issue_pair(uow.store, clock, issued.key, client.id, record.resource)
        uow.commit()
    return tokens


def refresh(
    store: KeyStore,
    clock: Clock,
    *,
    client_id: str | None,
    refresh_token: str | None,
    scope: str | None,
    resource: str | None,
) -> IssuedTokens:
    """``grant_type=refresh_token``: rotate the refresh token and issue a new pair."""
    client = _client(store, client_id)
    if not refresh_token:
        raise OAuthError("invalid_request", "refresh_token is required")
    if not has_secret_shape(refresh_token, REFRESH_PREFIX):
        raise OAuthError("invalid_grant", "unknown refresh token")
    token_hash = hash_secret(refresh_token)
    now = clock.now()
    token = store.get_oauth_token(token_hash)
    if token is None or token.kind != TOKEN_REFRESH or token.client_id != client.id:
        raise OAuthError("invalid_grant", "unknown refresh token")
    key = store.get_key(token.key_id)
    if token.used_at is not None:
        _replayed(store, clock, key)
    if now >= token.expires_at:
        raise OAuthError("invalid_grant", "the refresh token has expired: authorize again")
    if key is None or not key.is_live(now):
        raise OAuthError("invalid_grant", "this grant was revoked: add the connector again")
    if resource is not None and not same_resource(resource, token.resource):
        raise OAuthError("invalid_target", f"this refresh token is for {token.resource}")
    extra = sorted({n for n in (scope or "").split() if n not in key.scopes and n not in IGNORED_SCOPES})
    if extra:
        raise OAuthError("invalid_scope", f"not granted: {', '.join(extra)}; a new scope needs a new consent")
    # Using the refresh token and issuing the new pair are one step: a failure leaves the token usable.
    with store.unit_of_work() as uow:
        before = uow.oauth.use_oauth_token(token_hash, now)
        replayed = before is None or before.used_at is not None
        tokens = None if replayed else _issue_pair(uow.store, clock, key, client.id, token.resource)
        uow.commit()
    if tokens is None:
        # Another request rotated it first: two uses of one refresh token, which is what a replay is.
        _replayed(store, clock, key)
    return tokens


def _replayed(store: KeyStore, clock: Clock, key: ApiKey | None) -> NoReturn:
    if key is not None:
        revoke_key(store, clock, account_id=key.account_id, key_id=key.id)
        store.add_audit(
            AuditEvent(at=clock.now(), event="oauth.refresh_replayed", account_id=key.account_id, key_id=key.id)
        )
    raise OAuthError("invalid_grant", "this refresh token was already used; the grant is revoked")


def _issue_pair(store: KeyStore, clock: Clock, key: ApiKey, client_id: str, resource: str) -> IssuedTokens:
    now = clock.now()
    access, refresh_value = new_secret(ACCESS_PREFIX), new_secret(REFRESH_PREFIX)
    pair = ((access, TOKEN_ACCESS, ACCESS_LIFETIME), (refresh_value, TOKEN_REFRESH, REFRESH_LIFETIME))
    for value, kind, lifetime in pair:
        store.add_oauth_token(
            OAuthToken(
                token_hash=hash_secret(value),
                kind=kind,
                key_id=key.id,
                client_id=client_id,
                resource=resource,
                created_at=now,
                expires_at=now + lifetime,
            )
        )
    return IssuedTokens(access, refresh_value, int(ACCESS_LIFETIME.total_seconds()), key)


def authenticate_bearer(
    store: KeyStore, clock: Clock, presented: str, resource: str | None, refusals: RefusalAudit
) -> ApiKey:
    """The key a Bearer credential stands for, or ``Unauthorized`` with one message for every reason.

    - An API key (``cda_``) is checked by ``keys.authenticate_key``, wherever Bearer keys are taken.
    - An access token (``cdo_``) is accepted only where ``resource`` is given (the MCP endpoint; None on
      REST routes) and equals the token's resource (RFC 8707 audience). It answers its connector key,
      which must be live: revoking the key ends the token for the very next request.
    - A well-formed token refused is written to the audit table through ``refusals``, like a refused key.
    """
    if not presented.startswith(ACCESS_PREFIX):
        return authenticate_key(store, clock, presented, refusals)
    if resource is None or not has_secret_shape(presented, ACCESS_PREFIX):
        raise Unauthorized(UNAUTHORIZED_MESSAGE)
    now = clock.now()
    token = store.get_oauth_token(hash_secret(presented))
    key = store.get_key(token.key_id) if token is not None and token.kind == TOKEN_ACCESS else None
    reason = None
    if token is None or key is None:
        reason = "unknown"
    elif now >= token.expires_at:
        reason = "expired"
    elif not same_resource(resource, token.resource):
        reason = "other resource"
    elif key.kind != KEY_CONNECTOR or not key.is_live(now):
        reason = "revoked"
    if reason is not None or key is None:
        refusals.record(
            store,
            AuditEvent(
                at=now,
                event="oauth.token_refused",
                account_id=key.account_id if key else None,
                key_id=key.id if key else None,
                subject=presented[: len(ACCESS_PREFIX) + 8],
                detail=reason,
            ),
        )
        raise Unauthorized(UNAUTHORIZED_MESSAGE)
    return key


def revoke_leaked_token(store: KeyStore, clock: Clock, presented: str) -> LeakedKey:
    """``keys.revoke_leaked_key`` for an OAuth access (``cdo_``) or refresh (``cdr_``) token: the grant
    (connector key) it belongs to is revoked, which ends all its tokens. A value of another shape is
    ``InvalidRequest``."""
    presented = presented.strip()
    if not any(has_secret_shape(presented, prefix) for prefix in (ACCESS_PREFIX, REFRESH_PREFIX)):
        raise InvalidRequest("not an OAuth token: cdo_ or cdr_ followed by 49 letters and digits whose checksum holds")
    token = store.get_oauth_token(hash_secret(presented))
    key = store.get_key(token.key_id) if token is not None else None
    if key is None:
        # Unknown, or its grant was revoked before (its tokens are forgotten then).
        return LeakedKey(None, was_live=False)
    was_live = key.is_live(clock.now())
    revoked = revoke_key(store, clock, account_id=key.account_id, key_id=key.id, reason="leaked: by the operator")
    return LeakedKey(revoked, was_live=was_live)
