"""The SQLite schema of the key store and how a connection to it is set up.

The file is shared by every gunicorn worker process and their threads, hence:
- WAL, so that readers (every request looks up its key) never wait for a writer;
- ``busy_timeout``, so that a writer waits for another instead of failing at once;
- ``synchronous=NORMAL``: in WAL mode a power loss may lose the last commits but never corrupts the
  file, and it saves an fsync per commit on the hot path (usage counts);
- the schema is applied idempotently by whichever connection comes first, inside ``BEGIN IMMEDIATE``
  so that two workers starting at once do not both migrate. ``PRAGMA user_version`` holds the schema
  version; ``MIGRATIONS[n]`` brings version ``n`` to ``n + 1``, so a later change appends a step.

Timestamps are ISO 8601 UTC text of fixed width (microseconds, ``+00:00``), so comparing the strings
compares the instants and ``at >= ?`` can use an index.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime

from adapters.sqlite_wal import create_owner_only, use_wal
from community_api.email_address import email_key

_V1 = (
    """CREATE TABLE IF NOT EXISTS accounts (
        id TEXT PRIMARY KEY,
        email TEXT NOT NULL,
        email_key TEXT NOT NULL UNIQUE,  -- casefolded email: uniqueness is case-insensitive
        password_hash TEXT NOT NULL,
        created_at TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS web_sessions (
        token_hash TEXT PRIMARY KEY,
        account_id TEXT NOT NULL,
        csrf_token TEXT NOT NULL,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS connections (
        id TEXT PRIMARY KEY,
        account_id TEXT NOT NULL,
        platform_user_id TEXT NOT NULL,
        handle TEXT NOT NULL,
        name TEXT NOT NULL,
        active INTEGER NOT NULL,
        status TEXT NOT NULL,
        created_at TEXT NOT NULL,
        session BLOB  -- the platform session, AES-GCM encrypted (session_cipher.py), never clear text
    )""",
    # Leads with account_id, so it also serves "connections of an account".
    """CREATE UNIQUE INDEX IF NOT EXISTS connections_account_user
        ON connections (account_id, platform_user_id)""",
    """CREATE TABLE IF NOT EXISTS keys (
        id TEXT PRIMARY KEY,
        account_id TEXT NOT NULL,
        name TEXT NOT NULL,
        prefix TEXT NOT NULL,
        scopes TEXT NOT NULL,  -- space-separated, in the order granted
        connection_id TEXT,
        kind TEXT NOT NULL,
        created_at TEXT NOT NULL,
        lineage_id TEXT NOT NULL,
        last_used_at TEXT,
        expires_at TEXT,
        revoked_at TEXT,
        secret_hash TEXT NOT NULL UNIQUE  -- hex SHA-256 of the key; the key itself is never stored
    )""",
    "CREATE INDEX IF NOT EXISTS keys_prefix ON keys (prefix)",
    "CREATE INDEX IF NOT EXISTS keys_account ON keys (account_id)",
    """CREATE TABLE IF NOT EXISTS usage (
        key_id TEXT NOT NULL,
        day TEXT NOT NULL,  -- UTC YYYY-MM-DD
        count INTEGER NOT NULL,
        PRIMARY KEY (key_id, day)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS audit (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at TEXT NOT NULL,
        event TEXT NOT NULL,
        account_id TEXT,
        key_id TEXT,
        subject TEXT,
        detail TEXT
    )""",
    "CREATE INDEX IF NOT EXISTS audit_event_subject_at ON audit (event, subject, at)",
    "CREATE INDEX IF NOT EXISTS audit_account ON audit (account_id, at)",
    # Append-only even for code that reaches past the store's methods.
    """CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit
        BEGIN SELECT RAISE(ABORT, 'the audit table is append-only'); END""",
    """CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit
        BEGIN SELECT RAISE(ABORT, 'the audit table is append-only'); END""",
    """CREATE TABLE IF NOT EXISTS idempotency (
        key TEXT PRIMARY KEY,
        fingerprint TEXT NOT NULL,
        status INTEGER NOT NULL,
        body TEXT NOT NULL,
        created_at TEXT NOT NULL
    )""",
)

# Version 2: OAuth for MCP connectors. Codes and tokens are kept as hex SHA-256 only; a grant is a
# connector key (``keys``), named by ``key_id``.
_V2 = (
    """CREATE TABLE IF NOT EXISTS oauth_clients (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        redirect_uris TEXT NOT NULL,  -- JSON array, in the order registered
        created_at TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS oauth_codes (
        code_hash TEXT PRIMARY KEY,
        client_id TEXT NOT NULL,
        account_id TEXT NOT NULL,
        redirect_uri TEXT NOT NULL,
        code_challenge TEXT NOT NULL,
        resource TEXT NOT NULL,
        scopes TEXT NOT NULL,  -- space-separated
        connection_id TEXT,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        used_at TEXT,
        key_id TEXT
    ) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS oauth_codes_expiry ON oauth_codes (expires_at)",
    """CREATE TABLE IF NOT EXISTS oauth_tokens (
        token_hash TEXT PRIMARY KEY,
        kind TEXT NOT NULL,  -- access or refresh
        key_id TEXT NOT NULL,
        client_id TEXT NOT NULL,
        resource TEXT NOT NULL,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        used_at TEXT
    ) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS oauth_tokens_key ON oauth_tokens (key_id, expires_at)",
)

# Version 3: the row ``GET /readyz`` writes to prove the database takes a write.
_V3 = (
    """CREATE TABLE IF NOT EXISTS health_checks (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        checked_at TEXT NOT NULL
    )""",
)

# Version 4: answers of creating requests are removed once past their 24 hours (on each claim).
# Expired web sessions are removed when a session is added.
_V4 = (
    "CREATE INDEX IF NOT EXISTS idempotency_created ON idempotency (created_at)",
    "CREATE INDEX IF NOT EXISTS web_sessions_expiry ON web_sessions (expires_at)",
)

# Version 5: attempt counts that bounds are checked against, kept a day (``AttemptCounts``). Until then
# they were audit rows, kept for good although strangers write them.
_V5 = (
    """CREATE TABLE IF NOT EXISTS attempts (
        event TEXT NOT NULL,
        subject TEXT NOT NULL,  -- a hashed name, never an email in clear
        at TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS attempts_event_subject_at ON attempts (event, subject, at)",
    "CREATE INDEX IF NOT EXISTS attempts_at ON attempts (at)",
)

# Version 6: when a person first approved a client (``approved_at``). Registration is open, so clients no
# one ever approved are forgotten after a day and their number is bounded (``oauth_clients.py``). Clients
# registered before this version are taken as approved: none is forgotten on the upgrade.
_V6 = (
    "ALTER TABLE oauth_clients ADD COLUMN approved_at TEXT",
    "UPDATE oauth_clients SET approved_at = created_at",
    "CREATE INDEX IF NOT EXISTS oauth_clients_unapproved ON oauth_clients (created_at) WHERE approved_at IS NULL",
)

# Version 7: an account keeps its newest web sessions only (``MAX_WEB_SESSIONS``), trimmed on each sign-in.
_V7 = ("CREATE INDEX IF NOT EXISTS web_sessions_account ON web_sessions (account_id, created_at)",)

# Version 8: when a connection's platform session ends by its own token (``Connection.session_expires_at``).
# Connections linked before it have none until they are linked again: their sessions are sealed, and a
# migration does not open them.
_V8 = ("ALTER TABLE connections ADD COLUMN session_expires_at TEXT",)

# Version 9: whether an authorization request named its redirect URI (a client's only one may be left
# out). Codes written before it (they live ten minutes) keep the rule they were issued under: the token
# request repeats the URI.
_V9 = ("ALTER TABLE oauth_codes ADD COLUMN redirect_uri_sent INTEGER NOT NULL DEFAULT 1",)


def _key_emails_again(conn: sqlite3.Connection) -> None:
    """Each account whose email is outside ASCII takes the key ``email_address.email_key`` now gives it (an
    ASCII email's key never changed). Where another account holds that key already (the same address
    written the other way, made from a browser or another keyboard), that one keeps it and this one its own:
    no account is merged or lost (``UPDATE OR IGNORE``); the operator can name it by its id."""
    rows = conn.execute("SELECT id, email FROM accounts").fetchall()
    for account_id, email in rows:
        if not email.isascii():
            conn.execute("UPDATE OR IGNORE accounts SET email_key = ? WHERE id = ?", (email_key(email), account_id))


# Version 10: an email is found however its domain is written: a domain outside ASCII is keyed in its IDNA
# form, which browsers send. Version 11: and however its local part's letters are (NFC: ``é`` as one
# character or as ``e`` and a combining accent). Both re-key with the rule of the code that runs them, so
# a file coming from before version 10 is re-keyed twice, the same way.
_V10 = (_key_emails_again,)
_V11 = (_key_emails_again,)

Step = str | Callable[[sqlite3.Connection], None]  # a statement, or a data migration SQL cannot write
MIGRATIONS: tuple[tuple[Step, ...], ...] = (_V1, _V2, _V3, _V4, _V5, _V6, _V7, _V8, _V9, _V10, _V11)
SCHEMA_VERSION = len(MIGRATIONS)


def connect(path: str, busy_timeout_ms: int) -> sqlite3.Connection:
    """A connection in driver autocommit mode (``isolation_level=None``): the store opens every
    transaction itself, ``BEGIN IMMEDIATE`` where it reads then writes, and no implicit deferred
    ``BEGIN`` can sneak in. ``check_same_thread`` is off only so that ``close()`` may close the
    connections of other threads; each thread otherwise uses its own."""
    # The settings name a path whose folder may not exist yet (``./var/...`` on a fresh checkout).
    create_owner_only(path)
    conn = sqlite3.connect(path, timeout=busy_timeout_ms / 1000, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        # Before anything is written: WAL mode alone changes the file's header.
        if conn.execute("PRAGMA user_version").fetchone()[0] == 0 and (problem := foreign_database(conn)):
            raise ForeignDatabase(problem)
        use_wal(conn, busy_timeout_ms / 1000)
        conn.execute("PRAGMA synchronous = NORMAL")
        # Freed pages are zeroed: a deleted account's rows (a connection's sealed platform session) do not
        # linger in the file.
        conn.execute("PRAGMA secure_delete = ON")
        ensure_schema(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def run_step(conn: sqlite3.Connection, statement: Step) -> None:
    if isinstance(statement, str):
        conn.execute(statement)
    else:
        statement(conn)


class NewerSchema(RuntimeError):
    """The file was written by a newer version of the service: this one must not touch it."""


class ForeignDatabase(RuntimeError):
    """The file is a SQLite database of something else: the key store must not add its tables to it."""


# The tables of a file of ours: the key store's (every name any migration creates), the SQLite throttle
# storage's (``sqlite://`` may name the service's database, and may have made its tables first) and SQLite's.
_KNOWN_TABLES = frozenset(
    name.lower()
    for step in MIGRATIONS
    for statement in step
    if isinstance(statement, str)
    for name in re.findall(r"CREATE TABLE (?:IF NOT EXISTS )?(\w+)", statement)
)
_KNOWN_PREFIXES = ("throttle_", "sqlite_")


def foreign_database(conn: sqlite3.Connection) -> str | None:
    """What is wrong with a file that holds tables of neither the key store nor the SQLite throttle: another
    program's database, named by mistake. Neither may add its tables to it (``accounts list`` would have
    answered "no accounts yet" after writing to it). None for a file of ours, or an empty one."""
    tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    foreign = [name for name in tables if name.lower() not in _KNOWN_TABLES and not name.startswith(_KNOWN_PREFIXES)]
    if not foreign:
        return None
    shown = ", ".join(foreign[:5]) + (", …" if len(foreign) > 5 else "")
    return f"it is a SQLite database of something else (tables {shown}): name the service's own database, or a new file"


def ensure_schema(conn: sqlite3.Connection) -> None:
    """Bring the file to ``SCHEMA_VERSION``. One cheap read when it is already there."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version == SCHEMA_VERSION:
        return
    if version > SCHEMA_VERSION:
        raise NewerSchema(f"the key store file has schema version {version}; this program knows {SCHEMA_VERSION}")
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Read again under the write lock: another process may have migrated meanwhile.
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        for step in MIGRATIONS[version:]:
            for statement in step:
                run_step(conn, statement)
        if version < SCHEMA_VERSION:
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


# --- timestamps as stored (fixed-width ISO 8601 UTC, so that text order is time order) -----------


def ts(value: datetime) -> str:
    if value.tzinfo is None:
        raise ValueError("the key store keeps timezone-aware datetimes only")
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def ts_or_none(value: datetime | None) -> str | None:
    return None if value is None else ts(value)


def dt(value: str) -> datetime:
    return datetime.fromisoformat(value).astimezone(UTC)


def dt_or_none(value: str | None) -> datetime | None:
    return None if value is None else dt(value)
