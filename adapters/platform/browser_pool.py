"""The bounded pool that keeps one warm browser (``browser.py``) per connection.

- One browser per connection id, so each keeps its own cookie jar (session and firewall token) and
  build id. Calls for one connection are serialised on a lock of their own (a page runs one script at a
  time); calls for other connections run in parallel.
- At most ``size`` browsers live at once: starting one more first closes the least recently used idle
  browser; when every browser is busy, the start waits a bounded time, then gives up.
- A browser that crashed or hung is ``discard``ed by the caller and started afresh on the next use.
- A browser nobody has used for ``idle`` seconds is closed (a thread of the pool's looks now and then),
  so that a quiet service gives its memory back (225-340 MiB a browser); the connection's next call
  starts a new one, a second or two. 0 keeps browsers until they are evicted or the pool closes.
- The unused browser of a connection that is no longer ``linked`` (unlinked, or its account deleted) is
  closed by the same thread within about 10 s, in every worker: its profile holds the platform session
  that the store has erased. A call in flight is never cut short.
- Every wait is bounded by the pool's ``wait`` and by the current gateway call's deadline
  (``deadline.py``).
- A ``temporary`` browser (signing in) counts against ``size`` too, and is closed when its call ends.
- Memory: a browser takes 225-550 MiB. When ``room`` says the machine has no room for one more (local
  browsers: ``memory_room.py``), a start beyond the first is handled as when the pool is full: the least
  recently used idle browser is closed first, else the start waits its bounded time, then gives up (the
  call answers 503 and may be tried again). A pool sized beyond the box's memory, or another program's
  growth, then slows calls down rather than wake the kernel's OOM killer, whose pick on a small box may be
  a gunicorn worker with every call it holds. The first browser is always started. Every start holds a
  ``Reservation`` from ``room`` until the call that started it ends (its browser has then taken its
  memory, which the machine's figure shows), so that starts asked meanwhile, in this worker or another,
  count it (the first browser's too, though nothing refuses it).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Protocol

from adapters.metrics import (
    BROWSER_CRASHES,
    BROWSER_EVICTIONS,
    BROWSER_IDLE_CLOSES,
    BROWSER_MEMORY_SHORT,
    BROWSER_STARTS,
    BROWSERS_LIVE,
)
from adapters.platform.browser import Browser, BrowserFailure
from adapters.platform.deadline import remaining as time_left

log = logging.getLogger(__name__)

MEMORY_POLL_SECONDS = 0.5  # how often a start that found no memory looks again


class Reservation(Protocol):
    """What ``room`` answers when there is memory for one more browser: released when the start's call ends."""

    def release(self) -> None: ...


class Room(Protocol):
    """Has the machine memory for one more browser? A reservation if so, else None; with ``first`` (the
    pool's first browser, started whatever the answer) always a reservation."""

    def __call__(self, *, first: bool = False) -> Reservation | None: ...


class PoolBusy(Exception):
    """No browser could be had in time: every one is busy, the machine has no memory for another, or the
    pool is closed."""


class _Slot:
    __slots__ = ("browser", "idle_since", "key", "lock", "reservation", "users")

    def __init__(self, key: str) -> None:
        self.key = key
        self.lock = threading.Lock()
        self.browser: Browser | None = None
        self.reservation: Reservation | None = None  # of the browser this lease started, until it ends
        self.users = 0  # threads holding or waiting for ``lock``
        self.idle_since = 0.0  # when ``users`` last fell to 0 (the pool's clock)

    def release_reservation(self) -> None:
        if self.reservation is not None:
            self.reservation.release()
            self.reservation = None


class Lease:
    """The caller's hold on one connection's browser, for the length of one gateway call."""

    def __init__(self, pool: BrowserPool, slot: _Slot) -> None:
        self._pool = pool
        self._slot = slot

    def browser(self) -> Browser:
        """The connection's browser, started if there is none (``BrowserFailure`` if it cannot start)."""
        if self._slot.browser is None:
            self._pool._start(self._slot)
        assert self._slot.browser is not None
        return self._slot.browser

    def discard(self) -> None:
        """Close the browser (it crashed or hung); the next ``browser()`` starts a fresh one."""
        self._pool._close(self._slot, crashed=True)

    def close(self) -> None:
        """Close the browser, its work done (a temporary one)."""
        self._pool._close(self._slot)


class BrowserPool:
    def __init__(
        self,
        factory: Callable[[], Browser],
        size: int,
        wait: float,
        idle: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        linked: Callable[[str], bool] | None = None,
        room: Room | None = None,
    ) -> None:
        if size < 1:
            raise ValueError("the pool needs room for at least one browser")
        self._factory = factory
        self._size = size
        self._wait = wait
        self._idle = idle
        self._clock = clock
        self._linked = linked  # is this key's connection still linked? (a store read)
        self._room = room  # has the machine memory for one more browser? (None: never asked)
        self._cond = threading.Condition()
        self._slots: OrderedDict[str, _Slot] = OrderedDict()  # least recently used first
        self._live = 0  # browsers running or starting
        self._closed = False
        self._closing = threading.Event()  # wakes the idle sweeper to end it
        self._sweeper_pid: int | None = None  # the process whose sweeper runs (threads do not fork)

    @contextlib.contextmanager
    def lease(self, key: str) -> Iterator[Lease]:
        with self._cond:
            if self._closed:
                raise PoolBusy("the browser pool is closed")
            slot = self._slots.get(key)
            if slot is None:
                slot = self._slots[key] = _Slot(key)
            self._slots.move_to_end(key)
            slot.users += 1
        try:
            if not slot.lock.acquire(timeout=max(0.0, min(self._wait, time_left(self._wait)))):
                raise PoolBusy("the browser of this connection is busy with earlier calls")
            try:
                yield Lease(self, slot)
            finally:
                slot.release_reservation()  # the browser it started has done its first call
                slot.lock.release()
        finally:
            with self._cond:
                slot.users -= 1
                slot.idle_since = self._clock()
                if slot.users == 0 and slot.browser is None and self._slots.get(key) is slot:
                    del self._slots[key]
                self._cond.notify_all()

    @contextlib.contextmanager
    def temporary(self) -> Iterator[Browser]:
        """A browser of its own for one call (a clean cookie jar: signing in to the platform), counted
        against ``size`` like the warm ones (an idle one is closed to make room, or the start waits its
        bounded time, then ``PoolBusy``), and closed when the call ends. Before, each sign-in started a
        browser outside the pool, so a burst of links ran more browsers than the memory planned for."""
        with self.lease(f"temporary:{secrets.token_hex(8)}") as lease:
            browser = lease.browser()
            try:
                yield browser
            finally:
                lease.close()

    def pids(self, key: str) -> list[int]:
        with self._cond:
            slot = self._slots.get(key)
            browser = slot.browser if slot is not None else None
        return browser.pids() if browser is not None else []

    def live(self) -> int:
        """How many browsers are running or starting."""
        with self._cond:
            return self._live

    def close_idle(self) -> int:
        """Close the browsers nobody has used for ``idle`` seconds; how many were closed."""
        if self._idle <= 0:
            return 0
        now = self._clock()
        closed = self._close_unused(lambda slot: now - slot.idle_since >= self._idle)
        if closed:
            BROWSER_IDLE_CLOSES.inc(closed)
            log.info("closed %d browser(s) unused for %d s", closed, self._idle)
        return closed

    def close_unlinked(self) -> int:
        """Close the unused browsers of connections no longer linked; how many were closed. The store is
        asked outside the pool's lock; a failing check raises and closes nothing."""
        if self._linked is None:
            return 0
        with self._cond:
            keys = [s.key for s in self._slots.values() if s.users == 0 and s.browser is not None]
        gone = {key for key in keys if not self._linked(key)}
        if not gone:
            return 0
        closed = self._close_unused(lambda slot: slot.key in gone)
        if closed:
            log.info("closed %d browser(s) of connections no longer linked", closed)
        return closed

    def _close_unused(self, chosen: Callable[[_Slot], bool]) -> int:
        """Close the browsers nobody is using whose slot is ``chosen``; how many were closed."""
        with self._cond:
            slots = [s for s in self._slots.values() if s.users == 0 and s.browser is not None and chosen(s)]
            browsers = []
            for slot in slots:
                assert slot.browser is not None
                browsers.append(slot.browser)
                slot.browser = None
                del self._slots[slot.key]
                self._live -= 1
                BROWSERS_LIVE.dec()
            self._cond.notify_all()
        for browser in browsers:
            browser.quit()
        return len(browsers)

    def _sweep(self) -> None:
        # Every 10 s at most: the link check is one indexed read per warm browser.
        period = max(1.0, min(self._idle / 4, 10.0)) if self._idle > 0 else 10.0
        while not self._closing.wait(period):
            for close in (self.close_idle, self.close_unlinked):
                try:
                    close()
                except Exception:  # noqa: BLE001 - a browser that fails to quit must not end the sweeping
                    log.warning("closing browsers (%s) failed", close.__name__, exc_info=True)

    def _ensure_sweeper(self) -> None:
        """(Condition held.) The sweeper of this process, started with its first browser."""
        if (self._idle > 0 or self._linked is not None) and self._sweeper_pid != os.getpid():
            self._sweeper_pid = os.getpid()
            threading.Thread(target=self._sweep, name="close-idle-browsers", daemon=True).start()

    def close(self) -> None:
        """End every browser. Calls still running fail; later calls are refused."""
        self._closing.set()
        with self._cond:
            self._closed = True
            browsers = [s.browser for s in self._slots.values() if s.browser is not None]
            for slot in self._slots.values():
                slot.browser = None
            self._slots.clear()
            BROWSERS_LIVE.dec(self._live)
            self._live = 0
            self._cond.notify_all()
        # Not politely: at shutdown the stop signal may have reached the drivers too (a terminal's
        # Ctrl-C, ``systemctl stop``), and one that is still exiting would refuse the quit request with a
        # retry warning per browser. A local browser is ended by PID; a Grid's session by a bounded request.
        for browser in browsers:
            browser.quit(polite=False)

    # -- used by Lease, with the slot's lock held ----------------------------------------------------
    def _start(self, slot: _Slot) -> None:
        slot.release_reservation()  # made for a browser of this lease that has since been discarded
        evicted: list[Browser] = []
        short = False  # counted once a start, however it ends
        deadline = time.monotonic() + min(self._wait, time_left(self._wait))
        with self._cond:
            while True:
                if self._closed:
                    raise PoolBusy("the browser pool is closed")
                full = self._live >= self._size
                # One browser closed makes room for one (its memory is given back as it quits, below,
                # so the machine's figure would not show it yet): never more closed than that.
                if not full:
                    if evicted or self._room is None:
                        break
                    slot.reservation = self._room(first=self._live == 0)
                    if slot.reservation is not None:
                        break
                if not full and not short:
                    short = True
                    BROWSER_MEMORY_SHORT.inc()
                    log.warning(
                        "no memory for another browser beside the %d running (docs/deployment.md, Workers and"
                        " browsers): an idle one is closed, or the start waits up to %.0f s",
                        self._live,
                        max(0.0, deadline - time.monotonic()),
                    )
                victim = next(
                    (s for s in self._slots.values() if s is not slot and s.users == 0 and s.browser is not None), None
                )
                if victim is not None:
                    assert victim.browser is not None
                    evicted.append(victim.browser)
                    victim.browser = None
                    del self._slots[victim.key]
                    self._live -= 1
                    BROWSERS_LIVE.dec()
                    BROWSER_EVICTIONS.inc()
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    if full:
                        raise PoolBusy(f"all {self._size} browsers are busy")
                    raise PoolBusy(f"no memory for another browser beside the {self._live} running")
                # Memory is freed by others too (no notify comes then): look again now and then.
                self._cond.wait(remaining if full else min(remaining, MEMORY_POLL_SECONDS))
            self._live += 1
            BROWSERS_LIVE.inc()
            self._ensure_sweeper()
        # The evicted browsers close while the new one starts (closing one takes 0.1-0.5 s, mostly
        # waiting for its processes to end); both are done before this call returns.
        closing = []
        for old in evicted:
            log.info("closing the least recently used browser (pool of %d)", self._size)
            closing.append(threading.Thread(target=old.quit, name="close-evicted-browser", daemon=True))
            closing[-1].start()
        try:
            browser = self._factory()
        except Exception as error:
            with self._cond:
                self._live -= 1
                BROWSERS_LIVE.dec()
                self._cond.notify_all()
            slot.release_reservation()  # no browser takes the memory it reserved
            raise BrowserFailure(f"the browser could not start: {type(error).__name__}") from error
        finally:
            for thread in closing:
                thread.join()
        BROWSER_STARTS.inc()
        with self._cond:
            if not self._closed:
                slot.browser = browser
                return
        browser.quit()
        raise PoolBusy("the browser pool is closed")

    def _close(self, slot: _Slot, *, crashed: bool = False) -> None:
        """Close the slot's browser: a crashed or hung one (``discard``) is ended at once, by PID."""
        with self._cond:
            browser, slot.browser = slot.browser, None
            if browser is not None and not self._closed:
                self._live -= 1
                BROWSERS_LIVE.dec()
                if crashed:
                    BROWSER_CRASHES.inc()
            self._cond.notify_all()
        if browser is not None:
            browser.quit(polite=not crashed)
