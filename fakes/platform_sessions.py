"""The in-memory platform's sessions: tokens that say which member signed in and when the session ends,
until they end or are ended."""

from __future__ import annotations

import hmac
import secrets
from datetime import UTC, datetime, timedelta

# The platform's session lives about a year (PLATFORM.md, "Sign-in and the firewall").
SESSION_LIFETIME = timedelta(days=365)


class FakeSessions:
    """Session tokens of ``FakePlatformGateway``. With a ``signing_key`` a token is self-contained and signed
    (as the platform's JWT is: member and end), so several instances — one per gunicorn worker in end-to-end
    tests — accept each other's sessions; without one, only the tokens this instance gave. A token is good
    until its end (``SESSION_LIFETIME`` after it was issued) or until ``expire`` ends its member's sessions."""

    def __init__(self, signing_key: bytes | None = None) -> None:
        self._signing_key = signing_key
        self._tokens: dict[str, tuple[str, datetime]] = {}  # token -> (user id, end)
        self._expired_users: set[str] = set()

    def new(self, user_id: str, now: datetime, lifetime: timedelta = SESSION_LIFETIME) -> str:
        """A fresh session of ``user_id`` from ``now`` (a new sign-in: their signed tokens are accepted
        again). ``lifetime`` may be negative, for a token that has already ended."""
        ends = datetime.fromtimestamp(int((now + lifetime).timestamp()), UTC)  # whole seconds, as a JWT's exp
        token = secrets.token_urlsafe(24)
        if self._signing_key is not None:
            body = f"{user_id}.{int(ends.timestamp())}.{token}"
            token = f"{body}.{self._sign(body)}"
            self._expired_users.discard(user_id)
        self._tokens[token] = (user_id, ends)
        return token

    def ends(self, token: str) -> datetime | None:
        """When ``token`` says its session ends (ended or not), or None for a token this platform never gave."""
        found = self._tokens.get(token) or self._signed(token)
        return None if found is None else found[1]

    def user_of(self, token: str, now: datetime) -> str | None:
        """The member ``token`` is a live session of at ``now``, or None."""
        found = self._tokens.get(token) or self._signed(token)
        if found is None or now >= found[1]:
            return None
        return found[0]

    def expire(self, user_id: str) -> None:
        """End every session of ``user_id``."""
        self._tokens = {t: found for t, found in self._tokens.items() if found[0] != user_id}
        self._expired_users.add(user_id)

    def _sign(self, body: str) -> str:
        assert self._signing_key is not None
        return hmac.new(self._signing_key, body.encode(), "sha256").hexdigest()

    def _signed(self, token: str) -> tuple[str, datetime] | None:
        if self._signing_key is None or token.count(".") != 3:
            return None
        body, _, signature = token.rpartition(".")
        user_id, ends, _ = body.split(".")
        if not hmac.compare_digest(signature, self._sign(body)) or user_id in self._expired_users:
            return None
        found = (user_id, datetime.fromtimestamp(int(ends), UTC))
        self._tokens[token] = found  # verified once; ``expire`` forgets it like any session
        return found
