"""The processes the feed benches run (``feed.py``, ``browser_memory.py``): the stand-in platform over HTTPS,
the service in front of it, and the accounts linked through the service's browser."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import requests

from scripts.processes import free_port, gunicorn_args, serving

ROOT = Path(__file__).resolve().parents[2]
SECRET = "bench-feed-secret-" + "f" * 40
READY = re.compile(r"sandbox listening on (https?://\S+)")
SAID = re.compile(r"sandbox (certificate|spki) (\S+)")


@dataclass(frozen=True)
class StandIn:
    process: subprocess.Popen[bytes]
    url: str  # https://127.0.0.1:PORT
    cert: str  # its certificate file, for plain clients
    spki: str  # its key's hash, for the service's browser


@contextmanager
def stand_in(folder: Path, threads: int, http1: bool = False) -> Iterator[StandIn]:
    """``python -m scripts.sandbox`` (HTTPS; HTTP/2 unless ``http1``) on a free port; ended by its PID."""
    log_path = folder / ("sandbox-http1.log" if http1 else "sandbox.log")
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "scripts.sandbox",
                "--bind",
                "127.0.0.1:0",
                "--threads",
                str(threads),
                *(["--http1"] if http1 else []),
            ],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while not (found := READY.search(log_path.read_text(errors="replace"))):
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the stand-in did not start:\n{log_path.read_text()[-2000:]}")
            time.sleep(0.05)
        said = dict(SAID.findall(log_path.read_text(errors="replace")))
        yield StandIn(process, found.group(1), said["certificate"], said["spki"])
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGTERM)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)
                process.wait(15)


@contextmanager
def service_for(
    folder: Path, platform: StandIn, name: str, grid_url: str | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """gunicorn serving the app (one gthread worker, a pool of two browsers) against ``platform``; its
    browsers on the Selenium Grid at ``grid_url`` if one is given."""
    port = free_port()
    api = f"http://127.0.0.1:{port}"
    env = {
        "COMMUNITY_API_MODE": "test",
        "COMMUNITY_API_DB": str(folder / f"{name}.sqlite3"),
        "COMMUNITY_API_SECRET": SECRET,
        "COMMUNITY_API_PLATFORM_URL": platform.url,
        "COMMUNITY_API_PLATFORM_API_URL": platform.url + "/api2",
        "COMMUNITY_API_BROWSER_POOL_SIZE": "2",
        "COMMUNITY_API_BROWSER_TRUSTED_SPKI": platform.spki,
        # The bench reads far more than an account should; the read pace has tests and a bench of its own.
        "COMMUNITY_API_PLATFORM_READS_PER_MINUTE": "20000",
        "COMMUNITY_API_PLATFORM_WRITES_PER_MINUTE": "20000",  # and the write pace
    }
    if grid_url:
        env["COMMUNITY_API_SELENIUM_REMOTE_URL"] = grid_url
    service_args = gunicorn_args("adapters.wiring:get_app()", port, workers=1, worker_class="gthread", access_log=False)
    with serving(
        service_args,
        api + "/v1/openapi.json",
        env=env,
        log_path=folder / f"{name}.log",
    ) as service:
        yield service, api


def set_latency(platform: StandIn, ms: int) -> None:
    """The control API's ``latency`` on page data (``/_next/data/``): every page document waits ``ms``."""
    with requests.Session() as http:
        http.trust_env = False
        http.post(
            f"{platform.url}/__sandbox/clear-faults", json={}, verify=platform.cert, timeout=10
        ).raise_for_status()
        if ms:
            http.post(
                f"{platform.url}/__sandbox/latency",
                json={"route": "/_next/data/", "ms": ms},
                verify=platform.cert,
                timeout=10,
            ).raise_for_status()


def link_users(api: str, handles: list[str]) -> list[str]:
    """One service account; each platform user linked through the browser (a connection each, as a
    user links an account); answers a key per connection, in the order given."""
    web = requests.Session()
    email, password = "bench@example.com", "bench password 123"
    web.post(f"{api}/v1/accounts", json={"email": email, "password": password}, timeout=10)
    signed = web.post(f"{api}/v1/session", json={"email": email, "password": password}, timeout=10)
    signed.raise_for_status()
    web.headers["X-CSRF-Token"] = signed.json()["csrfToken"]
    keys = []
    for handle in handles:
        linked = web.post(
            f"{api}/v1/connections", json={"email": f"{handle}@sandbox.test", "password": "sandbox"}, timeout=120
        )
        if linked.status_code != 201:
            raise SystemExit(f"linking {handle} failed: {linked.status_code} {linked.text[:300]}")
        minted = web.post(f"{api}/v1/keys", json={"name": handle, "connectionId": linked.json()["id"]}, timeout=10)
        minted.raise_for_status()
        keys.append(str(minted.json()["secret"]))
    return keys
