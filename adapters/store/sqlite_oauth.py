"""The OAuth part of the SQLite ``KeyStore``: clients, authorization codes and tokens (schema version 2).

A mixin of ``SqliteKeyStore``, over its per-thread connections. "Use" of a code or a refresh token is
one ``UPDATE … WHERE used_at IS NULL`` inside ``BEGIN IMMEDIATE`` with the read of the record as it was,
so that of two workers redeeming the same code or refresh token at once exactly one wins.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlite_utils import Database

from adapters.store.sqlite_schema import dt, dt_or_none, ts, ts_or_none
from community_api.errors import Conflict
from community_api.oauth_model import AuthorizationCode, OAuthClient, OAuthToken

_CODE_BY_HASH = (
    "SELECT code_hash, client_id, account_id, redirect_uri, code_challenge, resource, scopes, connection_id,"
    " created_at, expires_at, used_at, key_id, redirect_uri_sent FROM oauth_codes WHERE code_hash = ?"
)
_SELECT_GRANT_CREDENTIAL = (
    "SELECT token_hash, kind, key_id, client_id, resource, created_at, expires_at, used_at"
    " FROM oauth_tokens WHERE token_hash = ?"
)


def _code(row: tuple[Any, ...]) -> AuthorizationCode:
    return AuthorizationCode(
        code_hash=row[0],
        client_id=row[1],
        account_id=row[2],
        redirect_uri=row[3],
        code_challenge=row[4],
        resource=row[5],
        scopes=tuple(row[6].split()),
        connection_id=row[7],
        created_at=dt(row[8]),
        expires_at=dt(row[9]),
        used_at=dt_or_none(row[10]),
        key_id=row[11],
        redirect_uri_sent=bool(row[12]),
    )


def _token(row: tuple[Any, ...]) -> OAuthToken:
    return OAuthToken(row[0], row[1], row[2], row[3], row[4], dt(row[5]), dt(row[6]), dt_or_none(row[7]))


class SqliteOAuthRecords:
    if TYPE_CHECKING:  # provided by SqliteKeyStore

        @property
        def _db(self) -> Database: ...

        def _one(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None: ...

        def _immediate(self) -> AbstractContextManager[Database]: ...

    def add_oauth_client(self, client: OAuthClient) -> None:
        try:
            self._db.execute(
                "INSERT INTO oauth_clients (id, name, redirect_uris, created_at) VALUES (?, ?, ?, ?)",
                (client.id, client.name, json.dumps(list(client.redirect_uris)), ts(client.created_at)),
            )
        except sqlite3.IntegrityError:
            raise Conflict(f"client {client.id} exists") from None

    def get_oauth_client(self, client_id: str) -> OAuthClient | None:
        row = self._one(
            "SELECT id, name, redirect_uris, created_at, approved_at FROM oauth_clients WHERE id = ?", (client_id,)
        )
        if row is None:
            return None
        return OAuthClient(
            id=row[0],
            name=row[1],
            redirect_uris=tuple(json.loads(row[2])),
            created_at=dt(row[3]),
            approved_at=dt_or_none(row[4]),
        )

    def approve_oauth_client(self, client_id: str, at: datetime) -> None:
        self._db.execute(
            "UPDATE oauth_clients SET approved_at = ? WHERE id = ? AND approved_at IS NULL", (ts(at), client_id)
        )

    def count_unapproved_oauth_clients(self) -> int:
        row = self._one("SELECT count(*) FROM oauth_clients WHERE approved_at IS NULL", ())
        return int(row[0]) if row else 0

    def forget_unapproved_oauth_clients(self, registered_before: datetime) -> int:
        cursor = self._db.execute(
            "DELETE FROM oauth_clients WHERE approved_at IS NULL AND created_at < ?", (ts(registered_before),)
        )
        return int(cursor.rowcount)

    def add_authorization_code(self, code: AuthorizationCode) -> None:
        c = code
        with self._immediate() as db:
            # Codes live 10 minutes; one a day past its expiry is never redeemable, nor replay-relevant.
            db.execute("DELETE FROM oauth_codes WHERE expires_at < ?", (ts(c.created_at - timedelta(days=1)),))
            try:
                db.execute(
                    "INSERT INTO oauth_codes (code_hash, client_id, account_id, redirect_uri, code_challenge,"
                    " resource, scopes, connection_id, created_at, expires_at, used_at, key_id, redirect_uri_sent)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        c.code_hash, c.client_id, c.account_id, c.redirect_uri, c.code_challenge, c.resource,
                        " ".join(c.scopes), c.connection_id, ts(c.created_at), ts(c.expires_at),
                        ts_or_none(c.used_at), c.key_id, int(c.redirect_uri_sent),
                    ),
                )  # fmt: skip
            except sqlite3.IntegrityError:
                raise Conflict("authorization code exists") from None

    def use_authorization_code(self, code_hash: str, at: datetime) -> AuthorizationCode | None:
        with self._immediate() as db:
            row = db.execute(_CODE_BY_HASH, (code_hash,)).fetchone()
            if row is not None and row[10] is None:
                db.execute("UPDATE oauth_codes SET used_at = ? WHERE code_hash = ?", (ts(at), code_hash))
        return None if row is None else _code(row)

    def set_authorization_code_key(self, code_hash: str, key_id: str) -> None:
        self._db.execute("UPDATE oauth_codes SET key_id = ? WHERE code_hash = ?", (key_id, code_hash))

    def add_oauth_token(self, token: OAuthToken) -> None:
        t = token
        with self._immediate() as db:
            db.execute("DELETE FROM oauth_tokens WHERE key_id = ? AND expires_at <= ?", (t.key_id, ts(t.created_at)))
            try:
                db.execute(
                    "INSERT INTO oauth_tokens (token_hash, kind, key_id, client_id, resource, created_at,"
                    " expires_at, used_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        t.token_hash, t.kind, t.key_id, t.client_id, t.resource, ts(t.created_at),
                        ts(t.expires_at), ts_or_none(t.used_at),
                    ),
                )  # fmt: skip
            except sqlite3.IntegrityError:
                raise Conflict("token exists") from None

    def get_oauth_token(self, token_hash: str) -> OAuthToken | None:
        row = self._one(_SELECT_GRANT_CREDENTIAL, (token_hash,))
        return None if row is None else _token(row)

    def use_oauth_token(self, token_hash: str, at: datetime) -> OAuthToken | None:
        with self._immediate() as db:
            row = db.execute(_SELECT_GRANT_CREDENTIAL, (token_hash,)).fetchone()
            if row is not None and row[7] is None:
                db.execute("UPDATE oauth_tokens SET used_at = ? WHERE token_hash = ?", (ts(at), token_hash))
        return None if row is None else _token(row)

    def delete_oauth_tokens(self, key_id: str) -> None:
        self._db.execute("DELETE FROM oauth_tokens WHERE key_id = ?", (key_id,))
