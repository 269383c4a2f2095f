"""A fast stop (SIGQUIT, or SIGINT from a terminal's Ctrl-C) ends a threaded gunicorn worker at once, even
when the signal lands while the worker's main thread holds its thread pool's lock — as it does inside
``submit`` for every request, and inside a first quit handler when a second signal follows. gunicorn's own
handler waits for that lock there, for good (``adapters/worker_quit.py``).

Each case runs a real ``gthread`` worker object in a child process, so that a hang fails the test by its
time-out instead of hanging the suite."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from scripts.processes import ROOT

CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from gunicorn.config import Config
    from gunicorn.workers.gthread import ThreadWorker
    from adapters import worker_quit

    config = Config()
    config.set("threads", 2)
    worker = ThreadWorker(1, os.getppid(), [], None, 30, config, None)
    worker.tpool = worker.get_thread_pool()
    worker.PIPE = list(os.pipe())  # made by init_process, read by init_signals
    for end in worker.PIPE:
        os.set_blocking(end, False)
    worker.init_signals()  # gunicorn's own handlers, as in a worker
    if sys.argv[1] == "ours":
        worker_quit.install(worker)  # what post_worker_init does
    print("ready", flush=True)
    with worker.tpool._shutdown_lock:  # the main thread inside submit()
        signal.raise_signal(getattr(signal, sys.argv[2]))
        signal.raise_signal(signal.SIGQUIT)  # the master's SIGQUIT after a Ctrl-C
    print("the signals were not handled", flush=True)
    """
)


def run_worker(handler: str, signal_name: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CHILD, handler, signal_name], cwd=ROOT, capture_output=True, text=True, timeout=10
    )


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGQUIT"])
def test_a_fast_stop_ends_a_threaded_worker_holding_its_pool_lock(signal_name: str) -> None:
    ended = run_worker("ours", signal_name)
    assert ended.returncode == 0, ended.stderr
    assert ended.stdout == "ready\n"


def test_gunicorns_own_handler_hangs_there() -> None:
    """Why the handler is replaced: with gunicorn's, the same child starts, gets the signal and never ends."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, "gunicorn", "SIGQUIT"], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        with pytest.raises(subprocess.TimeoutExpired):
            child.wait(timeout=3)
    finally:
        child.kill()
        child.wait()
        child.stdout.close()  # type: ignore[union-attr]


LATE_QUIT = textwrap.dedent(
    """
    import os, signal, sys, time
    from types import SimpleNamespace
    from adapters import worker_quit

    class ClosedLate:
        # Like a browser driver's __del__ at the interpreter's end: it runs after Python has handed the
        # signals it handled back to the system, which is when the master's signal can land.
        def __init__(self, signum):
            self.signum, self.kill, self.sleep, self.pid = signum, os.kill, time.sleep, os.getpid()

        def __del__(self):
            self.kill(self.pid, self.signum)
            self.sleep(0.2)

    closed_late = ClosedLate(getattr(signal, sys.argv[2]))
    worker = SimpleNamespace(alive=True, cfg=SimpleNamespace(worker_int=lambda worker: None))
    signal.signal(signal.SIGTERM, lambda signum, frame: setattr(worker, "alive", False))  # gunicorn's, in short
    worker_quit.install(worker)
    first, second = getattr(signal, sys.argv[1]), getattr(signal, sys.argv[2])
    if sys.argv[3] == "together":  # both pending when Python runs its handlers: one after the other
        signal.pthread_sigmask(signal.SIG_BLOCK, {first, second})
        os.kill(os.getpid(), first)
        os.kill(os.getpid(), second)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {first, second})
    else:
        signal.raise_signal(first)
    """
)


@pytest.mark.parametrize("timing", ["together", "at the end"])
@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("SIGINT", "SIGQUIT"),  # a terminal's Ctrl-C to the group, then the master's fast stop
        ("SIGTERM", "SIGTERM"),  # a SIGTERM to the group, then the master's graceful stop
        ("SIGTERM", "SIGQUIT"),  # a graceful stop, then a Ctrl-C to the master: it turns fast
    ],
)
def test_the_masters_signal_does_not_kill_a_worker_that_is_ending(first: str, second: str, timing: str) -> None:
    """A stop sent to the process group reaches a worker twice: from the sender, then from the master. When
    the second lands while the interpreter is ending, after it gave the signals back to the system's
    default, it killed the worker, and the master logged "Worker (pid:…) was sent SIGQUIT!" (seen in CI).
    Arriving together, neither may leave a traceback ("Signal 3 ignored due to race condition")."""
    ended = subprocess.run(
        [sys.executable, "-c", LATE_QUIT, first, second, timing], cwd=ROOT, capture_output=True, text=True, timeout=10
    )
    assert (ended.returncode, ended.stderr) == (0, "")


def test_a_fast_stop_does_what_gunicorns_own_does_once() -> None:
    """What gunicorn's base worker does on a fast stop: the worker is no longer alive, the operator's
    ``worker_int`` hook runs (a gunicorn config may set one), the process exits; a second quit signal, while
    the first is ending the worker, does nothing more."""
    from types import SimpleNamespace

    from adapters.worker_quit import QuietEnd, QuitOnce

    hooked: list[object] = []
    worker = SimpleNamespace(alive=True, cfg=SimpleNamespace(worker_int=hooked.append))
    quiet_end = QuietEnd()
    quiet_end.armed = True  # as if armed already: this test process keeps its own signal handling at its exit
    handler = QuitOnce(worker, quiet_end)
    with pytest.raises(SystemExit) as ended:
        handler(3, None)
    assert ended.value.code == 0 and worker.alive is False and hooked == [worker]
    handler(3, None)  # the master's signal after a Ctrl-C: nothing more, no second exit
    assert hooked == [worker]
