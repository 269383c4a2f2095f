"""Real processes for the tests and the benchmarks: free loopback ports, start, wait, end by PID."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import requests

from adapters.platform import procfs

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def alive(pid: int) -> bool:
    """Running, not merely a zombie waiting for its parent (/proc/PID/stat's state)."""
    return procfs.running(pid)


def wait_for_http(url: str, process: subprocess.Popen[bytes], timeout: float = 30.0, verify: bool | str = True) -> None:
    """Until anything answers at ``url`` (``verify``: as requests takes it, e.g. a test certificate's path)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the process serving {url} exited with {process.returncode}")
        try:
            requests.get(url, timeout=1, verify=verify)
            return
        except requests.RequestException:
            time.sleep(0.1)
    raise RuntimeError(f"nothing answered at {url} within {timeout} s")


def stop(process: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """End the process by its PID (and its workers, which gunicorn's master ends on SIGTERM)."""
    if process.poll() is None:
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout)


@contextmanager
def serving(
    args: Sequence[str],
    health_url: str,
    env: Mapping[str, str] | None = None,
    log_path: Path | None = None,
    cwd: Path = ROOT,
    verify: bool | str = True,
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``python args…`` in ``cwd`` (the project root) until the block ends; its output goes to ``log_path``.
    ``verify``: the certificate check of ``health_url`` (a proxy's, in front of it)."""
    full_env = {**os.environ, **(env or {})}
    log = open(log_path, "wb") if log_path else subprocess.DEVNULL  # noqa: SIM115
    process = subprocess.Popen([sys.executable, *args], cwd=cwd, env=full_env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_http(health_url, process, verify=verify)
        yield process
    finally:
        stop(process)
        if log_path:
            log.close()  # type: ignore[union-attr]


def gunicorn_args(
    app: str,
    port: int,
    workers: int = 3,
    worker_class: str = "sync",
    preload: bool = False,
    access_log: bool = True,
) -> list[str]:
    """gunicorn's command line for ``app`` on 127.0.0.1:``port``. Tests keep gunicorn's access log (to the
    process's output, to read when a test fails); ``access_log=False`` leaves it off, as
    ``community-api serve`` does."""
    args = [
        "-m",
        "gunicorn",
        # As `community-api serve` runs it: /metrics sums every worker's counts.
        "--config",
        "python:adapters.gunicorn_conf",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(workers),
        "--worker-class",
        worker_class,
        "--timeout",
        "60",
    ]
    if access_log:
        args += ["--access-logfile", "-"]
    if worker_class == "gthread":
        args += ["--threads", "4"]
    if preload:
        args.append("--preload")
    return [*args, app]
