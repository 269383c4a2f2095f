"""Signed tokens: the session cookie (``auth_token``) and the firewall cookie (``aws-waf-token``).

The session token is JWT-shaped (``header.payload.signature``, HS256) and carries ``user_id`` and ``exp``
like the platform's. Both kinds are signed with HMAC-SHA256 under a random key drawn once per process, so
they cannot be forged and do not survive a restart. Each token carries a serial number; "expire every
session of alice" or "expire every firewall token" only needs to remember the first serial still valid.

What a token says never changes, so the checks remember the last few thousand tokens they decoded: a
browser sends the same two cookies with every request. Whether a token is still good (its expiry, the
serial floors) is decided by the caller on every request.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from functools import lru_cache

REMEMBERED = 4096  # decoded tokens kept per kind


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True, slots=True)
class SessionClaims:
    user_id: str
    exp: int
    serial: int


class Signer:
    """Issues and checks tokens; thread-safe (the serial counter is guarded by the caller's lock)."""

    _HEADER = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key or secrets.token_bytes(32)
        self._serial = 0
        self._sessions = lru_cache(maxsize=REMEMBERED)(self._decode_session)
        self._firewalls = lru_cache(maxsize=REMEMBERED)(self._decode_firewall)

    def next_serial(self) -> int:
        self._serial += 1
        return self._serial

    @property
    def peek_serial(self) -> int:
        """The serial the next token will carry."""
        return self._serial + 1

    def _sign(self, kind: str, body: str) -> str:
        return _b64(hmac.new(self._key, f"{kind}.{body}".encode(), hashlib.sha256).digest())

    def session(self, user_id: str, now: float, ttl: float) -> str:
        payload = {"user_id": user_id, "iat": int(now), "exp": int(now + ttl), "sid": self.next_serial()}
        body = f"{self._HEADER}.{_b64(json.dumps(payload, separators=(',', ':')).encode())}"
        return f"{body}.{self._sign('jwt', body)}"

    def check_session(self, token: str) -> SessionClaims | None:
        """The claims of a genuine token (expired or not), or None when it is forged or malformed."""
        return self._sessions(token)

    def _decode_session(self, token: str) -> SessionClaims | None:
        body, _, sig = token.rpartition(".")
        if not body or not hmac.compare_digest(sig, self._sign("jwt", body)):
            return None
        try:
            payload = json.loads(_unb64(body.split(".")[1]))
            return SessionClaims(str(payload["user_id"]), int(payload["exp"]), int(payload["sid"]))
        except (ValueError, KeyError, IndexError, TypeError):
            return None

    def firewall(self, now: float, ttl: float) -> tuple[str, int]:
        exp = int(now + ttl)
        body = _b64(json.dumps({"exp": exp, "n": self.next_serial(), "r": secrets.token_hex(4)}).encode())
        return f"{body}.{self._sign('waf', body)}", exp

    def check_firewall(self, token: str) -> tuple[int, int] | None:
        """``(exp, serial)`` of a genuine firewall token, else None."""
        return self._firewalls(token)

    def _decode_firewall(self, token: str) -> tuple[int, int] | None:
        body, _, sig = token.partition(".")
        if not body or not hmac.compare_digest(sig, self._sign("waf", body)):
            return None
        try:
            payload = json.loads(_unb64(body))
            return int(payload["exp"]), int(payload["n"])
        except (ValueError, KeyError, TypeError):
            return None
