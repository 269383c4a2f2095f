"""The platform pace (the ``PlatformPace`` port) on a ``limits`` storage, shared by every worker process.

It lives on the same storage as the DM throttle (``mmap:///`` by default, ``sqlite:///`` also for one host,
``redis://`` for several hosts, ``memory://`` for one process), under keys of its own:
- ``platform-hold/{platform user id}``: a counter whose expiry is the end of the hold the platform's 429 asked
  for. ``get`` answers 0 once it has expired, on every storage, so the hold ends by itself;
- ``platform-reads/{platform user id}``: a moving window of 60 s holding one entry per platform read.
  ``acquire_entry`` checks and counts in one atomic step (under the file lock on mmap, one
  ``BEGIN IMMEDIATE`` on SQLite, one script on Redis), so concurrent workers can never admit more than
  the limit between them;
- ``platform-writes/{platform user id}``: the same for platform writes, with their own limit.

``limits`` windows are closed: an entry exactly 60 s old still counts. The ``retry_after`` of a refusal
follows that rule exactly: the smallest whole number of seconds after which the refused call fits,
found from the window's counts (``get_moving_window`` with a shorter expiry counts the entries that will
still be inside the window after the wait).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import cast

from limits.errors import ConfigurationError
from limits.storage import MovingWindowSupport, Storage, storage_from_string

import adapters.throttle.sqlite_limits_storage  # noqa: F401  (registers the sqlite:// scheme)
from adapters.throttle.mmap_limits_storage import MmapStorage, require_capacity  # (and registers mmap://)
from community_api.errors import RateLimited
from community_api.model import ReadPace, WritePace
from community_api.pace import (
    DEFAULT_WRITES_PER_MINUTE,
    WINDOW_SECONDS,
    held_refusal,
    pace_refusal,
    write_pace_refusal,
)

WINDOW = WINDOW_SECONDS
_EDGE = 0.001


class LimitsPlatformPace:
    def __init__(
        self, storage_uri: str, reads_per_minute: int, writes_per_minute: int = DEFAULT_WRITES_PER_MINUTE
    ) -> None:
        if reads_per_minute < 1 or writes_per_minute < 1:
            raise ConfigurationError("the platform pace must allow at least one read and one write a minute")
        storage = storage_from_string(storage_uri)
        if not (isinstance(storage, Storage) and isinstance(storage, MovingWindowSupport)):
            raise ConfigurationError(
                f"the platform pace needs a synchronous storage with moving windows, not {storage_uri}"
            )
        require_capacity(storage, max(reads_per_minute, writes_per_minute), "the platform pace")
        self._storage: Storage = storage
        self._windows = cast(MovingWindowSupport, storage)
        self._mmap = storage if isinstance(storage, MmapStorage) else None
        self.reads_per_minute = reads_per_minute
        self.writes_per_minute = writes_per_minute

    # --- the port ------------------------------------------------------------------------------

    def admit(self, platform_user_id: str, reads: int, writes: int = 0, *, counted: int = 0) -> None:
        if reads > 0 and writes > 0:
            raise ValueError("a platform call is reads or writes, not both")
        if reads > 0:
            self._acquire(platform_user_id, "platform-reads", self.reads_per_minute, reads, counted, pace_refusal)
        elif writes > 0:
            self._acquire(
                platform_user_id, "platform-writes", self.writes_per_minute, writes, counted, write_pace_refusal
            )
        else:
            self._check_hold(platform_user_id)

    def _check_hold(self, platform_user_id: str) -> None:
        held = self._held_for(platform_user_id)
        if held > 0:
            raise held_refusal(held)

    def _acquire(
        self,
        platform_user_id: str,
        kind: str,
        limit: int,
        amount: int,
        counted: int,
        refusal: Callable[[int, int], RateLimited],
    ) -> None:
        """Check the hold, then count ``amount`` in the window ``kind`` unless it would pass ``limit``; a call
        that has ``counted`` already counts at most the rest of the limit (``PlatformPace``)."""
        cost = min(amount, max(0, limit - counted))
        if cost == 0:  # the call holds the whole budget already
            self._check_hold(platform_user_id)
            return
        whole = min(counted + amount, limit)  # what a retry of the whole call needs
        window = _key(kind, platform_user_id)
        if self._mmap is not None:
            # The same rules in one step of the mmap storage (on every data read, so worth a path of its own).
            held_until, admitted = self._mmap.acquire_entry_unless_held(
                _key("platform-hold", platform_user_id), window, limit, WINDOW, amount=cost
            )
            if held_until:
                raise held_refusal(held_until - time.time())
            if not admitted:
                raise refusal(self._wait_for(window, limit, whole), limit)
            return
        self._check_hold(platform_user_id)
        if not self._windows.acquire_entry(window, limit, WINDOW, amount=cost):
            raise refusal(self._wait_for(window, limit, whole), limit)

    def hold(self, platform_user_id: str, seconds: int) -> None:
        key = _key("platform-hold", platform_user_id)
        until = time.time() + seconds
        if self._storage.get(key) > 0 and self._storage.get_expiry(key) >= until:
            return  # a longer hold is already in place
        self._storage.clear(key)
        self._storage.incr(key, seconds)

    def ready(self) -> str | None:
        return None if self._storage.check() else "the platform pace's storage does not answer"

    def status(self, platform_user_id: str) -> ReadPace:
        limit = self.reads_per_minute
        used, wait = self._window_state(_key("platform-reads", platform_user_id), limit)
        now = time.time()
        held = self._held_for(platform_user_id)
        return ReadPace(
            reads_per_minute=limit,
            reads_last_minute=used,
            reads_left=max(0, limit - used),
            next_read_at=_at(now + max(wait, held)) if max(wait, held) > 0 else None,
            held_until=_at(now + held) if held > 0 else None,
        )

    def write_status(self, platform_user_id: str) -> WritePace:
        limit = self.writes_per_minute
        used, wait = self._window_state(_key("platform-writes", platform_user_id), limit)
        now = time.time()
        soonest = max(wait, self._held_for(platform_user_id))
        return WritePace(
            writes_per_minute=limit,
            writes_last_minute=used,
            writes_left=max(0, limit - used),
            next_write_at=_at(now + soonest) if soonest > 0 else None,
        )

    # --- reading the state ---------------------------------------------------------------------

    def _held_for(self, platform_user_id: str) -> float:
        """Seconds left of the platform's hold on the platform account (0 when none)."""
        key = _key("platform-hold", platform_user_id)
        if self._storage.get(key) <= 0:
            return 0.0
        return max(0.0, self._storage.get_expiry(key) - time.time())

    def _window_state(self, window: str, limit: int) -> tuple[int, int]:
        """Entries in the window now, and the whole seconds until one more fits (0: it fits now)."""
        _, used = self._windows.get_moving_window(window, limit, WINDOW)
        return used, (self._wait_for(window, limit, 1) if used >= limit else 0)

    def _wait_for(self, window: str, limit: int, cost: int) -> int:
        """The smallest whole number of seconds d such that, d seconds from now, ``cost`` more entries fit:
        the entries still inside the window then are those at most ``WINDOW - d`` seconds old now."""
        room = limit - cost

        def fits_after(d: int) -> bool:
            if d > WINDOW:
                return True
            # An entry exactly WINDOW - d old now is still inside then (admission is closed on every
            # storage), but memory:// counts its window open at that edge: widen it by a millisecond so
            # every storage counts the edge, erring towards the longer wait.
            expiry = WINDOW - d + _EDGE
            _, inside = self._windows.get_moving_window(window, limit, expiry)  # type: ignore[arg-type]
            return inside <= room

        low, high = 1, WINDOW + 1  # after WINDOW + 1 s every entry of now has left the window
        while low < high:
            middle = (low + high) // 2
            if fits_after(middle):
                high = middle
            else:
                low = middle + 1
        return low


def _key(kind: str, platform_user_id: str) -> str:
    return f"community-api/{kind}/{platform_user_id}"


def _at(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, UTC)
