"""An honest in-memory ``KeyStore``: it keeps state in dicts and enforces the rules of the real SQLite
store (``adapters/store/sqlite_key_store.py``). ``tests/contract/test_key_store.py`` runs the same cases
against both, so a unit test that passes against this fake says something about production. Its OAuth
records are kept by ``fakes/key_store_oauth.py``, as the SQLite store's by ``sqlite_oauth.py``.

Records are immutable attrs objects, so handing them out never lets a caller change stored state behind
the store's back. One lock makes every method atomic, which is what the real store gets from SQLite
(``claim_idempotency`` in particular: of two concurrent claims exactly one succeeds).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import datetime

import attrs

from community_api.email_address import email_key as _email_key  # as the SQLite store's unique key
from community_api.errors import Conflict
from community_api.model import (
    IDEMPOTENCY_WINDOW,
    IN_FLIGHT,
    Account,
    ApiKey,
    AuditEvent,
    Connection,
    IdempotencyRecord,
    KeyUsage,
    WebSession,
)
from community_api.store_ports import ATTEMPT_RETENTION, MAX_WEB_SESSIONS
from fakes.key_store_oauth import FakeOAuthRecords


class FakeUnitOfWork:
    def __init__(self, store: FakeKeyStore) -> None:
        self.store = self.accounts = self.connections = self.keys = self.audit = self.attempts = store
        self.oauth = self.idempotency = store
        self.committed = False

    def commit(self) -> None:
        self.committed = True


class FakeKeyStore(FakeOAuthRecords):
    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.RLock()
        self._unit_depth = 0
        self._accounts: dict[str, tuple[Account, str]] = {}
        self._web_sessions: dict[str, WebSession] = {}
        self._connections: dict[str, Connection] = {}
        self._platform_sessions: dict[str, str] = {}
        self._keys: dict[str, ApiKey] = {}
        self._key_hashes: dict[str, str] = {}
        self._usage: dict[tuple[str, str], int] = {}
        self._audit: list[AuditEvent] = []
        self._attempts: list[tuple[str, str, datetime]] = []
        self._idempotency: dict[str, IdempotencyRecord] = {}
        self.not_ready: str | None = None  # tests set a reason to make ``ready`` answer it

    def ready(self) -> str | None:
        return self.not_ready

    # --- the unit of work ------------------------------------------------------------------------

    @contextmanager
    def unit_of_work(self) -> Iterator[FakeUnitOfWork]:
        """The store's lock, held for the whole block (other threads wait, as other workers wait for
        SQLite's write lock); the state as it was is kept and put back unless the outermost block
        commits, so the writes land at commit or not at all. A nested block joins the outermost."""
        with self._lock:
            unit = FakeUnitOfWork(self)
            if self._unit_depth:
                self._unit_depth += 1
                try:
                    yield unit
                finally:
                    self._unit_depth -= 1
                return
            before = self._state()
            self._unit_depth = 1
            committed = False
            try:
                yield unit
                committed = unit.committed
            finally:
                self._unit_depth = 0
                if not committed:
                    self._restore(before)

    def _state(self) -> dict[str, object]:
        return {
            name: copy.copy(value)
            for name, value in vars(self).items()
            if name.startswith("_") and isinstance(value, dict | list)
        }

    def _restore(self, state: dict[str, object]) -> None:
        for name, value in state.items():
            setattr(self, name, value)

    # --- accounts and web sessions ---------------------------------------------------------------

    def add_account(self, account: Account, password_hash: str) -> None:
        with self._lock:
            if account.id in self._accounts:
                raise Conflict(f"account {account.id} exists")
            wanted = _email_key(account.email)
            if any(_email_key(a.email) == wanted for a, _ in self._accounts.values()):
                raise Conflict("an account with this email exists")
            self._accounts[account.id] = (account, password_hash)

    def get_account(self, account_id: str) -> Account | None:
        with self._lock:
            found = self._accounts.get(account_id)
            return found[0] if found else None

    def find_account_by_email(self, email: str) -> tuple[Account, str] | None:
        wanted = _email_key(email)
        with self._lock:
            for account, password_hash in self._accounts.values():
                if _email_key(account.email) == wanted:
                    return account, password_hash
            return None

    def list_accounts(self) -> list[Account]:
        with self._lock:
            return sorted((a for a, _ in self._accounts.values()), key=lambda a: a.created_at)

    def count_accounts(self) -> int:
        with self._lock:
            return len(self._accounts)

    def add_web_session(self, session: WebSession) -> None:
        with self._lock:
            if session.token_hash in self._web_sessions:
                raise Conflict("web session exists")
            self._web_sessions = {h: s for h, s in self._web_sessions.items() if s.expires_at >= session.created_at}
            self._web_sessions[session.token_hash] = session
            own = sorted(
                (s for s in self._web_sessions.values() if s.account_id == session.account_id),
                key=lambda s: (s.created_at, s.token_hash),
            )
            for ended in own[:-MAX_WEB_SESSIONS]:
                del self._web_sessions[ended.token_hash]

    def get_web_session(self, token_hash: str) -> WebSession | None:
        with self._lock:
            return self._web_sessions.get(token_hash)

    def delete_web_session(self, token_hash: str) -> None:
        with self._lock:
            self._web_sessions.pop(token_hash, None)

    def delete_web_sessions(self, account_id: str, *, keep: str | None = None) -> None:
        with self._lock:
            for token_hash, session in list(self._web_sessions.items()):
                if session.account_id == account_id and token_hash != keep:
                    del self._web_sessions[token_hash]

    def set_password_hash(self, account_id: str, password_hash: str) -> None:
        with self._lock:
            if account_id in self._accounts:
                self._accounts[account_id] = (self._accounts[account_id][0], password_hash)

    def delete_account(self, account_id: str) -> None:
        with self._lock:
            self.delete_web_sessions(account_id)
            self._accounts.pop(account_id, None)

    # --- connections -----------------------------------------------------------------------------

    def save_connection(self, connection: Connection, platform_session: str) -> Connection:
        with self._lock:
            existing = next(
                (
                    c
                    for c in self._connections.values()
                    if c.account_id == connection.account_id and c.platform_user_id == connection.platform_user_id
                ),
                None,
            )
            if existing is not None:
                stored = attrs.evolve(
                    existing,
                    handle=connection.handle,
                    name=connection.name,
                    status=connection.status,
                    session_expires_at=connection.session_expires_at,
                )
            else:
                if connection.id in self._connections:
                    raise Conflict(f"connection {connection.id} exists")
                if connection.active:
                    # At most one active connection per account, as in the SQLite store.
                    self._deactivate_all(connection.account_id)
                stored = connection
            self._connections[stored.id] = stored
            self._platform_sessions[stored.id] = platform_session
            return stored

    def get_connection(self, connection_id: str) -> Connection | None:
        with self._lock:
            return self._connections.get(connection_id)

    def list_connections(self, account_id: str) -> list[Connection]:
        with self._lock:
            mine = [c for c in self._connections.values() if c.account_id == account_id]
        return sorted(mine, key=lambda c: c.created_at)

    def all_connections(self) -> list[Connection]:
        with self._lock:
            return list(self._connections.values())

    def get_platform_session(self, connection_id: str) -> str | None:
        with self._lock:
            return self._platform_sessions.get(connection_id)

    def one_check(self) -> AbstractContextManager[None]:
        return nullcontext()  # nothing cached: every look-up reads the records as they are

    def load_connection(self, account_id: str, connection_id: str | None) -> tuple[Connection, str | None] | None:
        if connection_id is None:
            mine = self.list_connections(account_id)
            found = next((c for c in mine if c.active), mine[0] if mine else None)
        else:
            found = self.get_connection(connection_id)
        if found is None:
            return None
        return found, self.get_platform_session(found.id)

    def set_active_connection(self, account_id: str, connection_id: str) -> None:
        with self._lock:
            target = self._connections.get(connection_id)
            if target is None or target.account_id != account_id:
                return  # nothing of that account to activate: leave the others as they are
            self._deactivate_all(account_id)
            self._connections[connection_id] = attrs.evolve(target, active=True)

    def _deactivate_all(self, account_id: str) -> None:
        for cid, c in list(self._connections.items()):
            if c.account_id == account_id and c.active:
                self._connections[cid] = attrs.evolve(c, active=False)

    def delete_connections(self, account_id: str) -> None:
        with self._lock:
            for cid, connection in list(self._connections.items()):
                if connection.account_id == account_id:
                    del self._connections[cid]
                    self._platform_sessions.pop(cid, None)

    def delete_connection(self, connection_id: str) -> None:
        with self._lock:
            self._connections.pop(connection_id, None)
            self._platform_sessions.pop(connection_id, None)

    def set_connection_status(self, connection_id: str, status: str) -> None:
        with self._lock:
            found = self._connections.get(connection_id)
            if found is not None:
                self._connections[connection_id] = attrs.evolve(found, status=status)

    # --- API keys --------------------------------------------------------------------------------

    def add_key(self, key: ApiKey, secret_hash: str) -> None:
        with self._lock:
            if key.id in self._keys:
                raise Conflict(f"key {key.id} exists")
            if secret_hash in self._key_hashes.values():
                raise Conflict("a key with this secret exists")
            self._keys[key.id] = key
            self._key_hashes[key.id] = secret_hash

    def get_key(self, key_id: str) -> ApiKey | None:
        with self._lock:
            return self._keys.get(key_id)

    def find_keys_by_prefix(self, prefix: str) -> list[tuple[ApiKey, str]]:
        with self._lock:
            found = [(k, self._key_hashes[k.id]) for k in self._keys.values() if k.prefix == prefix]
        return sorted(found, key=lambda pair: pair[0].created_at)

    def list_keys(self, account_id: str) -> list[ApiKey]:
        with self._lock:
            mine = [k for k in self._keys.values() if k.account_id == account_id]
        return sorted(mine, key=lambda k: k.created_at)

    def end_key(self, key_id: str, *, expires_at: datetime | None = None, revoked_at: datetime | None = None) -> None:
        with self._lock:
            stored = self._keys.get(key_id)
            if stored is None:
                return
            if expires_at is not None and (stored.expires_at is None or stored.expires_at > expires_at):
                stored = attrs.evolve(stored, expires_at=expires_at)
            if revoked_at is not None and stored.revoked_at is None:
                stored = attrs.evolve(stored, revoked_at=revoked_at)
            self._keys[key_id] = stored

    # --- usage -----------------------------------------------------------------------------------

    def add_usage(self, counts: Mapping[tuple[str, str], int], last_used: Mapping[str, datetime]) -> None:
        with self._lock:
            for slot, count in counts.items():
                self._usage[slot] = self._usage.get(slot, 0) + count
            for key_id, when in last_used.items():
                stored = self._keys.get(key_id)
                if stored is not None:
                    self._keys[key_id] = attrs.evolve(stored, last_used_at=_later(stored.last_used_at, when))

    def key_usage(self, key_id: str, day: str) -> KeyUsage:
        today = month = total = 0
        with self._lock:
            for (kid, d), count in self._usage.items():
                if kid != key_id:
                    continue
                total += count
                if d[:7] == day[:7]:
                    month += count
                if d == day:
                    today += count
        return KeyUsage(requests_today=today, requests_this_month=month, requests_total=total)

    # --- audit (append-only: no update, no delete) -----------------------------------------------

    def add_audit(self, event: AuditEvent) -> None:
        with self._lock:
            self._audit.append(event)

    def list_audit(self, account_id: str) -> list[AuditEvent]:
        with self._lock:
            mine = [e for e in self._audit if e.account_id == account_id]
        return sorted(mine, key=lambda e: e.at)

    def recent_audit(self, account_id: str, limit: int) -> list[AuditEvent]:
        with self._lock:
            mine = [(e.at, n, e) for n, e in enumerate(self._audit) if e.account_id == account_id]
        return [e for _, _, e in sorted(mine, key=lambda row: row[:2], reverse=True)[:limit]]

    def audit_trail(self) -> list[AuditEvent]:
        """For tests: every line, of any account or none, in the order written."""
        with self._lock:
            return list(self._audit)

    # --- attempt counts (forgotten past ATTEMPT_RETENTION) -----------------------------------------

    def add_attempt(self, event: str, subject: str, at: datetime) -> None:
        with self._lock:
            self._attempts = [a for a in self._attempts if a[2] >= at - ATTEMPT_RETENTION]
            self._attempts.append((event, subject, at))

    def count_attempts(self, event: str, subject: str, since: datetime) -> int:
        with self._lock:
            return sum(1 for e, s, at in self._attempts if e == event and s == subject and at >= since)

    # --- idempotency -----------------------------------------------------------------------------

    def claim_idempotency(self, record: IdempotencyRecord) -> IdempotencyRecord | None:
        with self._lock:
            existing = self._idempotency.get(record.key)
            if existing is not None and record.created_at - existing.created_at < IDEMPOTENCY_WINDOW:
                return existing
            oldest = record.created_at - IDEMPOTENCY_WINDOW
            self._idempotency = {k: r for k, r in self._idempotency.items() if r.created_at >= oldest}
            self._idempotency[record.key] = record
            return None

    def complete_idempotency(self, key: str, status: int, body: str) -> None:
        with self._lock:
            found = self._idempotency.get(key)
            if found is not None:
                self._idempotency[key] = attrs.evolve(found, status=status, body=body)

    def release_idempotency(self, key: str) -> None:
        with self._lock:
            found = self._idempotency.get(key)
            # Only an in-flight claim is forgotten: a completed answer stays for the retries.
            if found is not None and found.status == IN_FLIGHT:
                del self._idempotency[key]

    def forget_idempotency(self, key_prefix: str) -> None:
        with self._lock:
            self._idempotency = {k: r for k, r in self._idempotency.items() if not k.startswith(key_prefix)}


def _later(stored: datetime | None, new: datetime | None) -> datetime | None:
    """``last_used_at`` only moves forward: a late flush from another worker must not move it back."""
    if stored is None:
        return new
    if new is None:
        return stored
    return max(stored, new)
