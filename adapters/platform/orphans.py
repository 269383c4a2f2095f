"""Browsers left behind by a worker that died without closing them.

A worker stopped by gunicorn (SIGTERM, its time-out's SIGABRT that it can handle) closes its browsers
(``browser.py``, ``tests/integration/test_shutdown.py``). A worker that is killed outright — SIGKILL when
it hangs past its time-out, the kernel's OOM killer — cannot: its chromedriver and every Chromium process
under it would run on, logged in to the platform, holding memory, until the machine restarts. On a small
box that serves for months, each such death would leak a browser.

So gunicorn's master declares itself a *child subreaper* (Linux ``prctl(PR_SET_CHILD_SUBREAPER)``): the
processes a dead worker leaves are then re-parented to the master instead of to PID 1, and when the master
learns that a worker ended (gunicorn's ``child_exit`` hook, ``adapters/gunicorn_conf.py``) it ends every
child of its own that is a browser, with everything under it. A live worker's browsers are that worker's
children, not the master's, so only orphans match; a Chromium whose chromedriver ended first (a Ctrl-C
reaches both) is adopted while its worker is still closing it, and is left to that worker. The master
reaps them as it reaps workers. The fresh profile each local browser has (``browser.py``: its cookies are
the platform session) is removed too, once its processes are gone: the dead worker could not remove it.

A worker can also die between ending its Chromium and removing the profile: gunicorn's time-out sends
SIGABRT, the worker starts closing its browsers, and a second later the master kills it outright. Its
Chromium is gone then, so nothing names the profile any more, and it stayed in the temporary folder for
good, the platform session in its cookies (seen: one such folder per run of
``tests/e2e/test_interrupted_send.py``). ``remove_abandoned_profiles`` finds such folders: each is named
after the worker that made it (``profile_prefix``), and is abandoned once that worker has ended and
Chromium's own lock in it (``SingletonLock``, a link to ``host-PID`` that a browser holds for its whole
life) names a process that is no longer a Chromium. A live worker's folders are never touched, even
while it is closing one. The master runs it when a worker ends and when it starts.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shutil
import signal
import socket
import tempfile
import time

import attrs

from adapters.platform import procfs

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
# Command names (``comm``) of what a local browser runs: chromedriver, then Chromium under it.
BROWSER_COMMANDS = frozenset({"chromedriver", "chromium", "chrome"})
PROFILE_PREFIX = "cda-chromium-"  # the temporary profile of each local browser (``browser.py``)
_WORKER = re.compile(r"w(\d+)-")  # after the prefix: the PID of the worker that made the folder
_PROFILE_FLAG = "--user-data-dir="
_GONE_SECONDS = 3.0  # how long to wait for ended processes before removing their profile
_LOCK = "SingletonLock"  # Chromium's lock in its profile: a link to "host-PID" while the browser lives
# A profile without a lock is a browser starting (or one that never started); only an old one is removed.
_UNLOCKED_ABANDONED_SECONDS = 3600.0


def become_subreaper() -> bool:
    """Adopt the orphans of this process's descendants (Linux); False where the kernel does not offer it."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


@attrs.frozen
class Ended:
    """What a sweep ended: the drivers it found orphaned (a worker died without closing its browsers),
    and every process it ended, theirs and any Chromium left without a driver."""

    drivers: int
    processes: int
    profiles: int


def end_orphaned_browsers(parent: int) -> Ended:
    """End every live browser process that is a child of ``parent`` (the master), with all that runs under
    it. Never raises: a process that ended meanwhile is simply gone.

    A worker that closes its browsers as it stops leaves nothing for this but Chromium's helper processes
    on their way out (they outlive the browser's main process by a moment, and are adopted by the master
    meanwhile): ending them changes nothing, and no driver is counted. A chromedriver among the master's
    children means a worker that could not close its browser.

    A Chromium whose profile was made by a worker that still runs is that worker's to close, and is left
    alone: a stop sent to the whole process group (a terminal's Ctrl-C) ends the chromedrivers at once, so
    every worker's Chromium is adopted by the master while its worker is still closing it. Ended here when
    another worker ended first, it was reported as that worker's leftover (a warning on a clean stop) and
    its profile removed under the worker closing it. Profiles are counted only when this removed them."""
    table = procfs.process_table()
    named = {pid: name for pid, (up, name) in table.items() if up == parent}
    roots = [
        pid
        for pid, name in named.items()
        if name in BROWSER_COMMANDS and procfs.running(pid) and not _closed_by_a_live_worker(pid, parent, table)
    ]
    drivers = sum(1 for pid in roots if named[pid] == "chromedriver")
    ended: list[int] = []
    profiles: set[str] = set()
    for root in roots:
        for pid in [root, *procfs.descendants(root, table)]:
            profiles |= _own_profiles(procfs.arguments(pid))
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                ended.append(pid)
    deadline = time.monotonic() + _GONE_SECONDS
    while any(procfs.running(pid) for pid in ended) and time.monotonic() < deadline:
        time.sleep(0.02)
    removed = 0
    for profile in profiles:
        if os.path.exists(profile):  # not already removed by the worker that made it
            shutil.rmtree(profile, ignore_errors=True)
            removed += not os.path.exists(profile)
    return Ended(drivers, len(ended), removed)


def _closed_by_a_live_worker(pid: int, master: int, table: dict[int, tuple[int, str]]) -> bool:
    """Whether ``pid``'s command line names a profile made by a worker of ``master`` that still runs."""
    for profile in _own_profiles(procfs.arguments(pid)):
        worker = _WORKER.match(os.path.basename(profile)[len(PROFILE_PREFIX) :])
        if worker is not None and table.get(int(worker.group(1)), (None, ""))[0] == master:
            return True
    return False


def _own_profiles(arguments: list[str]) -> set[str]:
    """The profile folder a Chromium command line names, if it is one this service made (in the temporary
    folder, with its prefix): nothing else is ever removed."""
    found = set()
    for argument in arguments:
        if argument.startswith(_PROFILE_FLAG):
            path = os.path.realpath(argument[len(_PROFILE_FLAG) :])
            if os.path.basename(path).startswith(PROFILE_PREFIX) and os.path.dirname(path) == os.path.realpath(
                tempfile.gettempdir()
            ):
                found.add(path)
    return found


def profile_prefix() -> str:
    """The name a new profile folder starts with: ``PROFILE_PREFIX`` and this process's PID (the worker)."""
    return f"{PROFILE_PREFIX}w{os.getpid()}-"


def remove_abandoned_profiles(now: float | None = None) -> int:
    """Remove this service's profile folders (the temporary folder, ``PROFILE_PREFIX``) whose browser is
    gone: the worker that made the folder has ended, and the Chromium the folder's lock names no longer
    runs (its PID ended, or now belongs to another program) or, without a lock, the folder is untouched
    for an hour. A folder of a live worker, one whose lock names another host or a live Chromium, and
    anything that is not a folder of ours are left alone. Never raises; how many were removed."""
    now = time.time() if now is None else now
    folder = os.path.realpath(tempfile.gettempdir())
    removed = 0
    try:
        entries = [e for e in os.scandir(folder) if e.name.startswith(PROFILE_PREFIX)]
    except OSError:
        return 0
    for entry in entries:
        try:
            if not entry.is_dir(follow_symlinks=False) or not _abandoned(entry.path, now):
                continue
        except OSError:
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed += not os.path.exists(entry.path)
    return removed


def _abandoned(profile: str, now: float) -> bool:
    worker = _WORKER.match(os.path.basename(profile)[len(PROFILE_PREFIX) :])
    if worker is not None and procfs.running(int(worker.group(1))):
        return False  # its worker lives: it closes its own browsers (and may be doing so right now)
    try:
        owner = os.readlink(os.path.join(profile, _LOCK))
    except FileNotFoundError:
        return now - os.stat(profile).st_mtime > _UNLOCKED_ABANDONED_SECONDS
    except OSError:
        return False  # a lock that is not a link: not Chromium's, leave it
    host, _, pid = owner.rpartition("-")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    return not (procfs.running(int(pid)) and procfs.command_name(int(pid)) in BROWSER_COMMANDS)
