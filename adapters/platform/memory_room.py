"""Has the machine memory for one more local browser? The browser pool asks before it starts one beyond its
first (``browser_pool.py``), in every worker of the service.

The machine's figure alone (the kernel's MemAvailable, and the room left under this process's cgroup
limit) was not enough: a browser takes its 225-340 MiB over the few seconds it starts and loads its first
page, and until then the figure does not show it. Two starts asked at once, by two threads of a worker or
by two workers, both saw the same room and both went ahead, though there was room for one. So a start
the answer lets through leaves a *reservation* until its call ends: a file in a folder every process of
this user on the machine shares, and the next question counts ``STARTING_MIB`` for each live one on top
of ``MIN_FREE_MIB``. Asking and reserving happen under one ``flock``, so of two questions at once the
second sees the first's reservation (a lock held past ``LOCK_WAIT_SECONDS`` is not waited for: the figures
decide alone then). A reservation is released when its call ends; one whose process died,
or older than ``RESERVATION_SECONDS`` (a call that overran its deadline), no longer counts and is removed.

The folder is made private to this user (mode 0700); one that is not a plain folder of this user's with
that mode (another user made it first in a shared ``/tmp``) is not trusted: the figures are then read
alone, as before, with a warning.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import secrets
import stat
import tempfile
import time
from collections.abc import Callable, Iterator

from adapters.platform import procfs

log = logging.getLogger(__name__)

# A local browser is started only while the machine has at least this much memory available, besides what
# the browsers starting now will take: a browser's own share is 225-550 MiB, 225-340 when fresh.
MIN_FREE_MIB = 600
STARTING_MIB = 300
# Longer than any call that starts a browser (20 s, linking an account 40 s, plus a driver's grace).
RESERVATION_SECONDS = 60.0
# The lock is held for a directory listing; a holder that long is stopped or stuck (the figures then decide).
LOCK_WAIT_SECONDS = 1.0


def _lock_within(descriptor: int, seconds: float) -> bool:
    """Take the exclusive lock, waiting at most ``seconds``: the pool asks with its own lock held, and a
    process stopped while holding this one must not stall every platform call of this worker."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        except OSError:  # no locks on that file system (ENOLCK): as if held
            return False


def machine_figures() -> list[int | None]:
    """MiB available to a new process: on the machine, and under this process's cgroup (None: unknown)."""
    return [procfs.memory_available_mib(), procfs.cgroup_headroom_mib()]


def default_folder() -> str:
    return os.path.join(tempfile.gettempdir(), f"community-api-browser-starts-{os.getuid()}")


class Reservation:
    """The memory a browser that is starting will take, counted by other starts until ``release``."""

    def __init__(self, path: str | None) -> None:
        self._path = path  # None: nowhere to write one (an untrusted folder); nothing to release

    def release(self) -> None:
        """Never raises: it runs as a platform call ends, whose answer it must not replace. A file that
        cannot be removed stops counting when its time is up."""
        if self._path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._path)
            self._path = None


class MemoryRoom:
    """Calling it answers a ``Reservation`` when there is memory for one more browser (unknown counts as
    yes), else None. The caller releases the reservation once its browser has started and done its first
    call."""

    def __init__(
        self,
        folder: str | None = None,
        figures: Callable[[], list[int | None]] = machine_figures,
        clock: Callable[[], float] = time.time,  # wall clock: reservations are read by other processes
    ) -> None:
        self._folder = folder or default_folder()
        self._figures = figures
        self._clock = clock
        self._warned = False

    def __call__(self, *, first: bool = False) -> Reservation | None:
        """``first``: a pool's first browser, which starts whatever the memory says (a pool that can start
        none serves nothing); it is reserved all the same, so that the other starts count it."""
        with self._locked() as trusted:
            if not first:
                pending = self._pending() if trusted else 0
                needed = MIN_FREE_MIB + STARTING_MIB * pending
                if not all(figure is None or figure >= needed for figure in self._figures()):
                    return None
            return Reservation(self._reserve() if trusted else None)

    def pending(self) -> int:
        """How many reservations count now (for tests and the curious)."""
        with self._locked() as trusted:
            return self._pending() if trusted else 0

    @contextlib.contextmanager
    def _locked(self) -> Iterator[bool]:
        """Hold the folder's lock; yields False (and holds nothing) when the folder cannot be trusted."""
        descriptor = self._open_lock()
        if descriptor is None:
            yield False
            return
        try:
            if not _lock_within(descriptor, LOCK_WAIT_SECONDS):
                log.warning("browser starts in flight not counted: their lock was held over %.1f s", LOCK_WAIT_SECONDS)
                yield False
                return
            yield True
        finally:
            os.close(descriptor)  # releases the lock

    def _open_lock(self) -> int | None:
        try:
            os.makedirs(self._folder, mode=0o700, exist_ok=True)
            found = os.lstat(self._folder)
            if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid() or found.st_mode & 0o077:
                raise PermissionError(errno.EPERM, "not a private folder of this user", self._folder)
            return os.open(os.path.join(self._folder, "lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as error:
            if not self._warned:
                self._warned = True
                log.warning(
                    "browser starts are not counted across workers (%s: %s); memory is judged by the "
                    "machine's figure alone",
                    self._folder,
                    error.strerror or type(error).__name__,
                )
            return None

    def _pending(self) -> int:
        """(Lock held.) The live reservations; removes the dead and the overdue. Never raises: the pool asks
        on its way to start a browser, which a folder gone wrong must not turn into an error."""
        now = self._clock()
        count = 0
        try:
            with os.scandir(self._folder) as entries:
                for entry in entries:
                    if entry.name == "lock":
                        continue
                    if self._live(entry.name, entry.path, now):
                        count += 1
                    else:
                        with contextlib.suppress(OSError):  # a folder put there: not ours to remove
                            os.unlink(entry.path)
        except OSError as error:
            log.warning("browser starts in flight not counted (%s): %s", self._folder, error.strerror or error)
        return count

    @staticmethod
    def _live(name: str, path: str, now: float) -> bool:
        pid, _, _token = name.partition("-")
        try:
            with open(path, encoding="ascii") as found:
                until = float(found.read())
        except (OSError, ValueError):
            return False
        return pid.isdigit() and procfs.running(int(pid)) and now < until

    def _reserve(self) -> str | None:
        """(Lock held.) A new reservation's file, named by this process and counting until it is overdue;
        None when it cannot be written (a full disk): the start goes ahead on the figures alone."""
        path = os.path.join(self._folder, f"{os.getpid()}-{secrets.token_hex(6)}")
        try:
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(descriptor, "w", encoding="ascii") as made:
                made.write(repr(self._clock() + RESERVATION_SECONDS))
        except OSError as error:
            log.warning("a browser start could not be reserved (%s): %s", path, error.strerror or type(error).__name__)
            with contextlib.suppress(OSError):
                os.unlink(path)
            return None
        return path
