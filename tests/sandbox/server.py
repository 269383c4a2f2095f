"""Start ``python -m scripts.sandbox`` as a real process on a free loopback port, and end it by its PID."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class RunningSandbox:
    base: str  # https://127.0.0.1:PORT (http:// with --plain-http)
    process: subprocess.Popen[str]
    cert: str | None  # the certificate file to verify against (None: plain HTTP)
    spki: str | None  # what Chromium is told to trust (--ignore-certificate-errors-spki-list)

    @property
    def verify(self) -> str | bool:
        """For ``requests``: the stand-in's own certificate."""
        return self.cert or True


@contextmanager
def sandbox_server(*args: str, command: tuple[str, ...] = ("scripts.sandbox",)) -> Iterator[RunningSandbox]:
    """Yield the running sandbox once it has printed its ready line (after its certificate lines).
    ``command``: the module run, with its arguments before ``--bind`` (``adapters.cli sandbox``: the
    ``community-api sandbox`` a user types)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", *command, "--bind", f"127.0.0.1:{port}", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    try:
        deadline, line, said = time.monotonic() + 30, "", {}
        while "sandbox listening" not in line:
            assert time.monotonic() < deadline and proc.poll() is None, f"sandbox did not start: {line}"
            if select.select([proc.stdout], [], [], 0.5)[0]:
                line = proc.stdout.readline()
                for what in ("certificate", "spki"):
                    if line.startswith(f"sandbox {what} "):
                        said[what] = line.split(" ", 2)[2].strip()
        scheme = "http" if "--plain-http" in args else "https"
        base = f"{scheme}://127.0.0.1:{port}"
        assert line.strip() == f"sandbox listening on {base}"
        yield RunningSandbox(base, proc, said.get("certificate"), said.get("spki"))
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
            proc.stdout.close()
