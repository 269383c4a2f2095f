"""An account's recent activity: the newest lines of its audit trail, each said in words a person reads.

The audit table holds a line for every sign-in, password change, key minted, rotated, revoked or refused,
platform session ended, connection removed and connector approved (never a secret). The owner reads the
newest of them on the dashboard's Account page: a sign-in they did not make, a key they did not mint, and
above all a script whose key stopped working — "why does my script get 401 (or 409)?" — which is the
refused-use line (written at most once a minute per key: ``refusal_audit.py``) or the ended session's.
"""

from __future__ import annotations

from datetime import datetime

import attrs

from community_api.model import KEY_CONNECTOR, ApiKey, AuditEvent
from community_api.ports import KeyStore
from community_api.sign_in_guard import NEW_BROWSER

RECENT_LINES = 30  # rows the Account page shows
# Audit lines read to fill them: the same line repeated in a row is one row (a script signing in on every
# run, or sending a revoked key every second, writes many), so that a flood does not hide the rest.
SCANNED_LINES = 500

# Why a key was refused, as ``keys.authenticate_key`` writes it.
_KEY_REFUSALS = {
    "revoked": "it was revoked",
    "expired": "it was replaced by a rotation",  # with no grace, or after its 24 hours
}
# Why a connector's access token was refused, as ``oauth.authenticate_bearer`` writes it. An expired one is
# not shown: an access token lives an hour and its client then refreshes it, nothing the owner must do.
_TOKEN_REFUSALS = {
    "revoked": "the connector was revoked",
    "other resource": "it was sent to another address than the one it was issued for",
}

# Lines whose words depend on nothing but the event.
_PLAIN = {
    "account.password_changed": "Password changed; every other browser was signed out",
    "account.password_reset": "Password set by the operator; every browser was signed out",
    "account.signed_out_everywhere": "Signed out everywhere",
    # A signed-in browser that is not the owner's may be guessing: "sign out everywhere" ends it.
    "account.password_refused": "A wrong password was given to change the password or delete the account",
    "oauth.code_replayed": "A connector's authorization code was used a second time: that connector was revoked",
    "oauth.refresh_replayed": "A connector's refresh token was used a second time: that connector was revoked",
}


@attrs.frozen
class ActivityLine:
    """One row: what happened, and when (the newest time); ``times`` lines in a row said the same, the
    oldest of them at ``since``."""

    at: datetime
    text: str
    times: int = 1
    since: datetime | None = None


def recent_activity(
    store: KeyStore, account_id: str, limit: int = RECENT_LINES, scanned: int = SCANNED_LINES
) -> list[ActivityLine]:
    """The account's newest audit lines in words, newest first: at most ``limit`` rows, the same words
    repeated in a row one row with its count, from the newest ``scanned`` lines."""
    events = store.recent_audit(account_id, scanned)
    keys = {key.id: key for key in store.list_keys(account_id)} if events else {}
    rows: list[ActivityLine] = []
    for event in events:
        if event.event == "oauth.token_refused" and event.detail == "expired":
            continue
        text = describe(store, event, keys)
        if rows and rows[-1].text == text:
            rows[-1] = attrs.evolve(rows[-1], times=rows[-1].times + 1, since=event.at)
        elif len(rows) == limit:
            break
        else:
            rows.append(ActivityLine(event.at, text))
    return rows


def describe(store: KeyStore, event: AuditEvent, keys: dict[str, ApiKey]) -> str:
    """One audit line in words. An event this module does not know yet is named as it is written."""
    plain = _PLAIN.get(event.event)
    if plain is not None:
        return plain
    found = keys.get(event.key_id or "")
    key = _key_name(found)
    key_first = key[:1].upper() + key[1:]
    match event.event:
        case "login.succeeded":
            return "Signed in from a browser new to this account" if event.detail == NEW_BROWSER else "Signed in"
        case "key.minted":
            # A connector's key is minted when its client first redeems the code the person approved.
            return f"{key_first} " + ("connected" if found and found.kind == KEY_CONNECTOR else "created")
        case "key.rotated":
            ended = "grace=0" in (event.detail or "")
            return f"{key_first} rotated; " + (
                "the old value stopped at once" if ended else "the old value keeps working for 24 hours"
            )
        case "key.revoked":
            by_operator = (event.detail or "").startswith("leaked")
            return f"{key_first} revoked" + (" by the operator, as leaked" if by_operator else "")
        case "key.refused":
            why = _KEY_REFUSALS.get(event.detail or "", event.detail or "refused")
            return f"A request with {key} was refused: {why}"
        case "oauth.token_refused":
            why = _TOKEN_REFUSALS.get(event.detail or "", event.detail or "refused")
            return f"A request with an access token of {key} was refused: {why}"
        case "oauth.consented":
            client = store.get_oauth_client(event.detail) if event.detail else None
            return f"Connector “{client.name}” approved" if client else "A connector was approved"
        case "connection.expired":
            return (
                f"The platform ended the session of “{event.detail}”: requests through it answer "
                "connection_expired until it is linked again"
            )
        case "connection.removed":
            # The line names the platform account's handle since session 35; older lines do not.
            return f"Platform account “{event.detail}” unlinked" if event.detail else "A platform account was unlinked"
    return event.event


def _key_name(key: ApiKey | None) -> str:
    if key is None:  # no key of this account's (not expected: keys are never deleted): named by nothing
        return "a key"
    if key.kind == KEY_CONNECTOR:
        return f"connector “{key.name}”"
    return f"key “{key.name}” (cda_{key.prefix}…)"
