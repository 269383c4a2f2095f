"""The sandbox's mutable state: the seeded world, sessions, firewall tokens, faults, anti-spam, read-outs.

One ``Sandbox`` per process; every request takes ``sandbox.lock`` (re-entrant) around what it reads or
changes, since gunicorn serves it from several threads of one worker process.

Choices worth knowing:
- ``reset`` rebuilds the world (same seed as at start-up unless one is given), clears faults, read-outs
  (``created``, ``sent``, ``requests``),
  anti-spam state and flags, and restores the seed's build id. It keeps the signing key and the expiry
  marks, so a browser signed in before a reset stays signed in (the fixed users keep their ids).
- Time comes from ``clock`` (``time.time`` by default); tests may pass their own.
- ``changes`` counts the changes to the world (posts, comments, read state, DMs, build id, a reset) and the
  control actions: whatever changes the world calls ``changed()`` while it holds the lock. Rendered feed
  answers are cached (``pages``) under keys that include it, so none outlives a change.
"""

from __future__ import annotations

import collections
import re
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from scripts.sandbox.model import US, User, World
from scripts.sandbox.pagecache import PageCache
from scripts.sandbox.seed import build_world
from scripts.sandbox.tokens import Signer

DAY = 86400.0
REQUEST_LOG_SIZE = 20_000


class ApiError(Exception):
    """An api2 refusal: answered as ``{"message": ...}`` with ``status``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(slots=True)
class AntiSpam:
    enabled: bool = True
    min_gap_seconds: float = 20.0
    per_hour: int = 25


@dataclass(slots=True)
class FaultRule:
    """Latency (``ms``) or failures (``status``, ``remaining``) for paths matching ``route``.

    ``route`` starting with ``^`` is a regular expression (``re.search`` on the path), otherwise a prefix.
    ``status`` 0 means hang: hold the request ``hang_seconds`` (or until faults are cleared), then 504.
    """

    route: str
    ms: int = 0
    status: int | None = None
    remaining: int = 0
    hang_seconds: float = 60.0
    retry_after: str | None = None  # the Retry-After header of the failure, as the platform would send it
    message: str | None = None  # an api2 failure's ``{"message"}`` (None: the status's phrase)
    _regex: re.Pattern[str] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._regex = re.compile(self.route) if self.route.startswith("^") else None

    def matches(self, path: str) -> bool:
        return bool(self._regex.search(path)) if self._regex else path.startswith(self.route)

    def describe(self) -> dict[str, object]:
        return {k: v for k, v in asdict(self).items() if not k.startswith("_")}


class Sandbox:
    def __init__(
        self,
        seed: int = 1,
        clock: Callable[[], float] = time.time,
        firewall_ttl: float = DAY,
        session_ttl: float = 365 * DAY,
    ) -> None:
        self.lock = threading.RLock()
        self.clock = clock
        self.signer = Signer()
        self.initial_seed = seed
        self.firewall_ttl = firewall_ttl
        self.session_ttl = session_ttl
        self.session_floor: dict[str, int] = {}  # user id -> first session serial still valid
        self.firewall_floor = 0
        self.release_hangs = threading.Event()
        self.changes = 0
        self.pages = PageCache()
        self.reset(seed)

    # -- lifecycle -------------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> None:
        with self.lock:
            self.world: World = build_world(self.initial_seed if seed is None else seed, self.now_us())
            self.created: list[dict[str, object]] = []  # posts and comments made through api2
            self.sent: list[dict[str, object]] = []  # DMs sent through api2
            # Every request served (but the control API's), oldest first, so tests can prove a call reached
            # its own route only; bounded, the oldest dropped first.
            self.requests: collections.deque[dict[str, object]] = collections.deque(maxlen=REQUEST_LOG_SIZE)
            self.flagged: set[str] = set()
            self.dm_times: dict[str, list[float]] = {}
            self.antispam = AntiSpam()
            self.clear_faults()
            self.changed()

    def changed(self) -> None:
        """Call after any change to the world or the sandbox's settings, in the same hold of ``lock`` as the
        change (else a request could find a page rendered before the change in between): no page cached
        before it is served again."""
        with self.lock:
            self.changes += 1
            self.pages.clear()

    def clear_faults(self) -> None:
        with self.lock:
            self.faults: list[FaultRule] = []
            self.release_hangs.set()  # wake requests held by a "hang" fault
            self.release_hangs = threading.Event()

    def now(self) -> float:
        return self.clock()

    def now_us(self) -> int:
        return int(self.clock() * US)

    # -- sessions and the firewall ---------------------------------------------------------------
    def issue_session(self, user: User) -> str:
        with self.lock:
            return self.signer.session(user.id, self.now(), self.session_ttl)

    def session_user(self, token: str | None) -> User | None:
        """The signed-in user, or None for a missing, forged, expired or revoked session."""
        if not token:
            return None
        with self.lock:
            claims = self.signer.check_session(token)
            if claims is None or claims.exp <= self.now():
                return None
            if claims.serial < self.session_floor.get(claims.user_id, 0):
                return None
            return self.world.users.get(claims.user_id)

    def expire_sessions(self, user: User) -> None:
        with self.lock:
            self.session_floor[user.id] = self.signer.peek_serial

    def issue_firewall(self) -> tuple[str, int]:
        with self.lock:
            return self.signer.firewall(self.now(), self.firewall_ttl)

    def firewall_ok(self, token: str | None) -> bool:
        if not token:
            return False
        with self.lock:
            checked = self.signer.check_firewall(token)
            return checked is not None and checked[0] > self.now() and checked[1] >= self.firewall_floor

    def expire_firewall(self) -> None:
        with self.lock:
            self.firewall_floor = self.signer.peek_serial

    # -- faults ----------------------------------------------------------------------------------
    def add_fault(self, rule: FaultRule) -> None:
        with self.lock:
            self.faults.append(rule)

    def faults_for(self, path: str) -> tuple[int, FaultRule | None]:
        """Total latency (ms) for ``path`` and the failure to answer with, if one is due (it is used up)."""
        with self.lock:
            delay, failure = 0, None
            for rule in self.faults:
                if not rule.matches(path):
                    continue
                delay += rule.ms
                if failure is None and rule.status is not None and rule.remaining > 0:
                    rule.remaining -= 1
                    failure = rule
            return delay, failure

    # -- anti-spam -------------------------------------------------------------------------------
    def check_dm_allowed(self, user: User) -> None:
        """Refuse a DM the platform's anti-spam would refuse; a refusal flags the account."""
        with self.lock:
            if user.id in self.flagged:
                raise ApiError(403, "account restricted")
            if not self.antispam.enabled:
                return
            now = self.now()
            times = [t for t in self.dm_times.get(user.id, []) if now - t < 3600]
            self.dm_times[user.id] = times
            too_soon = bool(times) and now - times[-1] < self.antispam.min_gap_seconds
            if too_soon or len(times) >= self.antispam.per_hour:
                self.flagged.add(user.id)
                raise ApiError(429, "slow down")

    def record_dm(self, user: User) -> None:
        with self.lock:
            self.dm_times.setdefault(user.id, []).append(self.now())
