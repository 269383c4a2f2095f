"""The disk under the database fills while the service serves (gunicorn, the SQLite store and the
throttles' file on a small tmpfs of their own, made in namespaces of the test's own:
``tests/small_filesystem.py``; the test fills it through ``/proc/PID/root``). What a client sees: reads
go on; a write answers 503 ``service_unavailable`` with ``Retry-After`` and says why, where it answered
500 ``internal_error`` ("the service failed") before, with a traceback per request in the log; nothing
is done twice; once there is room again, writes work."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import requests

from scripts.processes import ROOT, free_port, gunicorn_args, stop, wait_for_http
from tests.small_filesystem import UNSHARE, require_namespaces

pytestmark = [pytest.mark.slow]

PASSWORD = "a long enough password"
SECRET = "e2e-full-disk-" + "d" * 40
GROUP = "builders-club"


@attrs.define
class Service:
    url: str
    pid: int
    small: Path  # the tmpfs, as the service sees it
    log: Path
    key: str

    def filler(self) -> Path:
        """A file on the service's tmpfs, reached through its mount namespace."""
        return Path(f"/proc/{self.pid}/root{self.small}/filler")

    def post(self, title: str, idempotency_key: str) -> requests.Response:
        return requests.post(
            f"{self.url}/v1/groups/{GROUP}/posts",
            json={"title": title, "content": "text"},
            headers={"Authorization": f"Bearer {self.key}", "Idempotency-Key": idempotency_key},
            timeout=30,
        )

    def titles(self) -> list[str]:
        feed = requests.get(
            f"{self.url}/v1/groups/{GROUP}/posts?sort=newest",
            headers={"Authorization": f"Bearer {self.key}"},
            timeout=30,
        )
        assert feed.status_code == 200, feed.text
        return [post["title"] for post in feed.json()["posts"]]


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    require_namespaces()
    small = tmp_path / "small"
    small.mkdir()
    log = tmp_path / "gunicorn.log"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "COMMUNITY_API_MODE": "test",
        "COMMUNITY_API_DB": str(small / "service.sqlite3"),  # the throttles' file goes beside it
        "COMMUNITY_API_SECRET": SECRET,
        "COMMUNITY_API_PLATFORM_WRITES_PER_MINUTE": "100",  # up to 30 posts: a full disk, not the pace, stops them
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics"),
    }
    # One worker: the in-memory platform is one world, so the feed shows every post made.
    args = gunicorn_args("tests.e2e.app_factory:get_app()", port, workers=1)
    mount = f'mount -t tmpfs -o size=8M none "{small}" && exec "$0" "$@"'
    with open(log, "wb") as out:
        # unshare and sh exec: the PID is gunicorn's master.
        process = subprocess.Popen(
            [
                *UNSHARE,
                "sh",
                "-c",
                mount,
                sys.executable,
                *args,
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for_http(url + "/healthz", process)
        yield Service(url, process.pid, small, log, _key(url))
    finally:
        stop(process)


def _key(url: str) -> str:
    web = requests.Session()
    assert web.post(url + "/v1/accounts", json={"email": "full@example.com", "password": PASSWORD}).status_code == 201
    signed = web.post(url + "/v1/session", json={"email": "full@example.com", "password": PASSWORD})
    csrf = {"X-CSRF-Token": signed.json()["csrfToken"]}
    linked = web.post(
        url + "/v1/connections", json={"email": "alice@sandbox.test", "password": "sandbox"}, headers=csrf
    )
    assert linked.status_code == 201, linked.text
    minted = web.post(url + "/v1/keys", json={"name": "full", "scopes": ["posts:read", "posts:write"]}, headers=csrf)
    assert minted.status_code == 201, minted.text
    return str(minted.json()["secret"])


def fill(path: Path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, bytes(64 * 1024))
    except OSError:
        pass
    finally:
        os.close(fd)


def error_of(answer: requests.Response) -> dict[str, Any]:
    return dict(answer.json()["error"])


def test_a_full_disk_answers_503_with_why_and_nothing_is_done_twice(service: Service) -> None:
    assert service.post("before", "k-before").status_code == 201
    fill(service.filler())
    # SQLite may still have room in its write-ahead log for a write or two: write until it has none.
    refused: tuple[str, requests.Response] | None = None
    for n in range(30):
        answer = service.post(f"during {n}", f"k-{n}")
        if answer.status_code != 201:
            refused = (f"k-{n}", answer)
            break
    assert refused is not None, "thirty writes went through on a full disk"
    key, answer = refused
    assert answer.status_code == 503, answer.text  # before: 500 internal_error
    error = error_of(answer)
    assert error["code"] == "service_unavailable"
    assert "the disk is full" in error["message"] and "look before sending it again" in error["message"]
    assert answer.headers["Retry-After"] == "30" and error["details"]["retryAfter"] == 30

    # Reads go on, and readiness says what is wrong.
    assert "before" in service.titles()
    ready = requests.get(service.url + "/readyz", timeout=30)
    assert ready.status_code == 503 and "full" in ready.json()["checks"]["database"]

    # One line says why; no traceback per request.
    lines = [line for line in service.log.read_text().splitlines() if '"service_unavailable"' in line]
    assert lines and '"cause":"OperationalError: database or disk is full"' in lines[0], lines
    assert "unexpected error" not in service.log.read_text()

    # Room again: the refused request, sent again under its key, is done at most once.
    service.filler().unlink()
    again = service.post(refused[0].replace("k-", "during "), key)
    assert again.status_code in (201, 409), again.text  # 409: its claim was kept, in flight
    assert service.titles().count(key.replace("k-", "during ")) <= 1
    assert service.post("after", "k-after").status_code == 201
    assert "after" in service.titles()
