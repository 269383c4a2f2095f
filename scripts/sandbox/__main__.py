"""``python -m scripts.sandbox --bind 127.0.0.1:PORT [--seed N] [--plain-http] [--http1]``: serve the stand-in.

The real hosts speak HTTP/2 over TLS (PLATFORM.md, "Hosts"), so the stand-in does too: granian serves the
WSGI app over HTTPS, offering HTTP/2 and HTTP/1.1 (ALPN: a client that asks for HTTP/1.1 gets it), with a
certificate made at start (``tls.py``). ``--http1`` offers HTTP/1.1 only (the feed bench's comparison);
``--plain-http`` serves plain HTTP/1.1 without TLS.

One worker process (the state lives in its memory) running the app on ``--threads`` threads (32: a
browser fetches about 30 pages at once, and over HTTP/2 they all arrive together).

What it prints, in this order, before it serves (clients wait for the last line):
    sandbox certificate /tmp/…/sandbox-cert.pem     (HTTPS only: verify against it)
    sandbox spki <base64 SHA-256 of the key>        (HTTPS only: what the browser is told to trust)
    sandbox listening on https://HOST:PORT
It runs until SIGTERM. ``--bind HOST:0`` takes a free port.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

import falcon
from granian import Granian

from scripts.sandbox.state import DAY
from scripts.sandbox.tls import make_certificate

_SEED = "SANDBOX_SEED"
_FIREWALL_TTL = "SANDBOX_FIREWALL_TTL"


def app_from_environment() -> falcon.App:
    """The app of the worker process (granian imports and calls it there; the options come through the
    environment the worker inherits)."""
    from scripts.sandbox.app import create_app

    return create_app(int(os.environ.get(_SEED, "1")), firewall_ttl=float(os.environ.get(_FIREWALL_TTL, DAY)))


def _host_port(bind: str) -> tuple[str, int]:
    host, _, port = bind.rpartition(":")
    if not host or not (port.isascii() and port.isdigit()) or int(port) > 65535:
        raise SystemExit(f"--bind takes HOST:PORT (a port from 0, any free one, to 65535), not {bind!r}")
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            # Port 0: granian cannot report a port the system picked, so it is picked here. Any other: a
            # program already listening there would answer the "listening" check below in our place.
            probe.bind((host, int(port)))
        except OSError as error:
            raise SystemExit(f"sandbox: cannot listen at {bind} ({error.strerror})") from None
        return host, probe.getsockname()[1]


def _announce_when_listening(host: str, port: int, scheme: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=1):
                print(f"sandbox listening on {scheme}://{host}:{port}", flush=True)
                return
        except OSError:
            time.sleep(0.05)
    print("sandbox did not start listening within 60 s", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m scripts.sandbox", description=__doc__.splitlines()[0])
    parser.add_argument("--bind", default="127.0.0.1:8700", help="HOST:PORT (default %(default)s)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--firewall-ttl", type=float, default=DAY, help="seconds a firewall token lives")
    parser.add_argument("--plain-http", action="store_true", help="plain HTTP/1.1, no TLS")
    parser.add_argument("--http1", action="store_true", help="HTTPS offering HTTP/1.1 only (no HTTP/2)")
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    host, port = _host_port(args.bind)
    os.environ[_SEED], os.environ[_FIREWALL_TTL] = str(args.seed), str(args.firewall_ttl)
    tls: dict[str, Path] = {}
    if not args.plain_http:
        folder = Path(tempfile.mkdtemp(prefix="cda-sandbox-tls-"))
        atexit.register(shutil.rmtree, folder, True)
        certificate = make_certificate(folder)
        tls = {"ssl_cert": certificate.cert_path, "ssl_key": certificate.key_path}
        print(f"sandbox certificate {certificate.cert_path}", flush=True)
        print(f"sandbox spki {certificate.spki}", flush=True)
    scheme = "http" if args.plain_http else "https"
    threading.Thread(target=_announce_when_listening, args=(host, port, scheme), daemon=True).start()
    server = Granian(
        "scripts.sandbox.__main__:app_from_environment",
        address=host,
        port=port,
        interface="wsgi",  # type: ignore[arg-type]
        factory=True,
        workers=1,
        blocking_threads=args.threads,
        http="1" if args.http1 or args.plain_http else "auto",  # type: ignore[arg-type]
        log_level=args.log_level,
        **tls,  # type: ignore[arg-type]
    )
    server.serve()
    sys.exit(0)


if __name__ == "__main__":
    main()
