"""The commands of ``community-api`` that work on what the database holds: accounts (create, list,
set-password, delete), keys (list, mint, revoke), backup and reseal. ``adapters/cli.py`` parses the command line
and calls these.

Each opens the store at ``COMMUNITY_API_DB`` (``open_store``); a wrong setting or a refusal of the core
ends the command with one line (``SettingsError``), never a traceback.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sqlite3
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from adapters.settings import PREFIX, Settings, SettingsError, is_utf8_text, load_settings

if TYPE_CHECKING:
    from adapters.store.sqlite_key_store import SqliteKeyStore

DEFAULT_KEEP = 14  # copies kept by ``backup --into`` (two weeks of a daily timer)


def apply_common(args: argparse.Namespace) -> None:
    """The common flags given (``--db``, ``--secret``…) as the ``COMMUNITY_API_*`` variables they stand for.
    A flag given empty is refused: ``--db "$DB"`` with ``DB`` unset would otherwise fall back to the default
    database (and ``accounts create`` make a new one there)."""
    for name in ("db", "secret", "platform_url", "platform_api_url", "mode"):
        value = getattr(args, name, None)
        if value == "":
            flag = "--" + name.replace("_", "-")
            raise SettingsError(
                f"{flag} was given empty: give it a value, or leave it out to use {PREFIX}{name.upper()}"
            )
        if value is not None:
            os.environ[PREFIX + name.upper()] = value


def refuse_no_file(db: str) -> None:
    """A database path that names something else than a file, said so; else SQLite's own words ("unable to
    open database file" for a folder, "disk I/O error" for a device), or "no database at" from a command
    that only reads."""
    if os.path.exists(db) and not os.path.isfile(db):
        what = "a folder" if os.path.isdir(db) else "not a regular file"
        raise SettingsError(f"COMMUNITY_API_DB: {db} is {what}: set it to the database file's path")


def open_store(settings: Settings, *, create: bool = False) -> SqliteKeyStore:
    """The key store at ``COMMUNITY_API_DB``, opened now (its schema made or migrated): a path that cannot
    hold a database, or a file of a newer version, is one line and exit status 2.

    Only ``serve`` and ``accounts create`` make a database (and its folder) where there is none. The
    commands that read or change what a database holds refuse a path with none: a mistyped path would
    otherwise leave a new empty database behind and answer "no accounts yet" or "no account with the
    email", as if the service's own database were empty."""
    from adapters.sqlite_wal import unwritable_folder
    from adapters.store.sqlite_key_store import SqliteKeyStore
    from adapters.store.sqlite_schema import ForeignDatabase, NewerSchema

    refuse_no_file(settings.db)
    if not create and not os.path.isfile(settings.db):
        raise SettingsError(
            f"no database at {settings.db} (COMMUNITY_API_DB): set it to the service's database; "
            "`community-api accounts create EMAIL` makes a new one"
        )
    try:
        return SqliteKeyStore.open(settings.db, settings.secret, previous_secret=settings.previous_secret)
    except (OSError, sqlite3.Error, NewerSchema, ForeignDatabase) as error:
        why = (isinstance(error, sqlite3.OperationalError) and unwritable_folder(settings.db)) or str(error)
        raise SettingsError(f"COMMUNITY_API_DB: cannot use {settings.db}: {why}") from None


def read_password(email: str) -> str:
    """The password from standard input: one line from a pipe (``echo … |``, scripts), or typed at a
    terminal without being shown, asked twice so that a typo does not lock the person out.

    The line's end is dropped whether it is ``\n`` or ``\r\n`` (a file or script written on Windows): a
    password ending in a carriage return could never be typed into the sign-in form."""
    if not sys.stdin.isatty():
        return piped("the password", whole=False).removesuffix("\n").removesuffix("\r")
    first = typed(f"Password for {email}: ", hidden=True)
    again = typed("The same password again: ", hidden=True)
    if again != first:
        raise SettingsError("the two passwords differ: nothing changed")
    return first


def typed(prompt: str, *, hidden: bool = False) -> str:
    """A line typed at the terminal (``hidden``: not shown, as a password or a key). A terminal whose
    encoding is not UTF-8 can send bytes that are not: one line, nothing changed, never a traceback."""
    try:
        line: str | None = getpass.getpass(prompt) if hidden else input(prompt)
    except UnicodeDecodeError:  # getpass reads the terminal strictly; input() keeps such bytes as surrogates
        line = None
    if line is None or not is_utf8_text(line):
        raise SettingsError("what was typed is not UTF-8 text (the terminal's encoding): nothing changed")
    return line


def piped(what: str, *, whole: bool) -> str:
    """Standard input from a pipe, one line or ``whole``, read as UTF-8 strictly. Python's own reading keeps
    bytes that are not UTF-8 (a password file saved in Latin-1) as lone surrogates, which failed further on,
    as a password was hashed or a key looked up, with a traceback."""
    data = sys.stdin.buffer.read() if whole else sys.stdin.buffer.readline()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise SettingsError(f"{what} piped in is not UTF-8 text (byte {error.start}): nothing changed") from None


def accounts_create(args: argparse.Namespace) -> int:
    from community_api.accounts import create_account_unchecked
    from community_api.clock import SystemClock

    apply_common(args)
    settings = load_settings()
    new = not os.path.exists(settings.db)
    store = open_store(settings, create=True)  # a database it cannot use is said before the password is asked
    password = read_password(args.email)
    account = create_account_unchecked(store, SystemClock(), args.email, password)
    # Run from another folder than serve's (the default path is relative), it makes a database serve never
    # reads: the path says which.
    where = f" in a new database, {os.path.abspath(settings.db)}" if new else ""
    print(f"account {account.id} created for {account.email}{where}")
    return 0


def accounts_list(args: argparse.Namespace) -> int:
    from community_api.account_lifecycle import account_summaries
    from community_api.clock import SystemClock

    apply_common(args)
    store = open_store(load_settings())
    summaries = account_summaries(store, SystemClock())
    warning = unopened_sessions_warning(store)
    if not summaries:
        print("no accounts yet: community-api accounts create EMAIL")
        return 0
    width = max(len("EMAIL"), *(len(s.account.email) for s in summaries))
    print(f"{'EMAIL':<{width}}  {'ACCOUNT':<20}  {'CREATED':<20}  CONNECTIONS  TO LINK AGAIN  LIVE KEYS")
    for s in summaries:
        created = s.account.created_at.strftime("%Y-%m-%d %H:%M UTC")
        print(
            f"{s.account.email:<{width}}  {s.account.id:<20}  {created:<20}  {s.connections:>11}  "
            f"{s.to_link_again:>13}  {s.live_keys:>9}"
        )
    if warning:
        print(warning, file=sys.stderr)
    return 0


def accounts_delete(args: argparse.Namespace) -> int:
    from community_api.account_lifecycle import account_named, delete_account_unchecked
    from community_api.clock import SystemClock
    from community_api.email_address import email_key

    apply_common(args)
    settings = load_settings()
    store = open_store(settings)
    name = args.account
    if sys.stdin.isatty():  # a person at a terminal confirms; a script (stdin not a terminal) is not asked
        named = account_named(store, name)  # an unknown one: one line (main), nothing asked
        confirmed = typed(
            f"Delete {named.email} ({named.id}): its keys and grants revoked, its connections erased. "
            "Type the email to confirm: "
        )
        if email_key(confirmed) != email_key(named.email):
            raise SettingsError("not confirmed: nothing was deleted")
        name = named.id  # the account confirmed, even if its email names another one by now
    account = delete_account_unchecked(store, SystemClock(), name)
    print(f"account {account.id} deleted: its keys and grants revoked, its connections erased")
    return 0


def accounts_set_password(args: argparse.Namespace) -> int:
    from community_api.account_lifecycle import account_named, reset_password_unchecked
    from community_api.clock import SystemClock

    apply_common(args)
    settings = load_settings()
    store = open_store(settings)  # a database it cannot use is said before the password is asked
    named = account_named(store, args.account)  # so is an account it has not
    password = read_password(named.email)
    account = reset_password_unchecked(store, SystemClock(), named.id, password)
    print(f"password of {account.email} set: every web session of the account ended, its API keys kept")
    return 0


def keys_list(args: argparse.Namespace) -> int:
    """An account's keys as its owner's dashboard lists them, for the operator who helps that owner (a
    script whose key stopped working): id, display prefix, state, dates, binding, scopes and name. Never
    a secret: the store holds none."""
    from community_api.account_lifecycle import account_named
    from community_api.clock import SystemClock
    from community_api.dashboard import IN_GRACE, key_state
    from community_api.keys import KEY_PREFIX
    from community_api.model import KEY_STANDARD

    apply_common(args)
    store = open_store(load_settings())
    account = account_named(store, args.account)  # an unknown one: one line (main)
    listed = store.list_keys(account.id)
    if not listed:
        print(f"{account.email} has no keys: community-api keys mint --account {account.email}")
        return 0
    now = SystemClock().now()

    def when(moment: datetime | None) -> str:
        return "-" if moment is None else moment.strftime("%Y-%m-%d %H:%M")

    rows = []
    for key in listed:
        state = key_state(key, now)
        shown = state.state.replace(" ", "-")  # one word a column: "in-grace"
        if state.state == IN_GRACE and key.expires_at is not None:
            shown += f"-until-{key.expires_at:%Y-%m-%dT%H:%M}"
        prefix = f"{KEY_PREFIX}{key.prefix}…" if key.kind == KEY_STANDARD else "-"  # a connector's: OAuth's
        rows.append(
            (key.id, prefix, shown, when(key.created_at), when(key.last_used_at), key.connection_id or "-",
             key.kind, ",".join(key.scopes), key.name)
        )  # fmt: skip
    header = ("KEY", "PREFIX", "STATE", "CREATED (UTC)", "LAST USED (UTC)", "CONNECTION", "KIND", "SCOPES", "NAME")
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header) - 1)]
    for row in (header, *rows):
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[-1])
    return 0


def keys_mint(args: argparse.Namespace) -> int:
    from community_api.account_lifecycle import account_named
    from community_api.clock import SystemClock
    from community_api.keys import mint_key

    apply_common(args)
    settings = load_settings()
    store = open_store(settings)
    account = account_named(store, args.account)  # an unknown one: one line (main), nothing minted
    issued = mint_key(
        store,
        SystemClock(),
        account_id=account.id,
        name=args.name,
        scopes=args.scope or None,
        connection_id=args.connection,
    )
    print(f"key {issued.key.id} scopes={' '.join(issued.key.scopes)}", file=sys.stderr)
    print(issued.secret)
    return 0


def keys_revoke(args: argparse.Namespace) -> int:
    """Revoke leaked keys (or OAuth tokens: their grant) given by value: one per line on standard input (a
    scanner's report piped in), or typed at a terminal without being shown. Never an argument: ``ps`` and
    the shell's history keep those."""
    from community_api.clock import SystemClock
    from community_api.errors import InvalidRequest
    from community_api.keys import revoke_leaked_key
    from community_api.oauth import ACCESS_PREFIX, REFRESH_PREFIX, revoke_leaked_token

    apply_common(args)
    settings = load_settings()
    store = open_store(settings)
    emails = {account.id: account.email for account in store.list_accounts()}
    if not emails:  # every key belongs to an account: this is not the service's database
        raise SettingsError(
            f"the database {settings.db} has no accounts: set COMMUNITY_API_DB to the service's database"
        )
    if sys.stdin.isatty():
        values = [typed("The leaked key (not shown): ", hidden=True)]
    else:
        values = [line for line in piped("what was", whole=True).splitlines() if line.strip()]
    if not values:
        raise SettingsError("no key given: pipe the leaked keys in, one per line")
    all_found = True
    for value in values:
        shown = f"{value.strip()[:12]}…"  # the prefix a key list shows; never the whole value
        revoke = revoke_leaked_token if value.strip().startswith((ACCESS_PREFIX, REFRESH_PREFIX)) else revoke_leaked_key
        try:
            leaked = revoke(store, SystemClock(), value)
        except InvalidRequest as error:
            print(f"{shown}: {error.message}")
            all_found = False
            continue
        if leaked.key is None:
            print(f"{shown}: no key has this value (never issued here, or its account was deleted)")
            all_found = False
            continue
        owner = emails.get(leaked.key.account_id, leaked.key.account_id)
        done = "revoked" if leaked.was_live else "was already ended (revoked, or rotated past its grace)"
        print(f"{shown}: key {leaked.key.id} ({leaked.key.name!r}) of {owner} {done}")
    return 0 if all_found else 1


def backup(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from adapters.store.backup_folder import backup_into
    from adapters.store.sqlite_backup import BackupError, backup_database

    apply_common(args)
    if args.path is None and args.into is None:
        raise SettingsError("backup needs a new file's PATH, or --into FOLDER (with --keep N)")
    if args.path is not None and args.into is not None:
        raise SettingsError("backup takes a new file's PATH, or --into FOLDER (with --keep N), not both")
    if args.keep is not None and args.into is None:
        raise SettingsError("--keep goes with --into FOLDER: it removes older copies from that folder")
    settings = load_settings()
    refuse_no_file(settings.db)
    removed: tuple[Path, ...] = ()
    keep = DEFAULT_KEEP if args.keep is None else args.keep
    try:
        if args.into is not None:
            done = backup_into(settings.db, args.into, keep, datetime.now(UTC))
            summary, removed = done.made, done.removed
        else:
            summary = backup_database(settings.db, args.path)
    except BackupError as error:
        raise SettingsError(str(error)) from None
    counts = ", ".join(
        _count(n, name)
        for n, name in ((summary.accounts, "account"), (summary.keys, "key"), (summary.connections, "connection"))
    )
    print(
        f"backed up {settings.db} to {summary.target} ({_count(summary.size_bytes, 'byte')}: {counts}); restoring it "
        "needs the same COMMUNITY_API_SECRET (docs/deployment.md)"
    )
    for path in removed:
        killed = path.name.startswith(".")  # a partial copy (``backup_folder._PARTIAL``)
        print(
            f"removed {path}, "
            + ("a partial copy left by a run that was killed" if killed else f"an older copy beyond the newest {keep}")
        )
    return 0


def reseal(args: argparse.Namespace) -> int:
    """Seal every platform session under the current secret (after the secret changed), and say how many
    were moved, were already under it, and open under neither (exit status 1: those connections must be
    linked again, and dropping the previous secret changes nothing for them)."""
    apply_common(args)
    settings = load_settings()
    store = open_store(settings)
    try:
        done = store.reseal_sessions()
        outcomes = done.counts
        print(
            f"{_count(outcomes['resealed'], 'platform session')} sealed anew under COMMUNITY_API_SECRET, "
            f"{outcomes['current']} already under it"
            + ("" if settings.previous_secret else " (no COMMUNITY_API_PREVIOUS_SECRET set: nothing could be moved)")
        )
        if done.lost:
            print(
                f"{_count(len(done.lost), 'platform session')} opened under neither secret: "
                f"{'its connection' if len(done.lost) == 1 else 'their connections'} must be linked again "
                "(the dashboard's Connections page):"
            )
            emails = {account.id: account.email for account in store.list_accounts()}
            for connection_id in done.lost:
                connection = store.get_connection(connection_id)
                if connection is not None:  # (removed by its owner meanwhile: nothing to link)
                    owner = emails.get(connection.account_id, connection.account_id)
                    print(f"  @{connection.handle} ({connection_id}) of {owner}")
            return 1
    finally:
        store.close()
    if settings.previous_secret:
        print("every platform session opens under COMMUNITY_API_SECRET: COMMUNITY_API_PREVIOUS_SECRET may be removed")
    return 0


def unopened_sessions_warning(store: SqliteKeyStore) -> str | None:
    """A warning when stored platform sessions open under neither secret given: their connections read as
    expired (``accounts list`` counts them under "to link again", the dashboard asks for a link), which a
    mistyped or a new secret would cause for every one of them, although nothing was lost yet."""
    unopened, stored = store.count_unopened_sessions()
    if not unopened:
        return None
    them = "its connection reads" if unopened == 1 else "their connections read"
    return (
        f"community-api: warning: {unopened} of {_count(stored, 'stored platform session')} "
        f"{'opens' if unopened == 1 else 'open'} under neither "
        f"COMMUNITY_API_SECRET nor COMMUNITY_API_PREVIOUS_SECRET: {them} as expired, to be linked again, unless "
        "the secret that sealed them is given back (the old one as COMMUNITY_API_PREVIOUS_SECRET, then "
        "`community-api reseal`: docs/deployment.md#changing-the-secret)"
    )


def _count(n: int, name: str) -> str:
    return f"{n} {name}" if n == 1 else f"{n} {name}s"
