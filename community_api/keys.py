"""API keys: their format, minting, rotation, revocation and checking.

Rules (DESIGN §2, spec §3 and §5):
- A key is ``cda_`` + 43 base62 characters of randomness + 6 base62 characters of checksum (CRC32 of
  everything before it), so secret scanners can recognise a leaked key and a typo is refused before
  any store look-up.
- Only the SHA-256 of the key is stored; the value is shown once, when minted or rotated.
- A key is found by its prefix and its hash compared in constant time.
- Rotation issues a new key; the old one keeps working for 24 hours (or ends at once with no grace).
  Rotating a key whose predecessor is still in its grace window ends that predecessor at once, so a
  lineage never has more than two live secrets.
- Revocation ends the key (and a predecessor still in grace) at once.
- Mint, rotation and revocation each run in one unit of work (``KeyStore.unit_of_work``): concurrent
  calls on one key happen one after the other, and a key's end is only ever written earlier (``end_key``).
- Mint, rotation, revocation and every refused use are written to the audit table, never the secret.
"""

from __future__ import annotations

import hashlib
import hmac
import zlib
from collections.abc import Iterable
from datetime import datetime, timedelta

import attrs

from community_api.commands import BadField, at_most, expects
from community_api.errors import Conflict, InvalidRequest, NotFound, Unauthorized
from community_api.ids import BASE62, new_id, no_such, random_base62
from community_api.model import KEY_CONNECTOR, KEY_STANDARD, ApiKey, AuditEvent
from community_api.ports import Clock, KeyStore
from community_api.readable import READABLE_PATTERN, readable
from community_api.refusal_audit import RefusalAudit
from community_api.scopes import ALL_SCOPES, normalise_scopes
from community_api.store_ports import KeyRecords, UnitOfWork

KEY_PREFIX = "cda_"
RANDOM_LENGTH = 43
CHECKSUM_LENGTH = 6
KEY_LENGTH = len(KEY_PREFIX) + RANDOM_LENGTH + CHECKSUM_LENGTH
DISPLAY_PREFIX_LENGTH = 8
ROTATION_GRACE = timedelta(hours=24)
MAX_NAME_LENGTH = 100
# Live keys an account may hold at once, connector grants included (as MAX_WEB_SESSIONS bounds its sessions):
# far more than a person or a team uses, few enough that a script minting in a loop stops with a clear
# answer instead of filling the database and the dashboard's keys page. Rotation replaces a key and is not
# refused by it.
MAX_LIVE_KEYS = 100
TOO_MANY_KEYS = f"this account already holds {MAX_LIVE_KEYS} live keys, the most it may: revoke one it no longer uses"

UNAUTHORIZED_MESSAGE = "a valid API key is required in the Authorization header (Bearer)"


# Base62 two digits at a time: every request's key has its checksum written out (see has_secret_shape).
_PAIRS = [high + low for high in BASE62 for low in BASE62]
_PAIR = 62 * 62


def _checksum(body: str) -> str:
    """The CRC-32 of ``body`` in 6 base62 digits (62**6 > 2**32), most significant first."""
    number = zlib.crc32(body.encode("ascii"))
    number, low = divmod(number, _PAIR)
    high, middle = divmod(number, _PAIR)
    return _PAIRS[high] + _PAIRS[middle] + _PAIRS[low]


def new_secret(prefix: str) -> str:
    """``prefix`` + 43 base62 characters of randomness + 6 of checksum: the shape of API keys (``cda_``)
    and of OAuth tokens (``oauth.py``), so scanners recognise each and typos fail before a look-up."""
    body = prefix + random_base62(RANDOM_LENGTH)
    return body + _checksum(body)


def has_secret_shape(value: str, prefix: str) -> bool:
    """True when ``value`` is ``prefix`` + the random part + a checksum that holds (no store look-up)."""
    if len(value) != len(prefix) + RANDOM_LENGTH + CHECKSUM_LENGTH or not value.startswith(prefix):
        return False
    # Every request's key passes here: str methods instead of a regular expression (ASCII letters and
    # digits only; isalnum alone would take other scripts' letters and digits too).
    tail = value[len(prefix) :]
    if not (tail.isascii() and tail.isalnum()):
        return False
    body, checksum = value[:-CHECKSUM_LENGTH], value[-CHECKSUM_LENGTH:]
    return hmac.compare_digest(_checksum(body), checksum)


def generate_secret() -> str:
    return new_secret(KEY_PREFIX)


def has_valid_shape(value: str) -> bool:
    """True when ``value`` looks exactly like a key and its checksum holds (no store look-up)."""
    return has_secret_shape(value, KEY_PREFIX)


def hash_secret(value: str) -> str:
    return hashlib.sha256(value.encode("ascii")).hexdigest()


def display_prefix(value: str) -> str:
    return value[len(KEY_PREFIX) : len(KEY_PREFIX) + DISPLAY_PREFIX_LENGTH]


@attrs.frozen
class IssuedKey:
    """A key record with its secret value: exists only in the answer that mints or rotates it."""

    key: ApiKey
    secret: str


def mint_key(
    store: KeyStore,
    clock: Clock,
    *,
    account_id: str,
    name: str | None,
    scopes: Iterable[str] | None,
    connection_id: str | None,
    kind: str = KEY_STANDARD,
) -> IssuedKey:
    """Mint a key for the account.

    - ``scopes`` None gives the default read scopes; unknown scope names are refused.
    - ``connection_id``, when given, binds the key and must be a connection of the same account.
    """
    if kind not in (KEY_STANDARD, KEY_CONNECTOR):
        raise InvalidRequest(f"unknown key kind: {kind}")
    clean_name = readable(name or "", "name").strip() or "API key"
    if len(clean_name) > MAX_NAME_LENGTH:
        raise InvalidRequest(f"name is longer than {MAX_NAME_LENGTH} characters")
    granted = normalise_scopes(scopes)
    with store.unit_of_work() as uow:
        issued = _mint(uow, clock, account_id, clean_name, granted, connection_id, kind)
        uow.commit()
    return issued


def _mint(
    uow: UnitOfWork,
    clock: Clock,
    account_id: str,
    name: str,
    granted: tuple[str, ...],
    connection_id: str | None,
    kind: str,
) -> IssuedKey:
    if connection_id is not None:
        connection = uow.connections.get_connection(connection_id)
        if connection is None or connection.account_id != account_id:
            # What names nothing is a body field, not the path: say which, as for every bad body field.
            raise NotFound(no_such("connection", connection_id), field="connectionId")
    now = clock.now()
    if live_keys(uow.keys, account_id, now) >= MAX_LIVE_KEYS:
        raise Conflict(TOO_MANY_KEYS, maxLiveKeys=MAX_LIVE_KEYS)
    key_id = new_id("key")
    secret = generate_secret()
    key = ApiKey(
        id=key_id,
        account_id=account_id,
        name=name,
        prefix=display_prefix(secret),
        scopes=granted,
        connection_id=connection_id,
        kind=kind,
        created_at=now,
        lineage_id=key_id,
    )
    uow.keys.add_key(key, hash_secret(secret))
    uow.audit.add_audit(AuditEvent(at=now, event="key.minted", account_id=account_id, key_id=key_id))
    return IssuedKey(key=key, secret=secret)


def live_keys(records: KeyRecords, account_id: str, now: datetime) -> int:
    """How many keys of the account work now (a rotated key in its grace period included)."""
    return sum(1 for key in records.list_keys(account_id) if key.is_live(now))


def _own_key(records: KeyRecords, account_id: str, key_id: str) -> ApiKey:
    key = records.get_key(key_id)
    # Another account's key answers exactly as a key that does not exist.
    if key is None or key.account_id != account_id:
        raise NotFound(no_such("key", key_id))
    return key


def rotate_key(store: KeyStore, clock: Clock, *, account_id: str, key_id: str, grace: bool = True) -> IssuedKey:
    """Issue a successor with the same name, scopes, binding and kind.

    - the old key works for 24 hours more (``grace`` False: it ends now, for a leaked key);
    - a predecessor still in its grace window ends now;
    - a revoked key, or one already rotated, cannot be rotated (409): rotate its successor instead;
    - one unit of work: of several rotations of one key at once, one succeeds and the others answer 409,
      as they would one after the other.
    """
    with store.unit_of_work() as uow:
        issued = _rotate(uow, clock, account_id, key_id, grace)
        uow.commit()
    return issued


def rotation_refusal(key: ApiKey) -> str | None:
    """Why ``key`` cannot be rotated (``rotate_key`` answers it as a 409), or None when it can: read by
    pages that offer the rotation, so that they offer it only where it would be done."""
    if key.kind == KEY_CONNECTOR:
        # Its credentials are OAuth tokens that the client refreshes itself; a new secret would turn
        # the grant into a plain key shown to whoever rotated it.
        return "a connector key cannot be rotated: its client refreshes its own tokens; revoke it instead"
    if key.revoked_at is not None:
        return "this key is revoked and cannot be rotated"
    if key.expires_at is not None:
        return "this key was already rotated; rotate its successor"
    return None


def _rotate(uow: UnitOfWork, clock: Clock, account_id: str, key_id: str, grace: bool) -> IssuedKey:
    old = _own_key(uow.keys, account_id, key_id)
    now = clock.now()
    refusal = rotation_refusal(old)
    if refusal is not None:
        raise Conflict(refusal)
    for sibling in uow.keys.list_keys(account_id):
        if sibling.lineage_id == old.lineage_id and sibling.id != old.id and sibling.is_live(now):
            uow.keys.end_key(sibling.id, expires_at=now)  # a predecessor still in its grace window
    uow.keys.end_key(old.id, expires_at=now + ROTATION_GRACE if grace else now)
    new_key_id = new_id("key")
    secret = generate_secret()
    new = attrs.evolve(
        old,
        id=new_key_id,
        prefix=display_prefix(secret),
        created_at=now,
        last_used_at=None,
        expires_at=None,
        revoked_at=None,
    )
    uow.keys.add_key(new, hash_secret(secret))
    uow.audit.add_audit(
        AuditEvent(
            at=now,
            event="key.rotated",
            account_id=account_id,
            key_id=old.id,
            detail=f"successor={new_key_id} grace={'24h' if grace else '0'}",
        )
    )
    return IssuedKey(key=new, secret=secret)


def revoke_key(store: KeyStore, clock: Clock, *, account_id: str, key_id: str, reason: str | None = None) -> ApiKey:
    """End the key at once, and any predecessor of it still in its grace window (never its successor: a
    user revoking the old key after a rotation keeps the new one); a connector key's OAuth tokens are
    forgotten. Idempotent. One unit of work: a rotation racing it cannot undo it. ``reason`` goes to the
    audit line."""
    with store.unit_of_work() as uow:
        revoked = _revoke(uow, clock, account_id, key_id, reason)
        uow.commit()
    return revoked


@attrs.frozen
class LeakedKey:
    """What ``revoke_leaked_key`` found: the key (None: no key has that value) and whether it was live."""

    key: ApiKey | None
    was_live: bool


def revoke_leaked_key(store: KeyStore, clock: Clock, presented: str) -> LeakedKey:
    """For an operator acting on a leaked value (a secret scanner's report, a key pasted in public): the
    key whose value it is, revoked at once with its predecessors in grace, whoever owns it. The key shape
    exists so that scanners find leaked keys; this is what answers them. A value that is not a key's
    shape is ``InvalidRequest``."""
    presented = presented.strip()
    if not has_valid_shape(presented):
        raise InvalidRequest("not an API key: cda_ followed by 49 letters and digits whose checksum holds")
    match = _key_of_value(store, presented)
    if match is None:
        return LeakedKey(None, was_live=False)
    was_live = match.is_live(clock.now())
    revoked = revoke_key(store, clock, account_id=match.account_id, key_id=match.id, reason="leaked: by the operator")
    return LeakedKey(revoked, was_live=was_live)


def _revoke(uow: UnitOfWork, clock: Clock, account_id: str, key_id: str, reason: str | None = None) -> ApiKey:
    key = _own_key(uow.keys, account_id, key_id)
    now = clock.now()
    if key.revoked_at is not None:
        return key
    revoked = attrs.evolve(key, revoked_at=now)
    uow.keys.end_key(key.id, revoked_at=now)
    lineage = [sibling for sibling in uow.keys.list_keys(account_id) if sibling.lineage_id == key.lineage_id]
    predecessors = lineage[: next(i for i, sibling in enumerate(lineage) if sibling.id == key.id)]  # oldest first
    for sibling in predecessors:
        if sibling.is_live(now):
            uow.keys.end_key(sibling.id, revoked_at=now)
    if key.kind == KEY_CONNECTOR:
        # Its tokens already fail (they answer only for a live key); forgetting them keeps no dead
        # credentials around.
        uow.oauth.delete_oauth_tokens(key.id)
    uow.audit.add_audit(AuditEvent(at=now, event="key.revoked", account_id=account_id, key_id=key.id, detail=reason))
    return revoked


def authenticate_key(store: KeyStore, clock: Clock, presented: str, refusals: RefusalAudit) -> ApiKey:
    """The live key whose value is ``presented``, or ``Unauthorized`` with one message for every reason.

    A value with the wrong shape or checksum is refused before any store look-up. A well-formed key
    that is unknown, revoked or past its grace window is written to the audit table as refused, through
    ``refusals`` (at most one line a minute per key, and per worker for all unknown values together).
    """
    if not has_valid_shape(presented):
        raise Unauthorized(UNAUTHORIZED_MESSAGE)
    prefix = display_prefix(presented)
    match = _key_of_value(store, presented)
    now = clock.now()
    if match is None or not match.is_live(now):
        reason = "unknown" if match is None else ("revoked" if match.revoked_at else "expired")
        refusals.record(
            store,
            AuditEvent(
                at=now,
                event="key.refused",
                account_id=match.account_id if match else None,
                key_id=match.id if match else None,
                subject=prefix,
                detail=reason,
            ),
        )
        raise Unauthorized(UNAUTHORIZED_MESSAGE)
    return match


def _key_of_value(store: KeyStore, presented: str) -> ApiKey | None:
    """The key whose value is ``presented`` (well-formed), live or not: looked up by its display prefix,
    then every candidate's stored hash compared in constant time (never a look-up by the hash itself)."""
    wanted = hash_secret(presented)
    match = None
    for candidate, stored_hash in store.find_keys_by_prefix(display_prefix(presented)):
        if hmac.compare_digest(stored_hash, wanted):
            match = candidate
    return match


GRACE_CHOICES = ("0", "24h")


def _grace(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if value not in GRACE_CHOICES:
        raise BadField(
            attribute.name, "must be 0 (end the old key now) or 24h (the default)", allowed=list(GRACE_CHOICES)
        )


@attrs.frozen
class KeyRotation:
    """How a key is rotated: ``grace`` "24h" (the old key works 24 hours more) or "0" (it ends now: for a
    leaked key)."""

    grace: str = attrs.field(
        default="24h",
        validator=_grace,
        metadata=expects(
            "0 or 24h",
            enum=list(GRACE_CHOICES),
            default="24h",
            description="24h: the old key keeps working 24 hours more, while clients move to the new one; "
            "0: it stops now (a leaked key).",
        ),
    )

    @property
    def keeps_old_key(self) -> bool:
        return self.grace != "0"


@attrs.frozen
class NewKey:
    """A key to mint: its name (default "API key"), its scopes (default: the read scopes), and the connection
    it is bound to (None: it acts through the account's active connection). ``mint_key`` checks each."""

    name: str | None = attrs.field(
        default=None,
        validator=at_most(MAX_NAME_LENGTH),
        # Read by ``mint_key`` (refused there, naming the field); published so a client knows.
        metadata=expects("a string", pattern=READABLE_PATTERN),
    )
    scopes: list[str] | None = attrs.field(
        default=None, metadata=expects("a list of scope names", items={"enum": list(ALL_SCOPES)}, minItems=1)
    )
    connection_id: str | None = None
