"""The community-api command: serve, sandbox, demo, backup, reseal, accounts create, list, set-password
and delete, keys mint and revoke.

Flags set the same ``COMMUNITY_API_*`` variables the service reads, so gunicorn workers see one source
of settings. A wrong setting ends the command with a one-line reason, not a traceback.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sqlite3
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from adapters.gunicorn_command import check_serve_args, exposure_warning, gunicorn_argv, startup_summary
from adapters.settings import PREFIX, Settings, SettingsError, load_settings
from adapters.version import service_version
from community_api.scopes import ALL_SCOPES, DEFAULT_SCOPES

if TYPE_CHECKING:
    from adapters.store.sqlite_key_store import SqliteKeyStore


def _apply_common(args: argparse.Namespace) -> None:
    for name in ("db", "secret", "platform_url", "platform_api_url", "mode"):
        value = getattr(args, name, None)
        if value:
            os.environ[PREFIX + name.upper()] = value


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", help="SQLite database path (COMMUNITY_API_DB)")
    parser.add_argument("--secret", help="service secret (COMMUNITY_API_SECRET); prefer the variable")
    parser.add_argument("--platform-url", help="platform www base URL (COMMUNITY_API_PLATFORM_URL)")
    parser.add_argument("--platform-api-url", help="platform API base URL (COMMUNITY_API_PLATFORM_API_URL)")
    parser.add_argument(
        "--mode",
        choices=("production", "demo", "test"),
        help="COMMUNITY_API_MODE: production (the default) needs a secret of 32 characters or more; demo and "
        "test accept any, or none (a fixed, public one: never for real accounts), and test hashes passwords cheaply",
    )


def serve(args: argparse.Namespace) -> int:
    _apply_common(args)
    check_serve_args(args)
    settings = load_settings()  # refuse to start on a bad setting before forking workers
    check_state(settings)
    if settings.mode == "production" and PREFIX + "PLATFORM_URL" not in os.environ:
        # Its default is the stand-in's loopback address, for demo and test: a real service left on it
        # would start, and fail every link as "platform unavailable".
        raise SettingsError(
            f"{PREFIX}PLATFORM_URL must be set to the platform's web address (and {PREFIX}PLATFORM_API_URL to "
            "its API's); the default, the stand-in's, serves demo and test modes only"
        )
    print(startup_summary(args, settings), file=sys.stderr, flush=True)
    warning = exposure_warning(args.bind, settings.trusted_proxies)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    os.execv(sys.executable, gunicorn_argv(args, settings))  # noqa: S606 - replaces this process with gunicorn
    return 0  # pragma: no cover


def open_store(settings: Settings, *, create: bool = False) -> SqliteKeyStore:
    """The key store at ``COMMUNITY_API_DB``, opened now (its schema made or migrated): a path that cannot
    hold a database, or a file of a newer version, is one line and exit status 2.

    Only ``serve`` and ``accounts create`` make a database (and its folder) where there is none. The
    commands that read or change what a database holds refuse a path with none: a mistyped path would
    otherwise leave a new empty database behind and answer "no accounts yet" or "no account with the
    email", as if the service's own database were empty."""
    from adapters.store.sqlite_key_store import SqliteKeyStore
    from adapters.store.sqlite_schema import NewerSchema

    if not create and not os.path.isfile(settings.db):
        raise SettingsError(
            f"no database at {settings.db} (COMMUNITY_API_DB): set it to the service's database; "
            "`community-api accounts create EMAIL` makes a new one"
        )
    try:
        return SqliteKeyStore.open(settings.db, settings.secret, previous_secret=settings.previous_secret)
    except (OSError, sqlite3.Error, NewerSchema) as error:
        raise SettingsError(f"COMMUNITY_API_DB: cannot use {settings.db}: {error}") from None


def check_state(settings: Settings) -> None:
    """What ``serve`` needs before it forks workers: the database, the throttle storage answering, and a
    temporary folder where local browsers can start."""
    from adapters.platform.browser import temp_folder_problem
    from adapters.throttle.limits_throttle import LimitsThrottle

    if not settings.selenium_remote_url and (problem := temp_folder_problem()):
        raise SettingsError(problem)
    open_store(settings, create=True).close()
    try:
        throttle = LimitsThrottle(settings.throttle_uri, salt=settings.secret)
        throttle.quota("start-up check")  # a read: opens (or makes) the storage, raising what stops it
        problem = throttle.ready()
    except Exception as error:  # a storage's own failure, whatever its library raises
        problem = f"{type(error).__name__}: {error}"
    if problem:
        # (The URI is not repeated: it may hold a password; the operator has it.)
        raise SettingsError(f"COMMUNITY_API_THROTTLE_STORAGE (default: a file beside the database): {problem}")


def sandbox(args: argparse.Namespace) -> int:
    argv = [sys.executable, "-m", "scripts.sandbox", "--bind", args.bind, "--seed", str(args.seed)]
    argv += ["--plain-http"] if args.plain_http else []
    argv += ["--http1"] if args.http1 else []
    os.execv(sys.executable, argv)  # noqa: S606
    return 0  # pragma: no cover


def read_password(email: str) -> str:
    """The password from standard input: one line from a pipe (``echo … |``, scripts), or typed at a
    terminal without being shown, asked twice so that a typo does not lock the person out.

    The line's end is dropped whether it is ``\n`` or ``\r\n`` (a file or script written on Windows): a
    password ending in a carriage return could never be typed into the sign-in form."""
    if not sys.stdin.isatty():
        return sys.stdin.readline().removesuffix("\n").removesuffix("\r")
    first = getpass.getpass(f"Password for {email}: ")
    if getpass.getpass("The same password again: ") != first:
        raise SettingsError("the two passwords differ: nothing changed")
    return first


def accounts_create(args: argparse.Namespace) -> int:
    from community_api.accounts import create_account_unchecked
    from community_api.clock import SystemClock

    _apply_common(args)
    settings = load_settings()
    store = open_store(settings, create=True)  # a database it cannot use is said before the password is asked
    password = read_password(args.email)
    account = create_account_unchecked(store, SystemClock(), args.email, password)
    print(f"account {account.id} created for {account.email}")
    return 0


def accounts_list(args: argparse.Namespace) -> int:
    from community_api.account_lifecycle import account_summaries
    from community_api.clock import SystemClock

    _apply_common(args)
    store = open_store(load_settings())
    summaries = account_summaries(store, SystemClock())
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
    return 0


def accounts_delete(args: argparse.Namespace) -> int:
    from community_api.account_lifecycle import account_named, delete_account_unchecked
    from community_api.clock import SystemClock
    from community_api.email_address import email_key

    _apply_common(args)
    settings = load_settings()
    store = open_store(settings)
    name = args.account
    if sys.stdin.isatty():  # a person at a terminal confirms; a script (stdin not a terminal) is not asked
        named = account_named(store, name)  # an unknown one: one line (main), nothing asked
        typed = input(
            f"Delete {named.email} ({named.id}): its keys and grants revoked, its connections erased. "
            "Type the email to confirm: "
        )
        if email_key(typed) != email_key(named.email):
            raise SettingsError("not confirmed: nothing was deleted")
        name = named.id  # the account confirmed, even if its email names another one by now
    account = delete_account_unchecked(store, SystemClock(), name)
    print(f"account {account.id} deleted: its keys and grants revoked, its connections erased")
    return 0


def accounts_set_password(args: argparse.Namespace) -> int:
    from community_api.account_lifecycle import account_named, reset_password_unchecked
    from community_api.clock import SystemClock

    _apply_common(args)
    settings = load_settings()
    store = open_store(settings)  # a database it cannot use is said before the password is asked
    named = account_named(store, args.account)  # so is an account it has not
    password = read_password(named.email)
    account = reset_password_unchecked(store, SystemClock(), named.id, password)
    print(f"password of {account.email} set: every web session of the account ended, its API keys kept")
    return 0


def keys_mint(args: argparse.Namespace) -> int:
    from community_api.account_lifecycle import account_named
    from community_api.clock import SystemClock
    from community_api.keys import mint_key

    _apply_common(args)
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

    _apply_common(args)
    settings = load_settings()
    store = open_store(settings)
    emails = {account.id: account.email for account in store.list_accounts()}
    if not emails:  # every key belongs to an account: this is not the service's database
        raise SettingsError(
            f"the database {settings.db} has no accounts: set COMMUNITY_API_DB to the service's database"
        )
    if sys.stdin.isatty():
        values = [getpass.getpass("The leaked key (not shown): ")]
    else:
        values = [line for line in sys.stdin.read().splitlines() if line.strip()]
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
    from adapters.store.sqlite_backup import BackupError, backup_database

    _apply_common(args)
    settings = load_settings()
    try:
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
    return 0


def reseal(args: argparse.Namespace) -> int:
    """Seal every platform session under the current secret (after the secret changed), and say how many
    were moved, were already under it, and open under neither (exit status 1: those connections must be
    linked again, and dropping the previous secret changes nothing for them)."""
    _apply_common(args)
    settings = load_settings()
    store = open_store(settings)
    try:
        outcomes = store.reseal_sessions()
    finally:
        store.close()
    print(
        f"{_count(outcomes['resealed'], 'platform session')} sealed anew under COMMUNITY_API_SECRET, "
        f"{outcomes['current']} already under it"
        + ("" if settings.previous_secret else " (no COMMUNITY_API_PREVIOUS_SECRET set: nothing could be moved)")
    )
    if outcomes["lost"]:
        print(
            f"{_count(outcomes['lost'], 'platform session')} opened under neither secret: "
            f"{'its connection' if outcomes['lost'] == 1 else 'their connections'} must be linked again "
            "(the dashboard's Connections page)"
        )
        return 1
    if settings.previous_secret:
        print("every platform session opens under COMMUNITY_API_SECRET: COMMUNITY_API_PREVIOUS_SECRET may be removed")
    return 0


def _count(n: int, name: str) -> str:
    return f"{n} {name}" if n == 1 else f"{n} {name}s"


def demo(args: argparse.Namespace) -> int:
    from adapters.demo import run_demo

    return run_demo(bind=args.bind, sandbox_bind=args.sandbox_bind, exit_after_setup=args.exit_after_setup)


_NAMED = "the account's email, or its id (acc_…) as `accounts list` shows it"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="community-api", description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--version", action="version", version=f"%(prog)s {service_version()}")
    commands = parser.add_subparsers(dest="command", required=True)

    p = commands.add_parser("serve", help="run the service under gunicorn")
    _add_common(p)
    p.add_argument("--bind", default="127.0.0.1:8000", help="HOST:PORT to listen at (default: %(default)s)")
    p.add_argument(
        "--workers", type=int, default=2, help="processes, each with its own browsers (default: %(default)s)"
    )
    p.add_argument("--worker-class", default="gthread", choices=("sync", "gthread"), help="default: %(default)s")
    p.add_argument("--threads", type=int, help="requests at once per gthread worker (default: 4; sync: 1)")
    p.add_argument(
        "--timeout", type=int, default=120, help="seconds before a silent worker is restarted (default: %(default)s)"
    )
    p.add_argument("--preload", action="store_true", help="load the app once in the master, before forking")
    p.set_defaults(func=serve)

    p = commands.add_parser("sandbox", help="run the stand-in community platform (HTTPS, HTTP/2)")
    p.add_argument("--bind", default="127.0.0.1:8700", help="HOST:PORT to listen at (default: %(default)s)")
    p.add_argument("--seed", type=int, default=1, help="the seed of its made-up data (default: %(default)s)")
    p.add_argument("--plain-http", action="store_true", help="plain HTTP/1.1 without TLS")
    p.add_argument("--http1", action="store_true", help="HTTPS offering HTTP/1.1 only")
    p.set_defaults(func=sandbox)

    p = commands.add_parser("demo", help="the stand-in platform and the service, ready to try")
    p.add_argument("--bind", default="127.0.0.1:8000", help="the service's HOST:PORT (default: %(default)s)")
    p.add_argument(
        "--sandbox-bind", default="127.0.0.1:8700", help="the stand-in platform's HOST:PORT (default: %(default)s)"
    )
    p.add_argument("--exit-after-setup", action="store_true", help="print the key and curl lines, then stop")
    p.set_defaults(func=demo)

    p = commands.add_parser("backup", help="copy the database (COMMUNITY_API_DB) consistently while serving")
    _add_common(p)
    p.add_argument("path", help="the new file to write; an existing one is never overwritten")
    p.set_defaults(func=backup)

    p = commands.add_parser(
        "reseal",
        help="after the secret changed: seal every platform session under COMMUNITY_API_SECRET, "
        "opening with COMMUNITY_API_PREVIOUS_SECRET",
    )
    _add_common(p)
    p.set_defaults(func=reseal)

    p = commands.add_parser("accounts", help="manage accounts")
    sub = p.add_subparsers(dest="action", required=True)
    p = sub.add_parser("create", help="create an account; the password is asked (or read from standard input)")
    _add_common(p)
    p.add_argument("email")
    p.set_defaults(func=accounts_create)
    p = sub.add_parser(
        "list",
        help="list the accounts: email, id, creation, connections (and how many to link again: their platform "
        "session expired, or ends within a month), live keys",
    )
    _add_common(p)
    p.set_defaults(func=accounts_list)
    p = sub.add_parser(
        "set-password",
        help="set a forgotten password, asked (or read from standard input): every web session of the account "
        "ends, its API keys are kept",
    )
    _add_common(p)
    p.add_argument("account", metavar="EMAIL_OR_ID", help=_NAMED)
    p.set_defaults(func=accounts_set_password)
    p = sub.add_parser("delete", help="delete an account: its keys and grants revoked, its connections erased")
    _add_common(p)
    p.add_argument("account", metavar="EMAIL_OR_ID", help=_NAMED)
    p.set_defaults(func=accounts_delete)

    p = commands.add_parser("keys", help="manage API keys")
    sub = p.add_subparsers(dest="action", required=True)
    p = sub.add_parser("mint", help="mint a key and print it (shown once)")
    _add_common(p)
    # --email was its only name before an account could be named by id: scripts that give it keep working
    p.add_argument("--account", "--email", dest="account", required=True, help=_NAMED)
    p.add_argument("--name", help="what the key is for, shown beside it in the dashboard and in `keys revoke`")
    p.add_argument(
        "--scope",
        action="append",
        choices=ALL_SCOPES,
        metavar="SCOPE",
        help=f"a scope to grant, one of {', '.join(ALL_SCOPES)}; repeat; default: {' '.join(DEFAULT_SCOPES)}",
    )
    p.add_argument("--connection", help="bind the key to this connection id")
    p.set_defaults(func=keys_mint)
    p = sub.add_parser(
        "revoke",
        help="revoke leaked keys (or OAuth tokens) by value, from standard input one per line (or typed, not shown)",
        description="Revoke keys whose values leaked (a secret scanner's report): each is ended at once with "
        "its predecessors in grace, whoever owns it, and the owner's email is printed so that you can tell "
        "them. An OAuth access or refresh token (cdo_, cdr_) revokes its connector's grant. Exit status 1 "
        "when a value is no key of this service.",
    )
    _add_common(p)
    p.set_defaults(func=keys_revoke)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result: int = args.func(args)
        return result
    except SettingsError as error:
        print(f"community-api: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # a core error (bad email, weak password...): one line, no traceback
        from community_api.errors import ServiceError

        if isinstance(error, ServiceError):
            print(f"community-api: {error.message}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
