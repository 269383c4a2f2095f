"""A gunicorn worker's fast stop (SIGQUIT, and SIGINT: a terminal's Ctrl-C) that cannot hang the worker.

gunicorn's threaded worker (``gthread``, what ``community-api serve`` runs) answers SIGQUIT and SIGINT with
``ThreadWorker.handle_quit``, which calls its thread pool's ``shutdown``. That takes the pool's lock, a
plain ``threading.Lock``; and a signal handler runs in the main thread, between two of its bytecodes. So
when the signal lands while the main thread already holds that lock (inside ``submit``, which it calls for
every request it hands to a thread; or inside a first ``handle_quit`` when a second signal follows), the
handler waits for a lock its own thread holds: the worker hangs for good. A Ctrl-C does exactly that: the
terminal sends SIGINT to every process of the group, the workers included, and gunicorn's master sends them
SIGQUIT a moment later. Measured with two workers and a Ctrl-C to the group: 1 stop in 20 hung when idle,
2 in 20 under load. The master then kills the worker after its graceful timeout (30 s for a Ctrl-C that
should take one); under ``community-api demo``, which ends the master sooner, the hung worker lived on,
still holding the port.

The handler installed here does what gunicorn's base worker does on a fast stop (``alive`` off, the
``worker_int`` hook, ``sys.exit(0)``), without touching the pool: at the interpreter's exit the pool's own
hook lets each thread finish the request it is answering, as the pool's ``shutdown`` would have. Once a
first quit signal is ending the worker, further ones do nothing, and every stop signal is ignored at the
interpreter's very end (``QuietEnd``). SIGTERM (a graceful stop) is gunicorn's, unchanged but for that
quiet end.
"""

from __future__ import annotations

import atexit
import signal
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

QUIT_SIGNALS = (signal.SIGQUIT, signal.SIGINT)
STOP_SIGNALS = (signal.SIGTERM, *QUIT_SIGNALS)


def ignore_stop_signals() -> None:
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


class QuietEnd:
    """Once a worker is stopping, its stop signals are ignored from the interpreter's exit on.

    A stop sent to the process group reaches a worker twice: from the sender, then from the master. At its
    very end the interpreter gives every signal it handles back to the system's default, which is to die;
    a second signal landing then (while a browser driver is being collected, say) killed the worker, and the
    master logged "Worker (pid:…) was sent SIGQUIT!". An ignored signal stays ignored to the end.

    Not ignored at once, inside the handler: the two signals often arrive together, and Python runs the
    handlers of pending signals one after the other; one whose handler has just become "ignore" is reported
    as "Signal 3 ignored due to race condition", with a traceback in the log. ``atexit`` runs after every
    thread has finished and before the interpreter lets go of its handlers.
    """

    def __init__(self) -> None:
        self.armed = False

    def arm(self) -> None:
        if not self.armed:
            self.armed = True
            atexit.register(ignore_stop_signals)


class QuitOnce:
    """The fast-stop handler of one worker."""

    def __init__(self, worker: Any, quiet_end: QuietEnd) -> None:
        self.worker = worker
        self.quiet_end = quiet_end
        self.quitting = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.quitting:
            return  # the first quit signal is already ending the worker
        self.quitting = True
        self.quiet_end.arm()
        self.worker.alive = False
        self.worker.cfg.worker_int(self.worker)
        sys.exit(0)


class StopOnce:
    """gunicorn's graceful-stop handler, which lets the worker finish its requests (a second SIGTERM does
    nothing more in it)."""

    def __init__(self, graceful: Callable[[int, FrameType | None], Any], quiet_end: QuietEnd) -> None:
        self.graceful = graceful
        self.quiet_end = quiet_end

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.quiet_end.arm()
        self.graceful(signum, frame)


def install(worker: Any) -> QuitOnce:
    """Answer SIGQUIT and SIGINT in ``worker``'s process with ``QuitOnce``, and SIGTERM with gunicorn's
    handler, each making the worker's end quiet (from ``post_worker_init``, which gunicorn calls after the
    worker set its own handlers)."""
    quiet_end = QuietEnd()
    handler = QuitOnce(worker, quiet_end)
    for signum in QUIT_SIGNALS:
        signal.signal(signum, handler)
    graceful = signal.getsignal(signal.SIGTERM)
    if callable(graceful):
        signal.signal(signal.SIGTERM, StopOnce(graceful, quiet_end))
    return handler
