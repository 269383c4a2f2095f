"""The DM throttle (the ``Throttle`` port) on a ``limits`` storage, shared by every worker process.

``LimitsThrottle(storage_uri, salt)`` takes any synchronous ``limits`` storage with moving windows:
``mmap:///path`` (``mmap_limits_storage``, the default) or ``sqlite:///path`` (``sqlite_limits_storage``):
one host, several workers; ``redis://...`` (several hosts) or ``memory://`` (one process: tests, demos).

Rules, per platform account (DESIGN §2, spec §8; every connection to one platform account counts
against the same quota, since the platform counts by account):
- pace: after a reservation at time L, the next is allowed from L + g, where g is a whole number of
  seconds in [30, 45] drawn from (platform account, L) with a secret salt: every worker draws the same g for
  the same L without storing it, clients cannot predict it, and it is drawn anew for each send;
- at most 20 sends in any hour and 100 in any 24 hours; a send counts from its ``commit``;
- windows are half-open: a send exactly g seconds after the last, or exactly an hour after the oldest
  of twenty, is allowed. So ``retry_after`` (whole seconds, ceil, at least 1) is exact: a client that
  waits that long is let through, even on a frozen test clock;
- a refused ``reserve`` consumes nothing; ``cancel`` soon after ``reserve`` gives the pace back and the
  send never counts; a reservation neither committed nor cancelled holds the pace only.

How it stays exact across processes with nothing but the storage's moving-window primitives:
- ``limits`` windows are closed (an entry exactly ``expiry`` old is still in); the half-open decisions
  are made here from ``get_moving_window`` reads, and the atomic ``acquire_entry`` calls are given
  limits that never decide anything except a race (below);
- the pace uses two keys. ``dm-pace`` records each reservation and is kept 45 s (``acquire_entry(key,
  3, 45)``: entries are at least 30 s apart, so it always succeeds); reading its newest entry gives L.
  ``dm-pace-lock`` settles races: ``acquire_entry(key, 1, 29)`` succeeds for only one of several
  reservers that read the same L, and for none that read a stale L, since the winner's entry is then
  less than 29 s old. A single key cannot do both: Redis's ``acquire_entry`` sets the key's lifetime
  to the window it checks (the old gap), which may be shorter than the new gap, and it only takes whole
  seconds (EXPIRE), so it cannot express "exactly g" either;
- hour and day counts are only written by ``commit``, and only one reservation per 30 s gets that far,
  so they need no lock; their ``acquire_entry`` limit is one above the rule's so a send admitted at
  the exact end of the window is still recorded.

Assumptions, stated where they bite: a reserve that takes 14 s or more between its read and its write
is refused (its proof that no racer slipped in would not hold); a ``cancel`` more than 15 s after its
``reserve`` leaves the pace to run out (by then a newer reservation could exist, and clearing the pace
would erase it); a ``commit`` is expected within 30 s of its ``reserve`` (a later one could let one
more send through the hourly or daily limit).
"""

from __future__ import annotations

import hashlib
import hmac
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import cast

from limits.errors import ConfigurationError
from limits.storage import MovingWindowSupport, Storage, storage_from_string

import adapters.throttle.sqlite_limits_storage  # noqa: F401  (registers the sqlite:// scheme)
from adapters.throttle.mmap_limits_storage import require_capacity  # (and registers mmap://)
from community_api.errors import RateLimited
from community_api.model import DmQuota
from community_api.ports import DM_THROTTLE

MIN_GAP = 30
MAX_GAP = 45
HOURLY_LIMIT = 20
DAILY_LIMIT = 100
HOUR = 3600
DAY = 86400

# Longest pause between a reserve's read and its write (and between a cancel's check and its clear)
# that the race argument tolerates: two such pauses must stay under the lock window of 29 s.
STALL_LIMIT = 14.0
# A cancel this soon after its reserve gives the pace back (a newer reservation cannot exist before
# 30 s, and the clear must land before then even after a STALL_LIMIT pause).
CANCEL_WINDOW = 15.0
_LOCK_WINDOW = MIN_GAP - 1
# How long a reserve that lost a race waits for the winner's record, to answer an exact retry_after.
_RACE_POLLS = 50
_RACE_POLL_SECONDS = 0.005

GapDraw = Callable[[str, float], float]


def hmac_gap_drawer(salt: str) -> GapDraw:
    """The default draw: g = 30 + (HMAC-SHA256(salt, "account:L") mod 16) whole seconds.

    Deterministic, so every worker computes the same gap for the same last reservation without storing
    it; keyed with a secret, so a client cannot predict its next gap (an empty salt, as demo and test
    settings may give, still works but makes the gaps predictable)."""
    key = salt.encode()
    span = MAX_GAP - MIN_GAP + 1

    def draw(platform_user_id: str, last_reserved_at: float) -> float:
        digest = hmac.new(key, f"dm-gap:{platform_user_id}:{last_reserved_at!r}".encode(), hashlib.sha256).digest()
        return float(MIN_GAP + int.from_bytes(digest[:8], "big") % span)

    return draw


def gap_seconds(draw: GapDraw, platform_user_id: str, last_reserved_at: float) -> int:
    """The drawn gap as the throttle applies it: whole seconds (the storages' windows are whole
    seconds), and never outside [30, 45] whatever an injected draw answers."""
    return min(MAX_GAP, max(MIN_GAP, math.ceil(draw(platform_user_id, last_reserved_at))))


def refusal(wait: float, reason: str) -> RateLimited:
    retry_after = max(1, math.ceil(wait))
    return RateLimited(
        f"Too many direct messages from this platform account ({reason}); retry in {retry_after} s.",
        retry_after=retry_after,
        reason=DM_THROTTLE,
    )


@dataclass
class _Reservation:
    platform_user_id: str
    taken_at: float
    settled: bool = False


@dataclass(frozen=True)
class _State:
    now: float
    wait: float  # seconds until a send is allowed; <= 0 when it is allowed now
    reason: str
    sent_last_hour: int
    sent_today: int


class LimitsThrottle:
    """The per-account DM throttle on a ``limits`` storage. See the module docstring for the rules
    and why the storage is used the way it is."""

    def __init__(self, storage_uri: str, salt: str, draw_gap: GapDraw | None = None) -> None:
        """:param storage_uri: a ``limits`` storage URI (``mmap:///...``, ``sqlite:///...``, ``redis://...``,
        ``memory://``); the storage must be synchronous and support moving windows
        :param salt: the secret that keys the gap draw (the service secret, or one derived from it)
        :param draw_gap: ``(platform user id, time of the last reservation) -> seconds``; tests fix it"""
        storage = storage_from_string(storage_uri)
        if not (isinstance(storage, Storage) and isinstance(storage, MovingWindowSupport)):
            raise ConfigurationError(
                f"the DM throttle needs a synchronous storage with moving windows, not {storage_uri}"
            )
        self._storage = cast(MovingWindowSupport, storage)
        self._plain_storage: Storage = storage
        require_capacity(storage, DAILY_LIMIT + 1, "the DM throttle")
        self._draw = draw_gap if draw_gap is not None else hmac_gap_drawer(salt)

    # --- the port ------------------------------------------------------------------------------

    def reserve(self, platform_user_id: str) -> object:
        started = time.time()
        state = self._state(platform_user_id)
        if state.wait > 0:
            raise refusal(state.wait, state.reason)
        if not self._storage.acquire_entry(_key("dm-pace-lock", platform_user_id), 1, _LOCK_WINDOW):
            raise self._lost_race(platform_user_id)
        recorded = self._storage.acquire_entry(_key("dm-pace", platform_user_id), 3, MAX_GAP)
        if not recorded or time.time() - started >= STALL_LIMIT:
            # We cannot vouch that nobody got in between our read and our write. Refuse; what we
            # wrote only delays the next send, which is the safe side.
            state = self._state(platform_user_id)
            raise refusal(max(state.wait, 1), "pace")
        return _Reservation(platform_user_id, started)

    def commit(self, reservation: object) -> None:
        held = _own(reservation)
        if held.settled:
            return
        held.settled = True
        conn = held.platform_user_id
        self._storage.acquire_entry(_key("dm-hour", conn), HOURLY_LIMIT + 1, HOUR)
        self._storage.acquire_entry(_key("dm-day", conn), DAILY_LIMIT + 1, DAY)

    def cancel(self, reservation: object) -> None:
        held = _own(reservation)
        if held.settled:
            return
        held.settled = True
        if time.time() - held.taken_at >= CANCEL_WINDOW:
            return
        # Lock first: a reserver that still sees our record is refused with a true retry_after, rather
        # than passing the record check and failing on the lock.
        self._plain_storage.clear(_key("dm-pace-lock", held.platform_user_id))
        self._plain_storage.clear(_key("dm-pace", held.platform_user_id))

    def ready(self) -> str | None:
        return None if self._plain_storage.check() else "the throttle storage does not answer"

    def quota(self, platform_user_id: str) -> DmQuota:
        state = self._state(platform_user_id)
        return DmQuota(
            sent_last_hour=state.sent_last_hour,
            sent_today=state.sent_today,
            hourly_limit=HOURLY_LIMIT,
            daily_limit=DAILY_LIMIT,
            next_allowed_at=(datetime.fromtimestamp(state.now + state.wait, UTC) if state.wait > 0 else None),
        )

    # --- reading the state ---------------------------------------------------------------------

    def _state(self, platform_user_id: str) -> _State:
        last = self._last_reservation(platform_user_id)
        hour = self._storage.get_moving_window(_key("dm-hour", platform_user_id), HOURLY_LIMIT + 1, HOUR)
        day = self._storage.get_moving_window(_key("dm-day", platform_user_id), DAILY_LIMIT + 1, DAY)
        # "Now" is read after the storage, so that nothing it answered lies in our future.
        now = time.time()
        waits: list[tuple[float, str]] = [(0.0, "")]
        sent_last_hour, hour_oldest = self._window(_key("dm-hour", platform_user_id), HOURLY_LIMIT, HOUR, now, hour)
        if sent_last_hour >= HOURLY_LIMIT:
            waits.append((hour_oldest + HOUR - now, f"{HOURLY_LIMIT} per hour"))
        sent_today, day_oldest = self._window(_key("dm-day", platform_user_id), DAILY_LIMIT, DAY, now, day)
        if sent_today >= DAILY_LIMIT:
            waits.append((day_oldest + DAY - now, f"{DAILY_LIMIT} per day"))
        if last is not None:
            gap = gap_seconds(self._draw, platform_user_id, last)
            # Redis answers times to 14 significant digits, which may round a fresh entry past now.
            waits.append((min(last, now) + gap - now, f"one message per {gap} s"))
        wait, reason = max(waits)
        return _State(now, wait, reason, sent_last_hour, sent_today)

    def _window(self, key: str, limit: int, window: int, now: float, read: tuple[float, int]) -> tuple[int, float]:
        """From a read of ``limit + 1`` entries over ``window``: how many are younger than ``window``
        seconds (half-open), and the oldest of them (meaningful when the count reaches ``limit``)."""
        oldest, count = read
        if count and oldest <= now - window:
            # limits counts an entry exactly ``window`` old; we do not.
            count -= 1
            if count >= limit:
                # The next-oldest is needed. Reading one second less is exact unless two sends were
                # committed within a second of each other, and then errs towards waiting longer.
                oldest, _ = self._storage.get_moving_window(key, limit + 1, window - 1)
        return count, oldest

    def _last_reservation(self, platform_user_id: str) -> float | None:
        key = _key("dm-pace", platform_user_id)
        at, count = self._storage.get_moving_window(key, 1, MAX_GAP)
        if count > 1:
            # memory:// ignores the limit and answers the oldest of the window. Reservations are at
            # least 30 s apart, so of two within 45 s the newer is the only one within 29 s.
            at, count = self._storage.get_moving_window(key, 1, MIN_GAP - 1)
        return at if count else None

    def _lost_race(self, platform_user_id: str) -> RateLimited:
        """Another reserver took the lock an instant ago; its record follows at once. Wait briefly for
        it so the answer carries the true retry_after."""
        for _ in range(_RACE_POLLS):
            state = self._state(platform_user_id)
            if state.wait > 0:
                return refusal(state.wait, state.reason)
            time.sleep(_RACE_POLL_SECONDS)
        # The winner stalled or died: nobody passes before its lock entry expires.
        at, count = self._storage.get_moving_window(_key("dm-pace-lock", platform_user_id), 1, _LOCK_WINDOW)
        return refusal(at + _LOCK_WINDOW - time.time() if count else 1, "pace")


def _key(kind: str, platform_user_id: str) -> str:
    return f"community-api/{kind}/{platform_user_id}"


def _own(reservation: object) -> _Reservation:
    if not isinstance(reservation, _Reservation):
        raise TypeError("not a reservation of this throttle")
    return reservation
