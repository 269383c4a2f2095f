"""The community-api command: serve, sandbox, demo, backup, reseal, accounts create, list, set-password
and delete, keys list, mint and revoke.

Flags set the same ``COMMUNITY_API_*`` variables the service reads, so gunicorn workers see one source
of settings. A wrong setting ends the command with a one-line reason, not a traceback. The commands on
what the database holds are in ``adapters/cli_store.py``; this module parses and runs the service.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from adapters.cli_store import (
    DEFAULT_KEEP,
    accounts_create,
    accounts_delete,
    accounts_list,
    accounts_set_password,
    apply_common,
    backup,
    keys_list,
    keys_mint,
    keys_revoke,
    open_store,
    reseal,
    unopened_sessions_warning,
)
from adapters.gunicorn_command import (
    check_can_listen,
    check_serve_args,
    exposure_warning,
    gunicorn_argv,
    memory_warning,
    startup_summary,
)
from adapters.metrics_folder import foreign_files_problem
from adapters.serve_bind import serving_on
from adapters.settings import PREFIX, Settings, SettingsError, is_utf8_text, load_settings
from adapters.version import service_version
from community_api.scopes import ALL_SCOPES, DEFAULT_SCOPES


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
    apply_common(args)
    check_serve_args(args)
    settings = load_settings()  # refuse to start on a bad setting before forking workers
    # Before the database is opened: a second serve on a port in use must not bring its schema forward under
    # the one that serves.
    check_can_listen(args.bind)
    sessions = check_state(settings)
    if settings.mode == "production" and PREFIX + "PLATFORM_URL" not in os.environ:
        # Its default is the stand-in's loopback address, for demo and test: a real service left on it
        # would start, and fail every link as "platform unavailable".
        raise SettingsError(
            f"{PREFIX}PLATFORM_URL must be set to the platform's web address (and {PREFIX}PLATFORM_API_URL to "
            "its API's); the default, the stand-in's, serves demo and test modes only"
        )
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if folder and (problem := foreign_files_problem(folder)):
        raise SettingsError(problem)
    print(startup_summary(args, settings), file=sys.stderr, flush=True)
    for warning in (
        *(exposure_warning(bind, settings.trusted_proxies) for bind in serving_on(args.bind)),
        memory_warning(args.workers, settings.browser_pool_size, settings),
        sessions,
    ):
        if warning:
            print(warning, file=sys.stderr, flush=True)
    os.execv(sys.executable, gunicorn_argv(args, settings))  # noqa: S606 - replaces this process with gunicorn
    return 0  # pragma: no cover


def check_state(settings: Settings) -> str | None:
    """What ``serve`` needs before it forks workers: the database, the throttle storage answering, and a
    temporary folder where local browsers can start. Answers the database's warning, if any: platform
    sessions that open under neither secret given (``unopened_sessions_warning``)."""
    from adapters.platform.browser import temp_folder_problem
    from adapters.throttle.limits_throttle import LimitsThrottle

    if not settings.selenium_remote_url and (problem := temp_folder_problem()):
        raise SettingsError(problem)
    store = open_store(settings, create=True)
    try:
        warning = unopened_sessions_warning(store)
    finally:
        store.close()
    try:
        throttle = LimitsThrottle(settings.throttle_uri, salt=settings.secret)
        throttle.quota("start-up check")  # a read: opens (or makes) the storage, raising what stops it
        problem = throttle.ready()
    except Exception as error:  # a storage's own failure, whatever its library raises
        problem = f"{type(error).__name__}: {error}"
    if problem:
        # (The URI is not repeated: it may hold a password; the operator has it.)
        raise SettingsError(f"COMMUNITY_API_THROTTLE_STORAGE (default: a file beside the database): {problem}")
    return warning


def sandbox(args: argparse.Namespace) -> int:
    argv = [sys.executable, "-m", "scripts.sandbox", "--bind", args.bind, "--seed", str(args.seed)]
    argv += ["--plain-http"] if args.plain_http else []
    argv += ["--http1"] if args.http1 else []
    os.execv(sys.executable, argv)  # noqa: S606
    return 0  # pragma: no cover


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
    p.add_argument(
        "--bind",
        default="127.0.0.1:8000",
        help="HOST:PORT, unix:PATH or fd://N (an inherited listening socket) to listen at (default: %(default)s)",
    )
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
    p.add_argument("path", nargs="?", help="the new file to write; an existing one is never overwritten")
    p.add_argument(
        "--into",
        metavar="FOLDER",
        help="instead of PATH: a copy named by the time (community-api-YYYYMMDDTHHMMSSZ.sqlite3) in this folder",
    )
    p.add_argument(
        "--keep",
        type=int,
        metavar="N",
        help=f"with --into: keep the newest N copies there, remove older ones (default {DEFAULT_KEEP})",
    )
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
    p = sub.add_parser("list", help="an account's keys: state, dates, binding, scopes and name (never a secret)")
    _add_common(p)
    p.add_argument("--account", required=True, help=_NAMED)
    p.set_defaults(func=keys_list)
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
    given = sys.argv[1:] if argv is None else list(argv)
    # Python keeps an argument's bytes that are not UTF-8 as lone surrogates, which failed with a traceback
    # wherever the text was encoded (an email hashed, an id looked up). Not repeated: it may be a secret.
    broken = next((n for n, arg in enumerate(given, 1) if not is_utf8_text(arg)), None)
    if broken is not None:
        print(f"community-api: argument {broken} is not UTF-8 text: nothing was done", file=sys.stderr)
        return 2
    args = build_parser().parse_args(given)
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
