"""A clean stop: SIGTERM to gunicorn ends every Chromium and chromedriver the service started, with no
warning on the way out — whether the signal goes to gunicorn's master alone (``kill PID``), or to its
whole process group at once (a terminal's Ctrl-C, ``systemctl stop``: the drivers then get it too) — and,
with the browsers on a Selenium Grid, no session is left on the node. A worker killed outright (SIGKILL,
as the OOM killer or gunicorn past a time-out do) cannot close its browsers: the master ends them."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from adapters.platform.procfs import descendants, process_table
from scripts.grid import running_grid
from scripts.processes import ROOT, alive, free_port, gunicorn_args, wait_for_http
from tests.sandbox_support import SandboxProcess
from tests.unit.test_metrics import samples_of

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SECRET = "shutdown-test-secret-" + "s" * 40
BROWSER_PROCESSES = ("chromedriver", "chromium", "chrome")


class Service:
    def __init__(self, folder: Path, sandbox: SandboxProcess, remote_url: str | None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = folder / "service.log"
        env = {
            **os.environ,
            "COMMUNITY_API_MODE": "test",
            "COMMUNITY_API_DB": str(folder / "service.sqlite3"),
            "COMMUNITY_API_SECRET": SECRET,
            "COMMUNITY_API_PLATFORM_URL": sandbox.url,
            "COMMUNITY_API_PLATFORM_API_URL": sandbox.api_url,
            "COMMUNITY_API_BROWSER_TRUSTED_SPKI": ",".join(sandbox.trusted_spki),
            "COMMUNITY_API_BROWSER_POOL_SIZE": "2",
            "COMMUNITY_API_PLATFORM_READS_PER_MINUTE": "20000",
            "COMMUNITY_API_PLATFORM_WRITES_PER_MINUTE": "20000",  # and the write pace
        }
        if remote_url:
            env["COMMUNITY_API_SELENIUM_REMOTE_URL"] = remote_url
        args = gunicorn_args("adapters.wiring:get_app()", self.port, workers=2, worker_class="gthread")
        with open(self.log, "wb") as out:
            # A session of its own, so that the test can signal gunicorn's whole process group.
            self.process = subprocess.Popen(
                [sys.executable, *args], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        wait_for_http(self.url + "/healthz", self.process)

    def use_browsers(self) -> None:
        """Link two connections and read through both from several threads, so that both workers start
        browsers."""
        web = requests.Session()
        web.post(self.url + "/v1/accounts", json={"email": "stop@example.com", "password": "stop test pass"})
        signed = web.post(self.url + "/v1/session", json={"email": "stop@example.com", "password": "stop test pass"})
        web.headers["X-CSRF-Token"] = signed.json()["csrfToken"]
        connections = []
        for handle in ("alice", "bob"):
            linked = web.post(
                self.url + "/v1/connections",
                json={"email": f"{handle}@sandbox.test", "password": "sandbox"},
                timeout=120,
            )
            assert linked.status_code == 201, linked.text
            connections.append(linked.json()["id"])
        key = web.post(self.url + "/v1/keys", json={}, timeout=10).json()["secret"]
        for _ in range(3):
            for connection in connections:
                answer = requests.get(
                    self.url + "/v1/whoami",
                    timeout=60,
                    headers={
                        "Authorization": f"Bearer {key}",
                        "X-Community-Connection": connection,
                        "Connection": "close",
                    },
                )
                assert answer.status_code == 200, answer.text

    def browsers_live(self) -> tuple[float, int]:
        """What ``/metrics`` says of the browsers running (summed over the workers' live values), and how
        many chromedrivers run under the service (one per browser)."""
        samples = samples_of(requests.get(self.url + "/metrics", timeout=10).text)
        said = sum(value for (name, _), value in samples.items() if name == "community_api_browsers_live")
        table = process_table()
        return said, sum(1 for pid in descendants(self.process.pid, table) if table[pid][1] == "chromedriver")

    def browser_pids(self) -> list[int]:
        table = process_table()
        return [pid for pid in descendants(self.process.pid, table) if table[pid][1] in BROWSER_PROCESSES]

    def stop(self, how: str) -> float:
        """Signal the service as ``how`` says; how many seconds it took to end."""
        started = time.monotonic()
        if how == "master":
            os.kill(self.process.pid, signal.SIGTERM)
        elif how == "Ctrl-C":
            os.killpg(self.process.pid, signal.SIGINT)  # what a terminal sends its foreground group
        else:
            os.killpg(self.process.pid, signal.SIGTERM)  # its PID is its group's: start_new_session
        self.process.wait(60)
        return time.monotonic() - started

    def lines_after_the_signal(self) -> list[str]:
        lines = self.log.read_text(errors="replace").splitlines()
        start = next(i for i, line in enumerate(lines) if re.search("Handling signal: (term|int)", line))
        return lines[start:]


@pytest.fixture
def service_folder(tmp_path: Path, sandbox: SandboxProcess) -> Iterator[Path]:
    sandbox.reset()
    yield tmp_path


def assert_quiet_exit(lines: list[str]) -> None:
    noisy = [
        line
        for line in lines
        if any(
            word in line
            for word in (
                "Traceback",
                "Retrying",
                '"level":"warning"',
                '"level":"error"',
                "[WARNING]",
                "[ERROR]",
                "Exception",
            )
        )
    ]
    assert noisy == [], "\n".join(noisy)


@pytest.mark.parametrize("how", ["master", "process group", "Ctrl-C"])
def test_a_stop_ends_every_local_browser_quietly(service_folder: Path, sandbox: SandboxProcess, how: str) -> None:
    """SIGTERM to the master or its group, and SIGINT to the group (a terminal's Ctrl-C, which gunicorn's
    master follows with SIGQUIT to each worker: adapters/worker_quit.py)."""
    service = Service(service_folder, sandbox, remote_url=None)
    took = None
    try:
        service.use_browsers()
        started = service.browser_pids()
        table = process_table()
        assert [pid for pid in started if table[pid][1] == "chromedriver"], "browsers should be running"
    finally:
        took = service.stop(how)
    assert took < 15, f"the stop took {took:.1f} s (gunicorn's graceful timeout is 30 s: a worker hung)"
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [pid for pid in started if alive(pid)] == []
    assert service.process.returncode == 0
    assert_quiet_exit(service.lines_after_the_signal())


def test_a_worker_killed_outright_leaves_no_browser_behind(service_folder: Path, sandbox: SandboxProcess) -> None:
    """Before, the dead worker's chromedriver and every Chromium process under it ran on after the worker,
    and after gunicorn itself had stopped (8 processes for one browser, logged in to the platform), and
    its temporary profiles stayed on disk."""
    service = Service(service_folder, sandbox, remote_url=None)
    try:
        service.use_browsers()
        table = process_table()
        workers = [
            pid
            for pid, (parent, name) in table.items()
            if parent == service.process.pid and name not in BROWSER_PROCESSES
        ]
        owned = {
            worker: [pid for pid in descendants(worker, table) if table[pid][1] in BROWSER_PROCESSES]
            for worker in workers
        }
        worker, left_behind = max(owned.items(), key=lambda item: len(item[1]))
        assert left_behind, "a worker should be running browsers"
        profiles = {
            argument.split("=", 1)[1]
            for pid in left_behind
            for argument in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
            if argument.startswith("--user-data-dir=")
        }
        assert profiles and all(Path(profile).is_dir() for profile in profiles)
        counted, running = service.browsers_live()
        assert counted == running > 0
        os.kill(worker, signal.SIGKILL)
        deadline = time.monotonic() + 15

        def left() -> tuple[list[int], list[str]]:
            return [pid for pid in left_behind if alive(pid)], [p for p in profiles if Path(p).exists()]

        while left() != ([], []) and time.monotonic() < deadline:
            time.sleep(0.1)
        # Its processes are ended, and its profiles (the platform's cookies) removed.
        assert left() == ([], [])
        assert requests.get(service.url + "/healthz", timeout=30).status_code == 200  # a new worker serves
        # The master says so once it has cleaned up, which is just after the last profile went: wait for it
        # (CI once read the log in between).
        said = f"worker {worker} ended without closing its browsers"
        while said not in service.log.read_text(errors="replace") and time.monotonic() < deadline + 5:
            time.sleep(0.1)
        assert said in service.log.read_text(errors="replace")
        # /metrics no longer counts the dead worker's browsers (its live values are dropped as it ends).
        live, running = service.browsers_live()
        assert live == running
    finally:
        service.stop("master")
    assert service.process.returncode == 0


@pytest.mark.grid
def test_sigterm_leaves_no_session_on_the_grid(service_folder: Path, sandbox: SandboxProcess) -> None:
    with running_grid("standalone", service_folder / "grid") as grid:
        service = Service(service_folder, sandbox, remote_url=grid.url)
        try:
            service.use_browsers()
            assert grid.session_ids(), "the browsers should be sessions on the Grid"
        finally:
            service.stop("master")
        deadline = time.monotonic() + 10
        while grid.session_ids() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert grid.session_ids() == []
        assert service.process.returncode == 0
        assert_quiet_exit(service.lines_after_the_signal())
