"""The in-memory platform's sessions: tokens that say which member signed in, until they are ended."""

from __future__ import annotations

import hmac
import secrets


class FakeSessions:
    """Session tokens of ``FakePlatformGateway``. With a ``signing_key`` a token is self-contained and signed
    (as the platform's JWT is), so several instances — one per gunicorn worker in end-to-end tests — accept
    each other's sessions; without one, only the tokens this instance gave."""

    def __init__(self, signing_key: bytes | None = None) -> None:
        self._signing_key = signing_key
        self._users: dict[str, str] = {}  # token -> user id
        self._expired_users: set[str] = set()

    def new(self, user_id: str) -> str:
        """A fresh session of ``user_id`` (a new sign-in: their signed tokens are accepted again)."""
        token = secrets.token_urlsafe(24)
        if self._signing_key is not None:
            body = f"{user_id}.{token}"
            token = f"{body}.{self._sign(body)}"
            self._expired_users.discard(user_id)
        self._users[token] = user_id
        return token

    def user_of(self, token: str) -> str | None:
        """The member ``token`` is a live session of, or None."""
        return self._users.get(token) or self._signed_user(token)

    def expire(self, user_id: str) -> None:
        """End every session of ``user_id``."""
        self._users = {t: u for t, u in self._users.items() if u != user_id}
        self._expired_users.add(user_id)

    def _sign(self, body: str) -> str:
        assert self._signing_key is not None
        return hmac.new(self._signing_key, body.encode(), "sha256").hexdigest()

    def _signed_user(self, token: str) -> str | None:
        if self._signing_key is None or token.count(".") != 2:
            return None
        body, _, signature = token.rpartition(".")
        user_id = body.partition(".")[0]
        if not hmac.compare_digest(signature, self._sign(body)) or user_id in self._expired_users:
            return None
        self._users[token] = user_id  # verified once; ``expire`` forgets it like any session
        return user_id
