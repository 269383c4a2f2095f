"""The platform pace (the ``PlatformPace`` port) on a ``limits`` storage, shared by every worker process.

It lives on the same storage as the DM throttle (``mmap:///`` by default, ``sqlite:///`` also for one host,
``redis://`` for several hosts, ``memory://`` for one process), under keys of its own:
- ``platform-hold/{platform user id}``: a counter whose expiry is the end of the hold the platform's 429 asked
  for. ``get`` answers 0 once it has expired, on every storage, so the hold ends by itself;
- ``platform-reads/{platform user id}``: a moving window of 60 s holding one entry per platform read.
  ``acquire_entry`` checks and counts in one atomic step (under the file lock on mmap, one
  ``BEGIN IMMEDIATE`` on SQLite, one script on Redis), so concurrent workers can never admit more than
  the limit between them.

``limits`` windows are closed: an entry exactly 60 s old still counts. The ``retry_after`` of a refusal
follows that rule exactly: the smallest whole number of seconds after which the refused call fits,
found from the window's counts (``get_moving_window`` with a shorter expiry counts the entries that will
still be inside the window after the wait).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import cast

from limits.errors import ConfigurationError
from limits.storage import MovingWindowSupport, Storage, storage_from_string

import adapters.throttle.sqlite_limits_storage  # noqa: F401  (registers the sqlite:// scheme)
from adapters.throttle.mmap_limits_storage import MmapStorage, require_capacity  # (and registers mmap://)
from community_api.model import ReadPace
from community_api.pace import WINDOW_SECONDS, held_refusal, pace_refusal

WINDOW = WINDOW_SECONDS
_EDGE = 0.001


class LimitsPlatformPace:
    def __init__(self, storage_uri: str, reads_per_minute: int) -> None:
        if reads_per_minute < 1:
            raise ConfigurationError("the platform read pace must allow at least one read a minute")
        storage = storage_from_string(storage_uri)
        if not (isinstance(storage, Storage) and isinstance(storage, MovingWindowSupport)):
            raise ConfigurationError(
                f"the platform pace needs a synchronous storage with moving windows, not {storage_uri}"
            )
        require_capacity(storage, reads_per_minute, "the platform read pace")
        self._storage: Storage = storage
        self._windows = cast(MovingWindowSupport, storage)
        self._mmap = storage if isinstance(storage, MmapStorage) else None
        self.reads_per_minute = reads_per_minute

    # --- the port ------------------------------------------------------------------------------

    def admit(self, platform_user_id: str, reads: int) -> None:
        if reads > 0 and self._mmap is not None:
            # The same rules in one step of the mmap storage (on every data read, so worth a path of its own).
            cost = min(reads, self.reads_per_minute)
            held_until, admitted = self._mmap.acquire_entry_unless_held(
                _key("platform-hold", platform_user_id),
                _key("platform-reads", platform_user_id),
                self.reads_per_minute,
                WINDOW,
                amount=cost,
            )
            if held_until:
                raise held_refusal(held_until - time.time())
            if not admitted:
                raise pace_refusal(self._wait_for(platform_user_id, cost), self.reads_per_minute)
            return
        held = self._held_for(platform_user_id)
        if held > 0:
            raise held_refusal(held)
        if reads <= 0:
            return
        cost = min(reads, self.reads_per_minute)
        if not self._windows.acquire_entry(
            _key("platform-reads", platform_user_id), self.reads_per_minute, WINDOW, amount=cost
        ):
            raise pace_refusal(self._wait_for(platform_user_id, cost), self.reads_per_minute)

    def hold(self, platform_user_id: str, seconds: int) -> None:
        key = _key("platform-hold", platform_user_id)
        until = time.time() + seconds
        if self._storage.get(key) > 0 and self._storage.get_expiry(key) >= until:
            return  # a longer hold is already in place
        self._storage.clear(key)
        self._storage.incr(key, seconds)

    def ready(self) -> str | None:
        return None if self._storage.check() else "the read pace's storage does not answer"

    def status(self, platform_user_id: str) -> ReadPace:
        key = _key("platform-reads", platform_user_id)
        _, used = self._windows.get_moving_window(key, self.reads_per_minute, WINDOW)
        now = time.time()
        held = self._held_for(platform_user_id)
        wait = self._wait_for(platform_user_id, 1) if used >= self.reads_per_minute else 0
        return ReadPace(
            reads_per_minute=self.reads_per_minute,
            reads_last_minute=used,
            reads_left=max(0, self.reads_per_minute - used),
            next_read_at=_at(now + max(wait, held)) if max(wait, held) > 0 else None,
            held_until=_at(now + held) if held > 0 else None,
        )

    # --- reading the state ---------------------------------------------------------------------

    def _held_for(self, platform_user_id: str) -> float:
        """Seconds left of the platform's hold on the platform account (0 when none)."""
        key = _key("platform-hold", platform_user_id)
        if self._storage.get(key) <= 0:
            return 0.0
        return max(0.0, self._storage.get_expiry(key) - time.time())

    def _wait_for(self, platform_user_id: str, cost: int) -> int:
        """The smallest whole number of seconds d such that, d seconds from now, ``cost`` more reads fit:
        the entries still inside the window then are those at most ``WINDOW - d`` seconds old now."""
        key = _key("platform-reads", platform_user_id)
        room = self.reads_per_minute - cost

        def fits_after(d: int) -> bool:
            if d > WINDOW:
                return True
            # A read exactly WINDOW - d old now is still inside then (admission is closed on every
            # storage), but memory:// counts its window open at that edge: widen it by a millisecond so
            # every storage counts the edge, erring towards the longer wait.
            expiry = WINDOW - d + _EDGE
            _, inside = self._windows.get_moving_window(key, self.reads_per_minute, expiry)  # type: ignore[arg-type]
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
