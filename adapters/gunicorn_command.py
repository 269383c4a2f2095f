"""``community-api serve``: the gunicorn command line it runs, and what it checks of its flags first.

A flag gunicorn would take badly is refused in one line before anything starts: no worker at all
(gunicorn listens and nothing ever answers), a port out of range (a traceback), a negative time-out, more
than one thread for a sync worker (gunicorn would silently make it a gthread worker), an address, a unix
socket's path or an inherited socket it could not listen on (``serve_bind``: an address already in use was
tried five times over five seconds, ten lines of errors).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from adapters.serve_bind import (
    activated_binds,
    check_bind,
    check_tcp_bind,
    described,
    listening_at,
    serving_on,
    unix_path,
)
from adapters.settings import Settings, SettingsError
from adapters.throttle.storage_uri import masked

GUNICORN_DEFAULT_PORT = 8000  # a --bind of a host alone (gunicorn's rule)


def exposure_warning(bind: str, trusted_proxies: Sequence[str]) -> str | None:
    """The warning ``serve`` prints when it listens where strangers can reach gunicorn itself, with no
    reverse proxy named: gunicorn reads each request in a worker's thread, so as many clients as there are
    threads (8 with two workers), sending their requests slowly or not at all, stop the service for as
    long as they keep their connections open (measured: ``/healthz`` answered nothing within 15 s).
    nginx reads whole requests before it passes them on (docs/deployment.md)."""
    from adapters.http.host_check import host_name, is_loopback  # the Host check's own rule

    # A host name other than localhost may resolve to any address: warned of. An inherited socket
    # (``fd://N``) is judged by what it listens at.
    where = listening_at(bind)
    if unix_path(where) is not None or trusted_proxies or is_loopback(host_name(where.lower())):
        return None
    return (
        f"community-api: warning: serving on {described(bind)} with no reverse proxy named"
        " (COMMUNITY_API_TRUSTED_PROXIES):"
        " a few clients that send requests slowly can hold every worker thread; put nginx in front"
        " (deploy/nginx/, docs/deployment.md)"
    )


def memory_warning(
    workers: int, pool_size: int, settings: Settings, figures: Callable[[], list[int | None]] | None = None
) -> str | None:
    """The warning ``serve`` prints when the local browsers it may start do not fit the memory there is as it
    starts (the machine's, or its cgroup's limit): ``workers × pool size`` fresh browsers of about 300 MiB,
    besides the 600 MiB the pool keeps free. The pool holds back the starts that do not fit (they wait, then
    answer 503), which an operator would otherwise first learn of from their users."""
    from adapters.platform.memory_room import MIN_FREE_MIB, STARTING_MIB, machine_figures

    if settings.selenium_remote_url:
        return None  # a Grid's browsers live on its nodes
    known = [figure for figure in (figures or machine_figures)() if figure is not None]
    if not known:
        return None
    available = min(known)
    browsers = workers * pool_size
    if browsers * STARTING_MIB + MIN_FREE_MIB <= available:
        return None
    fit = max(0, available - MIN_FREE_MIB) // STARTING_MIB
    return (
        f"community-api: warning: {workers} worker{'s' if workers != 1 else ''} × {pool_size} browsers"
        f" (COMMUNITY_API_BROWSER_POOL_SIZE) take about {browsers * STARTING_MIB} MiB when fresh, and {available}"
        f" MiB is available here: about {fit} fit beside the {MIN_FREE_MIB} MiB kept free; starts beyond"
        " wait for memory, then answer 503. Lower the pool size or --workers (docs/deployment.md)"
    )


def startup_summary(args: argparse.Namespace, settings: Settings) -> str:
    """The line ``serve`` prints as it starts: what it runs with, so that an operator reading the journal sees
    which settings took effect (a default path, a storage, a public URL left unset) without reading the
    environment. Never a secret: the service's secret and the metrics token are not named, and a storage
    URI's password or token is masked."""
    browsers = (
        f"a Selenium Grid at {settings.selenium_remote_url}" if settings.selenium_remote_url else "local Chromium"
    )
    idle = settings.browser_idle_seconds
    closed = f"closed after {idle:g} s unused" if idle else "kept until evicted"
    public = settings.public_url or "none (absolute URLs from the request's Host: loopback and ALLOWED_HOSTS)"
    per_worker = threads(args)
    binds = serving_on(args.bind)
    on = ", ".join(described(bind) for bind in binds)
    if binds != [args.bind]:
        on = f"systemd's socket{'s' if len(binds) != 1 else ''} {on} (not --bind)"
    parts = [
        f"starting in {settings.mode} mode on {on}, {args.workers} worker{'s' if args.workers != 1 else ''}"
        f" of {per_worker} thread{'s' if per_worker != 1 else ''}",
        f"platform {settings.platform_url} (API {settings.platform_api_url})",
        f"database {os.path.abspath(settings.db)}",
        f"throttle {masked(settings.throttle_uri)}",
        f"browsers: {browsers}, up to {settings.browser_pool_size} per worker, {closed}",
        f"platform pace {settings.platform_reads_per_minute} reads and {settings.platform_writes_per_minute} writes"
        " a minute per platform account",
        f"public URL {public}",
        f"trusted proxies {_trusted(binds, settings.trusted_proxies)}",
        f"sign-up {'open' if settings.signup else 'closed after the first account'}",
    ]
    if settings.previous_secret:  # said so that a forgotten one is seen; its value never is
        parts.append("the previous secret still opens platform sessions (`community-api reseal`, then remove it)")
    return "community-api: " + "; ".join(parts)


def _trusted(binds: Sequence[str], named: Sequence[str]) -> str:
    """The proxies whose X-Forwarded-For is read: those named, and on a unix socket its peer (always)."""
    on_unix = any(unix_path(listening_at(bind)) is not None for bind in binds)
    trusted = ["the unix socket's peer"] if on_unix else []
    return ", ".join([*trusted, *named]) or "none"


def check_serve_args(args: argparse.Namespace) -> None:
    """Refuse what gunicorn would take badly (the module's docstring), each in one line."""
    if args.workers < 1:
        raise SettingsError("--workers must be at least 1")
    threads(args)
    if args.timeout < 0:
        raise SettingsError("--timeout must be 0 (never restart a silent worker) or more seconds")
    for activated in activated_binds(os.environ, os.getpid()):
        check_bind(activated, given_by="systemd's socket (LISTEN_FDS)")
    bind: str = args.bind
    if unix_path(bind) is not None or bind.startswith("fd://"):
        check_bind(bind)
        return
    host, port = host_and_port(bind)
    if port is not None and not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        raise SettingsError(f"--bind takes HOST:PORT (a port from 1 to 65535), unix:PATH or fd://N, not {bind!r}")
    if not host:
        raise SettingsError(f"--bind takes HOST:PORT, unix:PATH or fd://N, not {bind!r}")


def check_can_listen(bind: str) -> None:
    """Refuse a ``HOST:PORT`` (checked by ``check_serve_args``) that cannot be listened at now: asked once
    every setting has been found right, before the database is opened. systemd's sockets are served instead
    of ``--bind`` when it passed some."""
    if unix_path(bind) is not None or bind.startswith("fd://") or activated_binds(os.environ, os.getpid()):
        return
    host, port = host_and_port(bind)
    check_tcp_bind(bind, host, GUNICORN_DEFAULT_PORT if port is None else int(port))


def host_and_port(bind: str) -> tuple[str, str | None]:
    """A ``HOST:PORT`` bind's two parts, the port None when not given (``[::1]`` is an address alone)."""
    if ":" in bind and not bind.endswith("]"):
        host, _, port = bind.rpartition(":")
        return host, port
    return bind, None


def threads(args: argparse.Namespace) -> int:
    """Threads per worker: 4 by default for gthread workers; a sync worker has one (gunicorn would turn a
    sync worker given more into a gthread one, silently)."""
    if args.worker_class == "sync":
        if args.threads not in (None, 1):
            raise SettingsError("--threads applies to gthread workers; a sync worker serves one request at a time")
        return 1
    count = 4 if args.threads is None else args.threads
    if count < 1:
        raise SettingsError("--threads must be at least 1")
    return count


def gunicorn_argv(args: argparse.Namespace, settings: Settings) -> list[str]:
    """The command that replaces ``serve``'s process: gunicorn with the service's configuration."""
    from adapters.http.client_address import forwarded_allow_ips  # what the service itself trusts

    argv = [
        sys.executable,
        "-m",
        "gunicorn",
        # Metrics summed over every worker (prometheus_client's multiprocess mode): see gunicorn_conf.py.
        "--config",
        "python:adapters.gunicorn_conf",
        # X-Forwarded-Proto (the scheme of absolute URLs, Secure cookies) only from a trusted proxy; gunicorn
        # would otherwise believe any loopback peer.
        "--forwarded-allow-ips",
        forwarded_allow_ips(settings.trusted_proxies),
        "--bind",
        args.bind,
        "--workers",
        str(args.workers),
        "--worker-class",
        args.worker_class,
        "--threads",
        str(threads(args)),
        "--timeout",
        str(args.timeout),
        # No gunicorn access log: the service writes one JSON line per request (request_log.py).
        "adapters.wiring:get_app()",
    ]
    if args.preload:
        argv.insert(3, "--preload")
    return argv
