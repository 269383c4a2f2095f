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
hook lets each thread finish the request it is answering, as the pool's ``shutdown`` would have. A second
quit signal while the first is ending the worker does nothing. SIGTERM (a graceful stop) is gunicorn's,
unchanged.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType
from typing import Any

QUIT_SIGNALS = (signal.SIGQUIT, signal.SIGINT)


class QuitOnce:
    """The fast-stop handler of one worker."""

    def __init__(self, worker: Any) -> None:
        self.worker = worker
        self.quitting = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.quitting:
            return  # the first quit signal is already ending the worker
        self.quitting = True
        self.worker.alive = False
        self.worker.cfg.worker_int(self.worker)
        sys.exit(0)


def install(worker: Any) -> QuitOnce:
    """Answer SIGQUIT and SIGINT in ``worker``'s process with ``QuitOnce`` (from ``post_worker_init``, which
    gunicorn calls after the worker set its own handlers)."""
    handler = QuitOnce(worker)
    for signum in QUIT_SIGNALS:
        signal.signal(signum, handler)
    return handler
