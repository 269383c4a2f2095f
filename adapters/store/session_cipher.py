"""Encryption at rest of platform session tokens.

A platform session is as good as the platform account's password, so a copy of the database file (a
backup, a stolen disk) must not hand it out. The key is derived from the service secret with
HKDF-SHA256 (the secret is expected to be long and random, as a service secret is; HKDF does not
stretch a weak password). Tokens are sealed with AES-256-GCM under a fresh 96-bit nonce, with the
connection id as associated data: a sealed token copied onto another connection's row does not open.

Stored layout: one version byte, the 12-byte nonce, then the ciphertext with its 16-byte tag.

Changing the secret (``COMMUNITY_API_PREVIOUS_SECRET``, docs/deployment.md): the cipher is given the
secret before as well. Tokens sealed under it still open; every token is sealed under the new one; and
``reseal`` moves a stored token from the old secret to the new, so that the old secret can then be dropped
without a connection linked again.
"""

from __future__ import annotations

import os
from typing import Literal

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

_VERSION = b"\x01"
_NONCE_LENGTH = 12
_SALT = b"community-api/key-store"
_INFO = b"platform-session/aes-256-gcm/v1"


class SessionCipher:
    def __init__(self, secret: str, previous_secret: str = "") -> None:
        if not secret:
            raise ValueError("the key store needs a non-empty service secret to encrypt sessions")
        self._aead = _aead(secret)
        # Opens what was sealed before the secret changed; never seals.
        self._previous = _aead(previous_secret) if previous_secret else None

    def seal(self, token: str, connection_id: str) -> bytes:
        nonce = os.urandom(_NONCE_LENGTH)
        sealed = self._aead.encrypt(nonce, token.encode("utf-8"), connection_id.encode("utf-8"))
        return _VERSION + nonce + sealed

    def open(self, blob: bytes | None, connection_id: str) -> str | None:
        """The token, or None when it cannot be opened (another secret, a damaged or moved value).

        None rather than an error: the core treats a missing session as an expired connection, which
        asks the user to re-link it, the one remedy there is once the secret has changed."""
        token = _open(self._aead, blob, connection_id)
        if token is None and self._previous is not None:
            token = _open(self._previous, blob, connection_id)
        return token

    def reseal(self, blob: bytes | None, connection_id: str) -> tuple[Resealed, bytes | None]:
        """What a stored token is under the secrets this cipher has, and when it was sealed under the
        previous secret, the same token sealed under the current one (to store in its place)."""
        if _open(self._aead, blob, connection_id) is not None:
            return "current", None
        token = None if self._previous is None else _open(self._previous, blob, connection_id)
        if token is None:
            return "lost", None
        return "resealed", self.seal(token, connection_id)


Resealed = Literal["current", "resealed", "lost"]


def _aead(secret: str) -> AESGCM:
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=_SALT, info=_INFO).derive(secret.encode("utf-8"))
    return AESGCM(key)


def _open(aead: AESGCM, blob: bytes | None, connection_id: str) -> str | None:
    if not blob or blob[:1] != _VERSION:
        return None
    nonce, sealed = blob[1 : 1 + _NONCE_LENGTH], blob[1 + _NONCE_LENGTH :]
    try:
        return aead.decrypt(nonce, sealed, connection_id.encode("utf-8")).decode("utf-8")
    except (InvalidTag, ValueError):
        return None
