"""Browsers left behind by a worker that died without closing them.

A worker stopped by gunicorn (SIGTERM, its time-out's SIGABRT that it can handle) closes its browsers
(``browser.py``, ``tests/integration/test_shutdown.py``). A worker that is killed outright — SIGKILL when
it hangs past its time-out, the kernel's OOM killer — cannot: its chromedriver and every Chromium process
under it would run on, logged in to the platform, holding memory, until the machine restarts. On a small
box that serves for months, each such death would leak a browser.

So gunicorn's master declares itself a *child subreaper* (Linux ``prctl(PR_SET_CHILD_SUBREAPER)``): the
processes a dead worker leaves are then re-parented to the master instead of to PID 1, and when the master
learns that a worker ended (gunicorn's ``child_exit`` hook, ``adapters/gunicorn_conf.py``) it ends every
child of its own that is a browser — a live worker's browsers are that worker's children, never the
master's, so only orphans match — with everything under it. The master reaps them as it reaps workers.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal

import attrs

from adapters.platform import procfs

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
# Command names (``comm``) of what a local browser runs: chromedriver, then Chromium under it.
BROWSER_COMMANDS = frozenset({"chromedriver", "chromium", "chrome"})


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


def end_orphaned_browsers(parent: int) -> Ended:
    """End every live browser process that is a child of ``parent`` (the master), with all that runs under
    it. Never raises: a process that ended meanwhile is simply gone.

    A worker that closes its browsers as it stops leaves nothing for this but Chromium's helper processes
    on their way out (they outlive the browser's main process by a moment, and are adopted by the master
    meanwhile): ending them changes nothing, and no driver is counted. A chromedriver among the master's
    children means a worker that could not close its browser."""
    roots = [
        pid for pid in procfs.children(parent) if procfs.command_name(pid) in BROWSER_COMMANDS and procfs.running(pid)
    ]
    drivers = sum(1 for pid in roots if procfs.command_name(pid) == "chromedriver")
    ended = 0
    for root in roots:
        for pid in [root, *procfs.descendants(root)]:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                ended += 1
    return Ended(drivers, ended)
