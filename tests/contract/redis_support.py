"""A throwaway redis-server for the contract tests of the ``limits`` adapters (the DM throttle and the
platform pace), started on a free loopback port and ended by its PID."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

REDIS_SERVER = "/usr/bin/redis-server"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def running_redis_server() -> Iterator[str]:
    """A throwaway redis-server on a free loopback port, ended by its PID. Answers its URI.

    Absent server: skipped on a workstation, a failure under CI (``make test`` installs it)."""
    if not os.path.exists(REDIS_SERVER):
        if os.environ.get("CI"):
            pytest.fail(f"{REDIS_SERVER} is missing; `make test` installs redis-server")
        pytest.skip(f"{REDIS_SERVER} is not installed")
    port = free_port()
    process = subprocess.Popen(
        [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # Counted attempts rather than a deadline: the clock may be frozen when this starts.
        for attempt in range(200):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if process.poll() is not None or attempt == 199:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        os.kill(process.pid, signal.SIGTERM)
        process.wait(10)


def flush_redis(uri: str) -> None:
    import redis

    client = redis.Redis.from_url(uri)
    client.flushall()
    client.close()
