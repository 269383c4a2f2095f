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

from adapters.platform import orphans
from adapters.platform.orphans import PROFILE_PREFIX, profile_prefix, remove_abandoned_profiles
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


def test_locks_that_are_not_chromiums_are_left_alone(temp: Path) -> None:
    """Chromium's lock is a link to ``host-PID``: anything else in its place is not a browser's, and asking it
    never raises."""
    odd = temp / (PROFILE_PREFIX + "file-lock")
    (odd / "Default").mkdir(parents=True)
    (odd / "SingletonLock").write_text(f"{HOST}-{ended_pid()}")  # a file, not a link
    kept = [
        odd,
        profile(temp, PROFILE_PREFIX + "no-pid", f"{HOST}-abc"),
    ]
    for folder in kept:
        then = time.time() - 2 * 3600
        os.utime(folder, (then, then))
    assert remove_abandoned_profiles() == 0
    assert all(p.is_dir() for p in kept)


def test_a_lock_is_read_whatever_dashes_the_host_name_holds(temp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(orphans.socket, "gethostname", lambda: "box-with-dashes")
    gone = profile(temp, PROFILE_PREFIX + "gone", f"box-with-dashes-{ended_pid()}")
    other = profile(temp, PROFILE_PREFIX + "other", f"box-with-{ended_pid()}")  # another machine's
    assert remove_abandoned_profiles() == 1
    assert not gone.exists() and other.is_dir()


def test_a_folder_this_worker_made_is_left_to_it(temp: Path) -> None:
    """Named with ``profile_prefix`` (the worker's PID, ended by a dash) while the worker runs: it closes its own
    browsers, even when their Chromium has just ended."""
    mine = profile(temp, profile_prefix() + "abc", f"{HOST}-{ended_pid()}")
    assert remove_abandoned_profiles() == 0 and mine.is_dir()


_SWEEPS = """
import json, os, subprocess, sys, tempfile, time
import attrs
from adapters.platform import procfs
from adapters.platform.orphans import PROFILE_PREFIX, become_subreaper, end_orphaned_browsers
bindir, outside, ended_driver = sys.argv[1], sys.argv[2], sys.argv[3]
chromium, driver = os.path.join(bindir, "chromium"), os.path.join(bindir, "chromedriver")
me = os.getpid()
seen = {}

def folder(name, where=None):
    path = os.path.join(where or tempfile.gettempdir(), PROFILE_PREFIX + name)
    os.makedirs(os.path.join(path, "Default"))
    return path

def wait_for(check):
    deadline = time.monotonic() + 10
    while not check() and time.monotonic() < deadline:
        time.sleep(0.01)
    return check()

# A subreaper adopts a Chromium whose parent ended, and the sweep ends it and removes its profile.
seen["subreaper"] = become_subreaper()
adopted = folder("adopted")
subprocess.run(["sh", "-c", f'"{chromium}" --user-data-dir="{adopted}" &'])
wait_for(lambda: any(name == "chromium" for pid, (up, name) in procfs.process_table().items() if up == me))
seen["adopted"] = [attrs.astuple(end_orphaned_browsers(me)), os.path.isdir(adopted)]

# A driver with its Chromium under it: both ended, one driver counted. The profile is named through a dot
# segment; one outside the temporary folder is never removed; one already gone is not counted.
elsewhere = folder("elsewhere", outside)
through_dots = os.path.join(tempfile.gettempdir(), "sub", "..", PROFILE_PREFIX + "dotted")
os.makedirs(os.path.join(through_dots, "Default"))
missing = os.path.join(tempfile.gettempdir(), PROFILE_PREFIX + "missing")
launched = subprocess.Popen(
    [driver, f"--user-data-dir={through_dots}", f"--user-data-dir={elsewhere}", f"--user-data-dir={missing}"],
)
wait_for(lambda: [procfs.command_name(p) for p in procfs.descendants(launched.pid)] == ["chromium"])
under = procfs.descendants(launched.pid)
seen["driver"] = [
    attrs.astuple(end_orphaned_browsers(me)),
    procfs.running(launched.pid) or any(procfs.running(pid) for pid in under),
    os.path.isdir(through_dots),
    os.path.isdir(elsewhere),
]
launched.wait()

# A Chromium below a live process of the master's that is no browser is that process's, not an orphan.
shell = subprocess.Popen(["sh", "-c", f'"{chromium}" & wait'])
wait_for(lambda: [procfs.command_name(p) for p in procfs.descendants(shell.pid)] == ["chromium"])
seen["not_an_orphan"] = [attrs.astuple(end_orphaned_browsers(me)), procfs.running(procfs.descendants(shell.pid)[0])]
for pid in procfs.descendants(shell.pid):
    os.kill(pid, 9)
shell.wait()

# A driver that has ended and waits to be reaped is no orphan to count.
dead = subprocess.Popen([ended_driver])
wait_for(lambda: (procfs.stat(dead.pid) or ["?"])[0] == "Z")
seen["zombie"] = attrs.astuple(end_orphaned_browsers(me))
dead.wait()
print(json.dumps(seen))
"""


def test_the_masters_sweep_ends_what_is_its_own_and_only_that(temp: Path, tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    chromium = bindir / "chromium"  # its command name is the script's: a process that waits, with no child
    chromium.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(60)\n")
    driver = bindir / "chromedriver"  # starts its Chromium, as chromedriver does, and waits
    driver.write_text(f'#!/bin/sh\n"{chromium}" "$@" &\nwait\n')
    ended = tmp_path / "ended" / "chromedriver"  # a driver that ends at once
    ended.parent.mkdir()
    ended.write_text("#!/bin/sh\nexit 0\n")
    for program in (chromium, driver, ended):
        program.chmod(0o755)
    outside = tmp_path / "outside"
    outside.mkdir()
    run = subprocess.run(
        [sys.executable, "-c", _SWEEPS, str(bindir), str(outside), str(ended)],
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(temp)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout)
    assert seen["subreaper"] is True
    assert seen["adopted"] == [[0, 1, 1], False]  # ended and its profile removed
    # drivers, processes, profiles; nothing left running; the dotted profile removed, the outside one kept
    assert seen["driver"] == [[1, 2, 1], False, False, True]
    assert seen["not_an_orphan"] == [[0, 0, 0], True]
    assert seen["zombie"] == [0, 0, 0]
