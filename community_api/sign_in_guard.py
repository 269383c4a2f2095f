"""Throttling sign-in attempts so that guessing is slow and a stranger can never lock the owner out.

This follows OWASP's Authentication Cheat Sheet and its "device cookies" (slowing down online guessing):
- a client without a device cookie for the email is counted three ways, and any one bound holds it back:
  per (email, client address) 5 in 15 minutes, per address over all emails 20 in 15 minutes, per email
  over all addresses 100 in an hour;
- a client holding a valid device cookie for that email (signed, set at every successful sign-in to it)
  is counted only on its own device: 5 in 15 minutes. So a stranger, however many addresses they use, can
  exhaust the untrusted bounds of an email but never the owner's browser's;
- an IPv6 address counts by its /64 (one subscriber's range), an IPv4 address by itself.

Counting and checking are one step (a unit of work): the attempt is written *before* the password is
checked (which is slow on purpose), and a success is written after, so an attempt in flight already
counts. What counts against a bound is attempts less successes in its window: guesses sent at once can
never pass it.

The counts (``AttemptCounts``, kept a day, not the audit trail: strangers write them) name their subject
by a hash (``login-pair:…``), so they hold no email in clear; a successful sign-in also leaves one
``login.succeeded`` line on the account's audit trail.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import secrets
from collections.abc import Sequence
from datetime import datetime, timedelta

import attrs

from community_api.errors import RateLimited
from community_api.model import AuditEvent
from community_api.ports import Clock, KeyStore

ATTEMPT = "login.attempt"
SUCCEEDED = "login.succeeded"
# ``detail`` of a ``SUCCEEDED`` line when the browser showed no valid device cookie for the email: it had not
# signed in to this account (in the cookie's 180 days), or its cookies were cleared. It is what tells the
# owner's own sign-ins from someone else's on the Account page; no address is kept for that.
NEW_BROWSER = "new-browser"
DEVICE_COOKIE_LIFETIME = timedelta(days=180)
_MAX_COOKIE = 256


@attrs.frozen
class Bound:
    kind: str  # pair, addr, email, device
    value: str
    limit: int
    window: timedelta

    @property
    def subject(self) -> str:
        return f"login-{self.kind}:{hashlib.sha256(self.value.encode()).hexdigest()[:32]}"

    def since(self, now: datetime) -> datetime:
        """Where the window starts: an attempt exactly one window old no longer counts, so that
        ``Retry-After`` (the window) holds."""
        return now - self.window + timedelta(microseconds=1)


PER_PAIR = (5, timedelta(minutes=15))
PER_ADDRESS = (20, timedelta(minutes=15))
PER_EMAIL = (100, timedelta(hours=1))
PER_DEVICE = (5, timedelta(minutes=15))


def client_key(address: str) -> str:
    """The address a client is counted by: an IPv6 address by its /64, anything else as it is."""
    try:
        parsed = ipaddress.ip_address(address.strip())
    except ValueError:
        return address.strip()[:64] or "unknown"
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        return str(ipaddress.IPv6Network((parsed, 64), strict=False))
    return str(parsed)


class DeviceCookies:
    """Signed proof that this browser signed in to an email before: ``v1.<device>.<issued>.<email tag>.<mac>``.

    The email is kept only as a tag (a keyed hash), the signature is HMAC-SHA256 with a key derived from the
    service secret, so a cookie cannot be made or moved to another email; it lives 180 days."""

    def __init__(self, key: bytes) -> None:
        self._key = hmac.new(key, b"community-api device cookie v1", hashlib.sha256).digest()

    def issue(self, email: str, now: datetime, device_id: str | None = None) -> str:
        body = f"v1.{device_id or secrets.token_urlsafe(12)}.{int(now.timestamp())}.{self._tag(email)}"
        return f"{body}.{self._mac(body)}"

    def device(self, value: str | None, email: str, now: datetime) -> str | None:
        """The device id of a valid cookie for ``email``, else None (missing, forged, other email, old)."""
        if not value or len(value) > _MAX_COOKIE:
            return None
        parts = value.split(".")
        if len(parts) != 5 or parts[0] != "v1":
            return None
        body, mac = ".".join(parts[:4]), parts[4]
        if not hmac.compare_digest(mac.encode(), self._mac(body).encode()):
            return None
        _, device_id, issued, tag = parts[:4]
        if not hmac.compare_digest(tag.encode(), self._tag(email).encode()) or not issued.isdigit():
            return None
        if now.timestamp() - int(issued) > DEVICE_COOKIE_LIFETIME.total_seconds():
            return None
        return device_id

    def _tag(self, email: str) -> str:
        return self._mac("email:" + email)[:22]

    def _mac(self, text: str) -> str:
        digest = hmac.new(self._key, text.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def bounds_for(email: str, address: str, device_id: str | None) -> tuple[Bound, ...]:
    if device_id is not None:
        return (Bound("device", device_id, *PER_DEVICE),)
    where = client_key(address)
    return (
        Bound("pair", f"{email}|{where}", *PER_PAIR),
        Bound("addr", where, *PER_ADDRESS),
        Bound("email", email, *PER_EMAIL),
    )


def admit(
    store: KeyStore,
    clock: Clock,
    bounds: Sequence[Bound],
    *,
    events: tuple[str, str] = (ATTEMPT, SUCCEEDED),
    refusal: str = "too many failed sign-ins",
) -> None:
    """Count one attempt against every bound, or raise ``RateLimited`` (``refusal``, and when to try again)
    counting nothing: one step. ``events``: the counted events of an attempt and of one that no longer
    counts (``succeeded``)."""
    attempt, cleared = events
    now = clock.now()
    with store.unit_of_work() as uow:
        for bound in bounds:
            since = bound.since(now)
            used = uow.attempts.count_attempts(attempt, bound.subject, since) - uow.attempts.count_attempts(
                cleared, bound.subject, since
            )
            if used >= bound.limit:
                wait = int(bound.window.total_seconds())
                raise RateLimited(f"{refusal}: try again in {wait // 60} minutes", wait, bound=bound.kind)
        for bound in bounds:
            uow.attempts.add_attempt(attempt, bound.subject, now)
        uow.commit()


def succeeded(
    store: KeyStore,
    clock: Clock,
    bounds: Sequence[Bound],
    account_id: str,
    *,
    event: str = SUCCEEDED,
    trail: bool = True,
    detail: str | None = None,
) -> None:
    """The attempt was right (or failed for no fault of its credentials): it no longer counts. ``trail``:
    the account's audit trail gets one ``event`` line too (a sign-in), with ``detail``."""
    now = clock.now()
    with store.unit_of_work() as uow:
        for bound in bounds:
            uow.attempts.add_attempt(event, bound.subject, now)
        if trail:
            uow.audit.add_audit(AuditEvent(at=now, event=event, account_id=account_id, detail=detail))
        uow.commit()
