"""The store's contract (``KeyStore``), split by role so that each can be read at once: accounts and web
sessions, connections, API keys, usage, the audit trail, idempotency records, OAuth records. One adapter
may serve every role (``SqliteKeyStore``, ``fakes/key_store.py``); contract tests run each role on
the fake and on SQLite. Look-ups answer None when nothing matches; they never raise for that.
``Conflict`` is raised where a uniqueness rule is broken.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Protocol

from community_api.model import (
    Account,
    ApiKey,
    AuditEvent,
    Connection,
    IdempotencyRecord,
    KeyUsage,
    WebSession,
)
from community_api.oauth_model import AuthorizationCode, OAuthClient, OAuthToken


class AccountRecords(Protocol):
    """Accounts (emails compared by ``email_address.email_key``) and web sessions (by the hash of their
    token)."""

    def add_account(self, account: Account, password_hash: str) -> None:
        """``Conflict`` if the email is taken, compared by ``email_address.email_key`` (case folded, in NFC,
        the domain in its ASCII form)."""
        ...

    def get_account(self, account_id: str) -> Account | None: ...

    def find_account_by_email(self, email: str) -> tuple[Account, str] | None:
        """The account and its password hash, the email compared by ``email_address.email_key``: found
        however its domain is written (``bücher.example`` or ``xn--bcher-kva.example``), cased, or its
        letters composed (``é`` one character or ``e`` and a combining accent)."""
        ...

    def count_accounts(self) -> int: ...

    def list_accounts(self) -> list[Account]:
        """Every account, oldest first (for the operator's command line)."""
        ...

    def add_web_session(self, session: WebSession) -> None:
        """``Conflict`` if the token hash is taken. Sessions of any account that expired before
        ``session.created_at`` are removed on the way (they would only accumulate), and the account keeps
        its ``MAX_WEB_SESSIONS`` newest sessions (by ``created_at``): the oldest beyond them end."""
        ...

    def get_web_session(self, token_hash: str) -> WebSession | None: ...

    def delete_web_session(self, token_hash: str) -> None: ...

    def delete_web_sessions(self, account_id: str, *, keep: str | None = None) -> None:
        """End every web session of the account but the one whose token hash is ``keep``."""
        ...

    def set_password_hash(self, account_id: str, password_hash: str) -> None:
        """No-op for an unknown account."""
        ...

    def delete_account(self, account_id: str) -> None:
        """Forget the account and its web sessions: its email may sign up afresh. No-op when unknown."""
        ...


class ConnectionRecords(Protocol):
    """Linked platform accounts and their platform sessions (kept encrypted at rest by real stores)."""

    def save_connection(self, connection: Connection, platform_session: str) -> Connection:
        """Insert, or refresh in place when the account already links that platform user: the stored
        record keeps its id and created_at, takes the new handle, name, status, session and session expiry
        (None included: a new session whose token does not say when it ends). Answers the
        stored record. The platform session is kept encrypted at rest by real stores."""
        ...

    def get_connection(self, connection_id: str) -> Connection | None: ...

    def list_connections(self, account_id: str) -> list[Connection]:
        """Oldest first."""
        ...

    def all_connections(self) -> list[Connection]:
        """Every account's connections, in no set order (the operator's metrics count them). One query."""
        ...

    def get_platform_session(self, connection_id: str) -> str | None: ...

    def one_check(self) -> AbstractContextManager[None]:
        """A block whose look-ups may all answer as the store stood at the block's start (the look-ups of
        one request: its key, then its connection). A store that must ask whether its cache is still
        fresh may then ask once for the block rather than once per look-up. Writes made inside the block
        are seen by the block's later look-ups."""
        ...

    def load_connection(self, account_id: str, connection_id: str | None) -> tuple[Connection, str | None] | None:
        """One look-up for the hot path of every data request: the connection ``connection_id`` (of any
        account: the caller checks ownership) or, when it is None, the account's active connection (its
        oldest when none is active), with its platform session (None if it cannot be read). None when
        nothing matches."""
        ...

    def set_active_connection(self, account_id: str, connection_id: str) -> None:
        """Make one connection the active one; every other connection of the account becomes inactive."""
        ...

    def set_connection_status(self, connection_id: str, status: str) -> None: ...

    def delete_connections(self, account_id: str) -> None:
        """Forget every connection of the account, their platform sessions erased."""
        ...

    def delete_connection(self, connection_id: str) -> None:
        """Forget one connection, its platform session erased. Other connections are left as they are
        (none becomes active: the caller chooses). No-op when unknown."""
        ...


class KeyRecords(Protocol):
    """API keys: records and the SHA-256 of their secrets, never the secrets."""

    def add_key(self, key: ApiKey, secret_hash: str) -> None:
        """``secret_hash`` is the hex SHA-256 of the full key value; unique."""
        ...

    def get_key(self, key_id: str) -> ApiKey | None: ...

    def find_keys_by_prefix(self, prefix: str) -> list[tuple[ApiKey, str]]:
        """Every key whose ``prefix`` matches, each with its stored secret hash, so that the caller
        compares hashes in constant time rather than letting an index compare secrets."""
        ...

    def list_keys(self, account_id: str) -> list[ApiKey]:
        """Every key of the account, revoked and expired ones too, oldest first."""
        ...

    def end_key(self, key_id: str, *, expires_at: datetime | None = None, revoked_at: datetime | None = None) -> None:
        """End a key, never bring it back: ``expires_at`` becomes the earlier of the stored one and the given
        one; ``revoked_at`` is set only where it is still empty. A write states the change, not the row,
        so a stale copy of a key can never make it live again. No-op for an unknown key."""
        ...


class UsageRecords(Protocol):
    """Request counts per key and day."""

    def add_usage(self, counts: Mapping[tuple[str, str], int], last_used: Mapping[str, datetime]) -> None:
        """Add request counts per (key id, UTC day ``YYYY-MM-DD``) and move ``last_used_at`` forward."""
        ...

    def key_usage(self, key_id: str, day: str) -> KeyUsage:
        """Requests of the key on ``day``, in that day's month, and in all."""
        ...


class AuditLog(Protocol):
    """The append-only audit trail (never a secret)."""

    def add_audit(self, event: AuditEvent) -> None: ...

    def list_audit(self, account_id: str) -> list[AuditEvent]:
        """Oldest first."""
        ...

    def recent_audit(self, account_id: str, limit: int) -> list[AuditEvent]:
        """The account's newest ``limit`` lines, newest first (of lines written at the same time, the one
        written last first). Reads only those: an account's trail only grows."""
        ...


# Web sessions an account keeps at once: a sign-in past them ends the oldest. Sign-in takes the password,
# so only the owner (or a script of theirs signing in on every run) makes them; unbounded, each lasted 14
# days.
MAX_WEB_SESSIONS = 50

# How long attempt counts are kept: longer than any bound looks back (an hour at most).
ATTEMPT_RETENTION = timedelta(days=1)


class AttemptCounts(Protocol):
    """Counts that bounds are checked against: sign-in and link attempts, sign-ups refused as taken, client
    registrations. Unlike the audit trail they are kept only ``ATTEMPT_RETENTION``: strangers send them
    (each failed sign-in counted three ways), so kept for good they would grow the database without end."""

    def add_attempt(self, event: str, subject: str, at: datetime) -> None:
        """Count one ``event`` for ``subject`` (a hashed name, never an email in clear) at ``at``; counts
        older than ``ATTEMPT_RETENTION`` before ``at`` may be forgotten."""
        ...

    def count_attempts(self, event: str, subject: str, since: datetime) -> int:
        """How many ``event`` counts for ``subject`` were added at or after ``since``."""
        ...


class IdempotencyRecords(Protocol):
    """First answers of creating requests, kept 24 hours for their retries."""

    def claim_idempotency(self, record: IdempotencyRecord) -> IdempotencyRecord | None:
        """Insert ``record`` (status 0: in flight) unless one with the same key exists and is younger
        than 24 hours. Answers None when the claim succeeded, else the existing record. Atomic across
        processes: of two concurrent claims exactly one succeeds. Records of any key older than 24 hours
        (before ``record.created_at``) are removed on the way: nothing answers them any more."""
        ...

    def complete_idempotency(self, key: str, status: int, body: str) -> None: ...

    def release_idempotency(self, key: str) -> None:
        """Forget an in-flight claim (the request failed before acting), so a retry may act."""
        ...

    def forget_idempotency(self, key_prefix: str) -> None:
        """Remove every record whose key starts with ``key_prefix``, in flight or not (an account's, when
        it is deleted: the answers hold what it posted and sent)."""
        ...


class OAuthRecords(Protocol):
    """OAuth for MCP connectors (``oauth.py``): clients, codes and tokens; secrets only as hex SHA-256."""

    def add_oauth_client(self, client: OAuthClient) -> None:
        """``Conflict`` if the id is taken. ``redirect_uris`` keep their order."""
        ...

    def get_oauth_client(self, client_id: str) -> OAuthClient | None: ...

    def approve_oauth_client(self, client_id: str, at: datetime) -> None:
        """Record that a person approved a request of the client at ``at``; a later call keeps the first
        time. No-op for an unknown client."""
        ...

    def count_unapproved_oauth_clients(self) -> int:
        """How many clients no person has approved yet."""
        ...

    def forget_unapproved_oauth_clients(self, registered_before: datetime) -> int:
        """Forget the clients no person approved that registered before ``registered_before``; how many.
        An approved client is never forgotten here."""
        ...

    def add_authorization_code(self, code: AuthorizationCode) -> None:
        """``code_hash`` is unique (``Conflict``)."""
        ...

    def use_authorization_code(self, code_hash: str, at: datetime) -> AuthorizationCode | None:
        """Mark the code used at ``at`` (unless it already was) and answer the record as it was before
        this call: ``used_at`` None means this call used it. None for an unknown code. Atomic across
        processes: of concurrent calls for one code exactly one sees ``used_at`` None."""
        ...

    def set_authorization_code_key(self, code_hash: str, key_id: str) -> None:
        """Record the grant (connector key) that redeeming the code created. No-op for an unknown code."""
        ...

    def add_oauth_token(self, token: OAuthToken) -> None:
        """``token_hash`` is unique (``Conflict``). The store may forget tokens of the same grant whose
        ``expires_at`` has passed ``token.created_at``: they can never be accepted again."""
        ...

    def get_oauth_token(self, token_hash: str) -> OAuthToken | None: ...

    def use_oauth_token(self, token_hash: str, at: datetime) -> OAuthToken | None:
        """As ``use_authorization_code``, for a refresh token being rotated: answers the record as it was
        before (``used_at`` None: this call used it), None when unknown; atomic across processes."""
        ...

    def delete_oauth_tokens(self, key_id: str) -> None:
        """Forget every token of the grant (on revocation of its connector key). No-op when none."""
        ...


class UnitOfWork(Protocol):
    """Reads and writes of the store that are one step (cosmicpython's unit of work): no other step's
    writes land between this one's reads and its writes, and its writes land all together at
    ``commit()`` or not at all. Leaving the block without ``commit()``, or by an exception, discards them.

    Do the step's reads and writes through its views, by role (``uow.keys``, ``uow.audit``, …), on the
    thread that opened the block; ``store`` is the whole store as the step sees it, for a step that calls
    another use case. A block opened inside another joins it: only the outermost ``commit()`` counts."""

    @property
    def store(self) -> KeyStore: ...

    @property
    def accounts(self) -> AccountRecords: ...

    @property
    def connections(self) -> ConnectionRecords: ...

    @property
    def keys(self) -> KeyRecords: ...

    @property
    def audit(self) -> AuditLog: ...

    @property
    def attempts(self) -> AttemptCounts: ...

    @property
    def oauth(self) -> OAuthRecords: ...

    @property
    def idempotency(self) -> IdempotencyRecords: ...

    def commit(self) -> None: ...


class KeyStore(
    AccountRecords,
    ConnectionRecords,
    KeyRecords,
    UsageRecords,
    AuditLog,
    AttemptCounts,
    IdempotencyRecords,
    OAuthRecords,
    Protocol,
):
    """Durable records of the service: every role above, from one store.

    Every use case that reads and then writes runs in ``unit_of_work()``. The SQLite store makes it one
    ``BEGIN IMMEDIATE`` transaction; the in-memory fake holds its lock and applies the writes at commit."""

    def unit_of_work(self) -> AbstractContextManager[UnitOfWork]:
        """A block whose reads and writes are one step (``UnitOfWork``)."""
        ...

    def ready(self) -> str | None:
        """None when a write can be committed now; else a short reason for an operator, with nothing
        secret in it (``GET /readyz``)."""
        ...
