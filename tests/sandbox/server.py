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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def sandbox_server(*args: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """Yield ``(base_url, process)`` once the sandbox has printed its ready line."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "scripts.sandbox", "--bind", f"127.0.0.1:{port}", *args],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    try:
        deadline, line = time.monotonic() + 30, ""
        while "sandbox listening" not in line:
            assert time.monotonic() < deadline and proc.poll() is None, f"sandbox did not start: {line}"
            if select.select([proc.stdout], [], [], 0.5)[0]:
                line = proc.stdout.readline()
        base = f"http://127.0.0.1:{port}"
        assert line.strip() == f"sandbox listening on {base}"
        yield base, proc
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
