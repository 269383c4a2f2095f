"""The stand-in platform as a test uses it: a process of its own and its control API.

``SandboxProcess`` is a running stand-in; ``running_sandbox()`` starts one for a block. The integration
tests share one through the ``sandbox`` fixture (``tests/integration/conftest.py``):

``sandbox``: the stand-in platform (``scripts/sandbox``) running as a process of its own on a free
loopback port, for the whole test session, ended by its PID afterwards. Its state is shared by every
test that uses it: a test that changes it (posts, DMs, faults, expired tokens, a new build id) calls
``sandbox.reset()`` first or last. Tests outside this folder may start their own with
``running_sandbox()``.

    def test_something(sandbox: SandboxProcess) -> None:
        sandbox.reset()
        sandbox.control("errors", {"route": "/api2/self", "status": 500, "count": 1})
        alice_id = sandbox.user_id("alice")
        ...
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parents[2]
READY = re.compile(r"sandbox listening on (https?://\S+)")
CERTIFICATE = re.compile(r"sandbox certificate (\S+)")
SPKI = re.compile(r"sandbox spki (\S+)")
START_TIMEOUT = 60.0


class SandboxProcess:
    """A running stand-in platform: its URLs, its PID, and its control API (``/__sandbox/``)."""

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        url: str,
        log_path: Path,
        cert: str | None = None,
        spki: str | None = None,
    ) -> None:
        self.process = process
        self.url = url  # the www host: pages and page data (https://, HTTP/2)
        self.api_url = f"{url}/api2"  # the api2 host
        self.log_path = log_path
        self.cert = cert  # its certificate file (None: plain HTTP)
        self.spki = spki  # its key's hash, for the browser (``COMMUNITY_API_BROWSER_TRUSTED_SPKI``)
        self._http = requests.Session()
        self._http.trust_env = False  # else REQUESTS_CA_BUNDLE, when set, replaces the verify below
        self._http.verify = cert or True

    @property
    def trusted_spki(self) -> tuple[str, ...]:
        """What a gateway under test is told to trust."""
        return (self.spki,) if self.spki else ()

    @property
    def pid(self) -> int:
        return self.process.pid

    def control(self, path: str, json: dict[str, Any] | None = None) -> Any:
        """Call ``/__sandbox/{path}``: GET when ``json`` is None (read-outs: ``state``, ``created``,
        ``sent``, ``users``, ``ordering?…``), else POST with that body (actions: ``reset``, ``latency``,
        ``errors``, ``clear-faults``, ``expire-session``, ``expire-firewall``, ``build-id``, ``antispam``,
        ``ttl``; pass ``{}`` for an action without arguments). Answers the JSON; raises on an error."""
        url = f"{self.url}/__sandbox/{path.lstrip('/')}"
        resp = self._http.get(url, timeout=30) if json is None else self._http.post(url, json=json, timeout=30)
        if resp.status_code >= 400:
            raise AssertionError(f"sandbox control {path} answered {resp.status_code}: {resp.text[:300]}")
        return resp.json()

    def reset(self) -> None:
        """Seed data as at start, no faults, no read-outs, the original build id; sessions stay valid."""
        self.control("reset", {})

    def user_id(self, handle: str) -> str:
        return str(next(u["id"] for u in self.control("users")["users"] if u["name"] == handle))

    def group_id(self, slug: str) -> str:
        return str(self.control("state")["groups"][slug]["id"])

    def stop(self) -> None:
        """End the process by its PID: SIGTERM (gunicorn's master ends its worker), SIGKILL if it lingers."""
        self._http.close()
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(10)


@contextmanager
def running_sandbox(seed: int = 1) -> Iterator[SandboxProcess]:
    """Start ``python -m scripts.sandbox`` on a port the OS picks (``:0``, so no race for a free port),
    wait for its "sandbox listening on …" line, and end it by PID when the block ends."""
    with tempfile.TemporaryDirectory(prefix="cda-sandbox-") as tmp:
        log_path = Path(tmp) / "sandbox.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "scripts.sandbox", "--bind", "127.0.0.1:0", "--seed", str(seed)],
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        sandbox: SandboxProcess | None = None
        try:
            url = _wait_until_listening(process, log_path)
            said = log_path.read_text(errors="replace")
            cert, spki = CERTIFICATE.search(said), SPKI.search(said)
            sandbox = SandboxProcess(
                process, url, log_path, cert.group(1) if cert else None, spki.group(1) if spki else None
            )
            yield sandbox
        finally:
            if sandbox is not None:
                sandbox.stop()
            elif process.poll() is None:
                os.kill(process.pid, signal.SIGKILL)
                process.wait(10)


def _wait_until_listening(process: subprocess.Popen[bytes], log_path: Path) -> str:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        found = READY.search(log_path.read_text(errors="replace"))
        if found:
            return found.group(1)
        if process.poll() is not None:
            raise RuntimeError(f"the sandbox exited with {process.returncode}:\n{log_path.read_text()[-2000:]}")
        time.sleep(0.05)
    raise RuntimeError(f"the sandbox did not start within {START_TIMEOUT} s")
