"""A Selenium Grid for the ``grid`` tests, on 127.0.0.1 and ended by PID: standalone (one process), or a
hub and a node (two processes, as on several machines). The server jar is the one `make` fetched from
the npm registry into ``build/grid/``; the node runs Debian's Chromium and chromedriver, never downloaded
drivers (``detect-drivers = false``, ``selenium-manager = false``)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import requests

from adapters.platform.procfs import descendants, start_time
from scripts.processes import ROOT, free_port, stop

GRID_VERSION = "4.48.0"
GRID_JAR = ROOT / "build" / "grid" / f"selenium-server-{GRID_VERSION}.jar"
JAVA = "/usr/bin/java"
LAYOUTS = ("standalone", "hub-and-node")
START_SECONDS = 90.0


def node_config(max_sessions: int = 4, session_timeout: int = 300) -> str:
    """The node's TOML: Debian's browser and driver; ``session_timeout`` seconds idle before the Grid ends
    a session itself."""
    return f"""[node]
detect-drivers = false
selenium-manager = false
max-sessions = {max_sessions}
override-max-sessions = true
session-timeout = {session_timeout}

[[node.driver-configuration]]
display-name = "Debian Chromium"
webdriver-executable = "/usr/bin/chromedriver"
max-sessions = {max_sessions}
stereotype = '{{"browserName": "chrome", "goog:chromeOptions": {{"binary": "/usr/bin/chromium"}}}}'
"""


class Grid:
    """A Grid on 127.0.0.1: ``start`` it, ``stop`` it (every process by PID), start it again on the same
    port; its URL, and what it says about its sessions."""

    def __init__(self, layout: str, folder: Path, session_timeout: int = 300, max_sessions: int = 4) -> None:
        if layout not in LAYOUTS:
            raise ValueError(f"no Grid layout {layout!r}")
        if not GRID_JAR.exists():
            raise RuntimeError(f"{GRID_JAR} is missing: `make test-deps` fetches it")
        self.layout = layout
        self.folder = folder
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.processes: list[subprocess.Popen[bytes]] = []
        folder.mkdir(parents=True, exist_ok=True)
        self.config = folder / "node.toml"
        self.config.write_text(node_config(max_sessions, session_timeout))
        self.http = requests.Session()
        self.http.trust_env = False
        # The temporary folder of the Grid and of the browsers it starts: a browser ended by signal leaves
        # folders there (as ``adapters/platform/browser.py`` says), removed with this one by ``close``.
        # Short, beside /tmp's own: Chromium's single-instance socket is made in it.
        self.temp = Path(tempfile.mkdtemp(prefix="cda-grid-"))

    def start(self) -> None:
        secret = os.urandom(16).hex()  # the hub accepts only nodes that know it
        if self.layout == "standalone":
            self._java("standalone", ["--host", "127.0.0.1", "--port", str(self.port), "--config", str(self.config)])
        else:
            publish, subscribe = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
            bus = ["--publish-events", publish, "--subscribe-events", subscribe, "--registration-secret", secret]
            self._java("hub", ["--host", "127.0.0.1", "--port", str(self.port), *bus])
            self._java("node", ["--host", "127.0.0.1", "--port", str(free_port()), *bus, "--config", str(self.config)])
        self._wait_ready()

    def stop(self) -> None:
        # The node's browsers, known before it ends: a node that ends with a session still open can leave
        # its chromedriver and Chromium running, orphaned (seen once after a CI run); they are ended by PID
        # after it, those that are still the processes seen now.
        browsers = [(pid, start_time(pid)) for pid in self.browser_pids()]
        for process in reversed(self.processes):  # the node before its hub
            stop(process, timeout=20.0)  # Java takes its time to end
        self.processes = []
        for pid, started in browsers:
            if started is not None and start_time(pid) == started:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    def close(self) -> None:
        """Stop it for good: its temporary folder goes too."""
        self.stop()
        shutil.rmtree(self.temp, ignore_errors=True)

    def pids(self) -> list[int]:
        return [process.pid for process in self.processes]

    def status(self) -> dict[str, Any]:
        answer: dict[str, Any] = self.http.get(self.url + "/status", timeout=10).json()["value"]
        return answer

    def session_ids(self) -> list[str]:
        """The sessions running on the Grid's nodes."""
        return [
            slot["session"]["sessionId"]
            for node in self.status().get("nodes", [])
            for slot in node.get("slots", [])
            if slot.get("session")
        ]

    def browser_pids(self) -> list[int]:
        """The browsers' processes on the node (chromedriver and Chromium), found under its PID."""
        return descendants(self.processes[-1].pid) if self.processes else []

    def _java(self, role: str, args: list[str]) -> None:
        with open(self.folder / f"{role}.log", "ab") as out:
            # A small heap: the Grid routes sessions, the browsers run outside the JVM.
            self.processes.append(
                subprocess.Popen(
                    [JAVA, "-Xmx256m", f"-Djava.io.tmpdir={self.temp}", "-jar", str(GRID_JAR), role, *args],
                    cwd=self.folder,
                    env={**os.environ, "TMPDIR": str(self.temp)},
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            )

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            for process in self.processes:
                if process.poll() is not None:
                    logs = "".join(log.read_text()[-2000:] for log in self.folder.glob("*.log"))
                    raise RuntimeError(f"a Grid process exited with {process.returncode}:\n{logs}")
            try:
                if self.status().get("ready") is True:
                    return
            except (requests.RequestException, ValueError, KeyError):
                pass
            time.sleep(0.2)
        raise RuntimeError(f"the Grid at {self.url} was not ready within {START_SECONDS} s")


@contextmanager
def running_grid(layout: str, folder: Path, session_timeout: int = 300, max_sessions: int = 4) -> Iterator[Grid]:
    """A started Grid, stopped when the block ends."""
    grid = Grid(layout, folder, session_timeout, max_sessions)
    try:
        grid.start()
        yield grid
    finally:
        grid.close()
