"""An in-memory ``Throttle`` that keeps the same rules as ``adapters/throttle/limits_throttle.py``, with
time from an injected clock. ``tests/contract/test_throttle.py`` runs the same cases against both.

Rules, per platform account: the next reservation is allowed from L + g, L the last reservation and g a whole
number of seconds in [30, 45] drawn for it; at most 20 committed sends in any hour and 100 in any
24 hours; windows are half-open; ``retry_after`` is the ceiling of the wait, at least 1. A refused
reserve consumes nothing; a cancel within 15 s of its reserve gives the pace back (later, the pace runs
out); a reservation neither committed nor cancelled holds the pace only.
"""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from community_api.errors import RateLimited
from community_api.model import DmQuota
from community_api.ports import DM_THROTTLE, Clock

MIN_GAP, MAX_GAP = 30, 45
HOURLY_LIMIT, DAILY_LIMIT = 20, 100
HOUR, DAY = 3600.0, 86400.0
CANCEL_WINDOW = 15.0


@dataclass
class FakeReservation:
    platform_user_id: str
    taken_at: float
    settled: bool = False


@dataclass
class _Pace:
    reserved_at: float
    gap: int


class FakeThrottle:
    def __init__(self, clock: Clock, draw_gap: Callable[[str, float], float] | None = None) -> None:
        self._clock = clock
        self._random = random.Random()
        self._draw = draw_gap or (lambda _conn, _at: float(self._random.randint(MIN_GAP, MAX_GAP)))
        self._pace: dict[str, _Pace] = {}
        self._sends: dict[str, list[float]] = {}
        self._lock = threading.Lock()
        self.not_ready: str | None = None  # tests set a reason to make ``ready`` answer it

    def ready(self) -> str | None:
        return self.not_ready

    def _now(self) -> float:
        return self._clock.now().timestamp()

    def _wait(self, platform_user_id: str, now: float) -> tuple[float, int, int]:
        sends = self._sends.get(platform_user_id, [])
        last_hour = [at for at in sends if at > now - HOUR]
        today = [at for at in sends if at > now - DAY]
        wait = 0.0
        if len(last_hour) >= HOURLY_LIMIT:
            wait = max(wait, sorted(last_hour)[len(last_hour) - HOURLY_LIMIT] + HOUR - now)
        if len(today) >= DAILY_LIMIT:
            wait = max(wait, sorted(today)[len(today) - DAILY_LIMIT] + DAY - now)
        pace = self._pace.get(platform_user_id)
        if pace is not None:
            wait = max(wait, pace.reserved_at + pace.gap - now)
        return wait, len(last_hour), len(today)

    def reserve(self, platform_user_id: str) -> object:
        with self._lock:
            now = self._now()
            wait, _, _ = self._wait(platform_user_id, now)
            if wait > 0:
                retry_after = max(1, math.ceil(wait))
                raise RateLimited(
                    f"Too many direct messages from this platform account; retry in {retry_after} s.",
                    retry_after=retry_after,
                    reason=DM_THROTTLE,
                )
            gap = min(MAX_GAP, max(MIN_GAP, math.ceil(self._draw(platform_user_id, now))))
            self._pace[platform_user_id] = _Pace(now, gap)
            return FakeReservation(platform_user_id, now)

    def commit(self, reservation: object) -> None:
        assert isinstance(reservation, FakeReservation)
        with self._lock:
            if reservation.settled:
                return
            reservation.settled = True
            self._sends.setdefault(reservation.platform_user_id, []).append(self._now())

    def cancel(self, reservation: object) -> None:
        assert isinstance(reservation, FakeReservation)
        with self._lock:
            if reservation.settled:
                return
            reservation.settled = True
            pace = self._pace.get(reservation.platform_user_id)
            if (
                self._now() - reservation.taken_at < CANCEL_WINDOW
                and pace is not None
                and pace.reserved_at == reservation.taken_at
            ):
                del self._pace[reservation.platform_user_id]

    def quota(self, platform_user_id: str) -> DmQuota:
        with self._lock:
            now = self._now()
            wait, last_hour, today = self._wait(platform_user_id, now)
            return DmQuota(
                sent_last_hour=last_hour,
                sent_today=today,
                hourly_limit=HOURLY_LIMIT,
                daily_limit=DAILY_LIMIT,
                next_allowed_at=datetime.fromtimestamp(now + wait, UTC) if wait > 0 else None,
            )
