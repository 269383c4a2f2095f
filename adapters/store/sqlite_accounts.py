"""Accounts and web sessions: a mixin of ``SqliteKeyStore``, over its per-thread connections."""

from __future__ import annotations

import sqlite3
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from sqlite_utils import Database

from adapters.store.sqlite_schema import dt as _dt
from adapters.store.sqlite_schema import ts as _ts
from community_api.email_address import email_key as _email_key
from community_api.errors import Conflict
from community_api.model import Account, WebSession
from community_api.store_ports import MAX_WEB_SESSIONS


class SqliteAccountRecords:
    if TYPE_CHECKING:  # provided by SqliteKeyStore

        @property
        def _db(self) -> Database: ...

        def _one(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None: ...

        def _immediate(self) -> AbstractContextManager[Database]: ...

    def add_account(self, account: Account, password_hash: str) -> None:
        try:
            self._db.execute(
                "INSERT INTO accounts (id, email, email_key, password_hash, created_at) VALUES (?, ?, ?, ?, ?)",
                (
                    account.id,
                    account.email,
                    _email_key(account.email),
                    password_hash,
                    _ts(account.created_at),
                ),
            )
        except sqlite3.IntegrityError as error:
            if "email_key" in str(error):
                raise Conflict("an account with this email exists") from None
            raise Conflict(f"account {account.id} exists") from None

    def get_account(self, account_id: str) -> Account | None:
        row = self._one("SELECT id, email, created_at FROM accounts WHERE id = ?", (account_id,))
        return None if row is None else Account(id=row[0], email=row[1], created_at=_dt(row[2]))

    def find_account_by_email(self, email: str) -> tuple[Account, str] | None:
        row = self._one(
            "SELECT id, email, created_at, password_hash FROM accounts WHERE email_key = ?",
            (_email_key(email),),
        )
        if row is None:
            return None
        return Account(id=row[0], email=row[1], created_at=_dt(row[2])), row[3]

    def list_accounts(self) -> list[Account]:
        rows = self._db.execute("SELECT id, email, created_at FROM accounts ORDER BY created_at, rowid").fetchall()
        return [Account(id=r[0], email=r[1], created_at=_dt(r[2])) for r in rows]

    def count_accounts(self) -> int:
        row = self._one("SELECT count(*) FROM accounts", ())
        return int(row[0]) if row else 0

    def add_web_session(self, session: WebSession) -> None:
        values = (
            session.token_hash,
            session.account_id,
            session.csrf_token,
            _ts(session.created_at),
            _ts(session.expires_at),
        )
        with self._immediate() as db:
            db.execute("DELETE FROM web_sessions WHERE expires_at < ?", (_ts(session.created_at),))
            try:
                db.execute(
                    "INSERT INTO web_sessions (token_hash, account_id, csrf_token, created_at, expires_at)"
                    " VALUES (?, ?, ?, ?, ?)",
                    values,
                )
            except sqlite3.IntegrityError:
                raise Conflict("web session exists") from None
            db.execute(
                "DELETE FROM web_sessions WHERE account_id = ? AND token_hash NOT IN (SELECT token_hash FROM"
                " web_sessions WHERE account_id = ? ORDER BY created_at DESC, token_hash DESC LIMIT ?)",
                (session.account_id, session.account_id, MAX_WEB_SESSIONS),
            )

    def get_web_session(self, token_hash: str) -> WebSession | None:
        row = self._one(
            "SELECT token_hash, account_id, csrf_token, created_at, expires_at FROM web_sessions WHERE token_hash = ?",
            (token_hash,),
        )
        if row is None:
            return None
        return WebSession(row[0], row[1], row[2], _dt(row[3]), _dt(row[4]))

    def delete_web_session(self, token_hash: str) -> None:
        self._db.execute("DELETE FROM web_sessions WHERE token_hash = ?", (token_hash,))

    def delete_web_sessions(self, account_id: str, *, keep: str | None = None) -> None:
        self._db.execute("DELETE FROM web_sessions WHERE account_id = ? AND token_hash IS NOT ?", (account_id, keep))

    def set_password_hash(self, account_id: str, password_hash: str) -> None:
        self._db.execute("UPDATE accounts SET password_hash = ? WHERE id = ?", (password_hash, account_id))

    def delete_account(self, account_id: str) -> None:
        with self._immediate() as db:
            db.execute("DELETE FROM web_sessions WHERE account_id = ?", (account_id,))
            db.execute("DELETE FROM accounts WHERE id = ?", (account_id,))
