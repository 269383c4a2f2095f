"""An in-memory ``PlatformPace`` keeping the same rules as ``adapters/throttle/limits_platform_pace.py``,
with time from an injected clock; ``tests/contract/test_platform_pace.py`` runs the same cases on both.

Rules, per platform account: a hold lasts the seconds asked (the longer of two wins) and ends exactly then; at
most ``reads_per_minute`` reads and ``writes_per_minute`` writes in any 60 s, each in a window of its own, a
request exactly 60 s old still counting; a refused ``admit`` counts nothing; a call of more than the limit
counts as the whole limit (with what it has ``counted`` already); ``retry_after`` is the smallest whole
number of seconds after which the refused call fits, the part it ``counted`` already included.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from community_api.errors import RateLimited
from community_api.model import ReadPace, WritePace
from community_api.pace import (
    DEFAULT_READS_PER_MINUTE,
    DEFAULT_WRITES_PER_MINUTE,
    WINDOW_SECONDS,
    held_refusal,
    pace_refusal,
    write_pace_refusal,
)
from community_api.ports import Clock


class FakePlatformPace:
    def __init__(
        self,
        clock: Clock,
        reads_per_minute: int = DEFAULT_READS_PER_MINUTE,
        writes_per_minute: int = DEFAULT_WRITES_PER_MINUTE,
    ) -> None:
        self.clock = clock
        self.reads_per_minute = reads_per_minute
        self.writes_per_minute = writes_per_minute
        self._reads: dict[str, list[float]] = {}  # platform user id -> times of its reads, oldest first
        self._writes: dict[str, list[float]] = {}  # the same for its writes
        self._holds: dict[str, float] = {}  # platform user id -> end of its hold
        self._lock = threading.Lock()
        self.not_ready: str | None = None  # tests set a reason to make ``ready`` answer it

    def ready(self) -> str | None:
        return self.not_ready

    def admit(self, platform_user_id: str, reads: int, writes: int = 0, *, counted: int = 0) -> None:
        if reads > 0 and writes > 0:
            raise ValueError("a platform call is reads or writes, not both")
        with self._lock:
            now = self._now()
            held = self._holds.get(platform_user_id, now) - now
            if held > 0:
                raise held_refusal(held)
            if reads > 0:
                self._count(self._reads, self.reads_per_minute, platform_user_id, reads, counted, now, pace_refusal)
            elif writes > 0:
                self._count(
                    self._writes, self.writes_per_minute, platform_user_id, writes, counted, now, write_pace_refusal
                )

    def hold(self, platform_user_id: str, seconds: int) -> None:
        with self._lock:
            until = self._now() + seconds
            self._holds[platform_user_id] = max(until, self._holds.get(platform_user_id, until))

    def status(self, platform_user_id: str) -> ReadPace:
        with self._lock:
            now = self._now()
            inside = self._inside(self._reads, platform_user_id, now)
            held = max(0.0, self._holds.get(platform_user_id, now) - now)
            wait = self._wait(inside, self.reads_per_minute, 1, now) if len(inside) >= self.reads_per_minute else 0
            soonest = max(held, wait)
            return ReadPace(
                reads_per_minute=self.reads_per_minute,
                reads_last_minute=len(inside),
                reads_left=max(0, self.reads_per_minute - len(inside)),
                next_read_at=self._at(now + soonest) if soonest > 0 else None,
                held_until=self._at(now + held) if held > 0 else None,
            )

    def write_status(self, platform_user_id: str) -> WritePace:
        with self._lock:
            now = self._now()
            inside = self._inside(self._writes, platform_user_id, now)
            held = max(0.0, self._holds.get(platform_user_id, now) - now)
            limit = self.writes_per_minute
            wait = self._wait(inside, limit, 1, now) if len(inside) >= limit else 0
            soonest = max(held, wait)
            return WritePace(
                writes_per_minute=limit,
                writes_last_minute=len(inside),
                writes_left=max(0, limit - len(inside)),
                next_write_at=self._at(now + soonest) if soonest > 0 else None,
            )

    def _count(
        self,
        windows: dict[str, list[float]],
        limit: int,
        platform_user_id: str,
        amount: int,
        counted: int,
        now: float,
        refusal: Callable[[int, int], RateLimited],
    ) -> None:
        cost = min(amount, max(0, limit - counted))
        inside = self._inside(windows, platform_user_id, now)
        if len(inside) + cost > limit:
            raise refusal(self._wait(inside, limit, min(counted + amount, limit), now), limit)
        windows[platform_user_id] = inside + [now] * cost

    @staticmethod
    def _inside(windows: dict[str, list[float]], platform_user_id: str, now: float) -> list[float]:
        return [t for t in windows.get(platform_user_id, []) if t >= now - WINDOW_SECONDS]

    @staticmethod
    def _wait(inside: list[float], limit: int, cost: int, now: float) -> int:
        """Smallest whole d with at most ``limit - cost`` entries still inside the window at ``now + d``."""
        room = limit - cost
        d = 1
        while len([t for t in inside if t >= now + d - WINDOW_SECONDS]) > room:
            d += 1
        return d

    def _now(self) -> float:
        return self.clock.now().timestamp()

    def _at(self, timestamp: float) -> datetime:
        return self.clock.now() + timedelta(seconds=timestamp - self._now())
