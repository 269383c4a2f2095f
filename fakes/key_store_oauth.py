"""The OAuth records of the in-memory key store (``FakeKeyStore``), as ``adapters/store/sqlite_oauth.py``
holds them for the SQLite store: connector clients, authorization codes and tokens."""

from __future__ import annotations

import threading
from datetime import datetime
from typing import TYPE_CHECKING

import attrs

from community_api.errors import Conflict
from community_api.oauth_model import AuthorizationCode, OAuthClient, OAuthToken


class FakeOAuthRecords:
    """State: three dicts, made here and snapshotted with the store's others by its unit of work (every
    ``_`` dict of the instance); atomic under the store's lock."""

    if TYPE_CHECKING:  # provided by FakeKeyStore
        _lock: threading.RLock

    def __init__(self) -> None:
        self._oauth_clients: dict[str, OAuthClient] = {}
        self._oauth_codes: dict[str, AuthorizationCode] = {}
        self._oauth_tokens: dict[str, OAuthToken] = {}

    def add_oauth_client(self, client: OAuthClient) -> None:
        with self._lock:
            if client.id in self._oauth_clients:
                raise Conflict(f"client {client.id} exists")
            self._oauth_clients[client.id] = client

    def get_oauth_client(self, client_id: str) -> OAuthClient | None:
        with self._lock:
            return self._oauth_clients.get(client_id)

    def approve_oauth_client(self, client_id: str, at: datetime) -> None:
        with self._lock:
            found = self._oauth_clients.get(client_id)
            if found is not None and found.approved_at is None:
                self._oauth_clients[client_id] = attrs.evolve(found, approved_at=at)

    def count_unapproved_oauth_clients(self) -> int:
        with self._lock:
            return sum(1 for c in self._oauth_clients.values() if c.approved_at is None)

    def forget_unapproved_oauth_clients(self, registered_before: datetime) -> int:
        with self._lock:
            gone = [
                c.id for c in self._oauth_clients.values() if c.approved_at is None and c.created_at < registered_before
            ]
            for client_id in gone:
                del self._oauth_clients[client_id]
            return len(gone)

    def add_authorization_code(self, code: AuthorizationCode) -> None:
        with self._lock:
            if code.code_hash in self._oauth_codes:
                raise Conflict("authorization code exists")
            self._oauth_codes[code.code_hash] = code

    def use_authorization_code(self, code_hash: str, at: datetime) -> AuthorizationCode | None:
        with self._lock:
            found = self._oauth_codes.get(code_hash)
            if found is not None and found.used_at is None:
                self._oauth_codes[code_hash] = attrs.evolve(found, used_at=at)
            return found

    def set_authorization_code_key(self, code_hash: str, key_id: str) -> None:
        with self._lock:
            found = self._oauth_codes.get(code_hash)
            if found is not None:
                self._oauth_codes[code_hash] = attrs.evolve(found, key_id=key_id)

    def add_oauth_token(self, token: OAuthToken) -> None:
        with self._lock:
            if token.token_hash in self._oauth_tokens:
                raise Conflict("token exists")
            # Like the SQLite store: the grant's tokens that can never be accepted again are forgotten.
            for stale in [
                t.token_hash
                for t in self._oauth_tokens.values()
                if t.key_id == token.key_id and t.expires_at <= token.created_at
            ]:
                del self._oauth_tokens[stale]
            self._oauth_tokens[token.token_hash] = token

    def get_oauth_token(self, token_hash: str) -> OAuthToken | None:
        with self._lock:
            return self._oauth_tokens.get(token_hash)

    def use_oauth_token(self, token_hash: str, at: datetime) -> OAuthToken | None:
        with self._lock:
            found = self._oauth_tokens.get(token_hash)
            if found is not None and found.used_at is None:
                self._oauth_tokens[token_hash] = attrs.evolve(found, used_at=at)
            return found

    def delete_oauth_tokens(self, key_id: str) -> None:
        with self._lock:
            for token_hash in [h for h, t in self._oauth_tokens.items() if t.key_id == key_id]:
                del self._oauth_tokens[token_hash]
