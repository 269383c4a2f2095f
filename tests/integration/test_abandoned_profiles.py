"""Browser profiles whose Chromium has ended are removed by the master's sweep
(``orphans.remove_abandoned_profiles``); every other folder is left alone. Real processes stand for the
browsers: a program started under the name ``chromium`` (its command name is what the sweep reads), and
PIDs that have ended. The whole path, a worker killed while closing its browser:
``tests/e2e/test_interrupted_send.py``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.platform.orphans import PROFILE_PREFIX, remove_abandoned_profiles
from scripts.processes import ROOT

HOST = socket.gethostname()


@pytest.fixture
def temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temporary folder the service's profiles are made in, for this test alone."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.fixture
def live_chromium(tmp_path: Path) -> Iterator[int]:
    """A running process whose command name is ``chromium`` (``sleep`` under that name)."""
    named = tmp_path / "bin" / "chromium"
    named.parent.mkdir()
    named.symlink_to("/bin/sleep")
    process = subprocess.Popen([str(named), "60"])
    try:
        yield process.pid
    finally:
        process.kill()
        process.wait()


def ended_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def profile(temp: Path, name: str, owner: str | None, age_seconds: float = 0.0) -> Path:
    folder = temp / name
    (folder / "Default").mkdir(parents=True)
    (folder / "Default" / "Cookies").write_bytes(b"the platform session")
    if owner is not None:
        (folder / "SingletonLock").symlink_to(owner)
    if age_seconds:
        then = time.time() - age_seconds
        os.utime(folder, (then, then))
    return folder


def test_only_profiles_whose_browser_is_gone_are_removed(temp: Path, live_chromium: int) -> None:
    gone = ended_pid()
    abandoned = [
        profile(temp, PROFILE_PREFIX + "dead", f"{HOST}-{gone}"),  # its Chromium ended
        profile(temp, PROFILE_PREFIX + "reused", f"{HOST}-{os.getpid()}"),  # the PID now runs something else
        profile(temp, PROFILE_PREFIX + "unlocked-old", None, age_seconds=2 * 3600),  # never started
        profile(temp, f"{PROFILE_PREFIX}w{gone}-abc", f"{HOST}-{gone}"),  # its worker ended, and its Chromium
    ]
    kept = [
        profile(temp, PROFILE_PREFIX + "live", f"{HOST}-{live_chromium}"),  # a browser in use
        profile(temp, PROFILE_PREFIX + "starting", None),  # made a moment ago: its browser is starting
        # Its worker lives and is closing it (Chromium just ended): the worker removes it itself.
        profile(temp, f"{PROFILE_PREFIX}w{os.getpid()}-def", f"{HOST}-{gone}"),
        profile(temp, PROFILE_PREFIX + "elsewhere", f"another-host-{gone}"),  # not this machine's
        profile(temp, "someone-else", f"{HOST}-{gone}"),  # not ours
    ]
    elsewhere = temp / "elsewhere"
    elsewhere.mkdir()
    (temp / (PROFILE_PREFIX + "link")).symlink_to(elsewhere)  # a link named like ours: never followed
    assert remove_abandoned_profiles() == 4
    assert [p for p in abandoned if p.exists()] == []
    assert all(p.is_dir() for p in kept) and elsewhere.is_dir() and (temp / (PROFILE_PREFIX + "link")).is_symlink()
    assert remove_abandoned_profiles() == 0


_MASTER = """
import json, os, subprocess, sys, tempfile
import attrs
from adapters.platform.orphans import PROFILE_PREFIX, end_orphaned_browsers
chromium = sys.argv[1]
worker = subprocess.Popen(["sleep", "60"])  # a live worker of this master
gone = subprocess.Popen(["true"]); gone.wait()  # a worker that has ended
profiles = {}
for name, owner in (("closing", worker.pid), ("orphaned", gone.pid)):
    profiles[name] = os.path.join(tempfile.gettempdir(), f"{PROFILE_PREFIX}w{owner}-{name}")
    os.makedirs(os.path.join(profiles[name], "Default"))
# Chromium whose driver has ended, adopted by this master: one its worker is closing, one nobody will.
browsers = {
    name: subprocess.Popen([chromium, f"--user-data-dir={path}"], stdin=subprocess.PIPE)
    for name, path in profiles.items()
}
def state():
    return {
        name: {"running": browsers[name].poll() is None, "profile": os.path.isdir(path)}
        for name, path in profiles.items()
    }
first = end_orphaned_browsers(os.getpid())
after_first = state()
worker.kill(); worker.wait()  # now its worker ends without having closed it
second = end_orphaned_browsers(os.getpid())
seen = {"first": attrs.astuple(first), "after_first": after_first, "second": attrs.astuple(second)}
print(json.dumps({**seen, "after_second": state()}))
for browser in browsers.values():
    browser.kill(); browser.wait()
"""


def test_the_master_leaves_a_browser_its_live_worker_is_closing(temp: Path, tmp_path: Path) -> None:
    """A Ctrl-C reaches every process of the group: the chromedrivers end at once, and each worker's
    Chromium is adopted by the master while the worker is still closing it. When one worker ended first, the
    master's sweep ended the other's Chromium too and warned "worker N ended without closing its browsers"
    on a clean stop (seen in CI). It now leaves a browser whose profile a live worker of its own made; once
    that worker has ended, the next sweep ends it and removes its profile."""
    chromium = tmp_path / "bin" / "chromium"  # a program whose command name is ``chromium``
    chromium.parent.mkdir()
    chromium.write_text("#!/bin/sh\nread line\n")
    chromium.chmod(0o755)
    run = subprocess.run(
        [sys.executable, "-c", _MASTER, str(chromium)],
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(temp)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout)
    assert seen["first"] == [0, 1, 1]  # no driver; the orphaned Chromium ended, its profile removed
    assert seen["after_first"] == {
        "closing": {"running": True, "profile": True},
        "orphaned": {"running": False, "profile": False},
    }
    assert seen["second"] == [0, 1, 1]
    assert seen["after_second"] == {
        "closing": {"running": False, "profile": False},
        "orphaned": {"running": False, "profile": False},
    }
