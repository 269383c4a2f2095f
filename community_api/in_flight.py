"""How many platform calls each connection has in progress in this process, and the bound on them.

Calls through one connection run one at a time (the gateway serialises them on the connection's browser
session: a page runs one script at a time). Calls past the first used to wait their turn, each holding one
of the worker's few threads while it waited: sixteen requests sent at once through one connection, with
the platform taking 3 s a call, were answered one pair at a time over 33 s (a pair: one browser in each
of two workers), and meanwhile every other request to the service waited for a thread: ``/healthz`` 5 s,
``/v1/openapi.json`` 18 s, whoever sent them. Waiting longer gains the caller nothing: the calls cannot run
any sooner.

So a connection may have ``MAX_CALLS_IN_FLIGHT`` calls in progress in a process, the one running and two
waiting their turn, so that a worker's threads are not all one connection's. One more may wait up to
``BUSY_WAIT_SECONDS`` for one of them to end (an agent that asks for several posts at once, the platform
answering in a tenth of a second, gets them all); it is refused after that wait, and any other call of
the connection at once while one is waiting: 429 ``rate_limited`` with ``details.reason`` ``busy`` and
``Retry-After: 1``, before the read pace counts it and before anything reaches the platform (a DM's quota
is given back, an Idempotency-Key released: a retry may act). The count is per worker process: with two
workers a connection has up to six calls in progress, two of them running.

The same bound, one at a time and no wait, holds link attempts per service account (``linking``).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

from community_api.errors import RateLimited

MAX_CALLS_IN_FLIGHT = 3
# How long one more call waits for one of those to end before it is refused: long enough for the calls of
# an agent that asks for several things at once while the platform answers quickly (a tenth of a second
# each), short enough that a burst on a slow platform frees its threads at once (the calls queued behind
# it for a thread each wait this long in turn).
BUSY_WAIT_SECONDS = 0.25
BUSY_RETRY_AFTER = 1


class InFlight:
    """Per-connection counts of calls in progress (thread-safe; one instance per process, in ``Deps``)."""

    def __init__(
        self,
        limit: int = MAX_CALLS_IN_FLIGHT,
        wait: float = BUSY_WAIT_SECONDS,
        on_refusal: Callable[[], None] | None = None,
        refusal: Callable[[int], RateLimited] | None = None,
    ) -> None:
        """``on_refusal`` is told of each refusal (the composition root counts them for /metrics);
        ``refusal`` makes the error from the limit (by default the words for a connection's calls)."""
        if limit < 1:
            raise ValueError("a connection needs room for at least one call")
        self._limit = limit
        self._wait = wait
        self._on_refusal = on_refusal
        self._refusal = refusal or _calls_refusal
        self._changed = threading.Condition()
        self._counts: dict[str, int] = {}
        self._waiting: set[str] = set()  # connections with a call waiting for a place (one at most)

    @contextlib.contextmanager
    def call(self, connection_id: str) -> Iterator[None]:
        """Count one call through ``connection_id`` while the block runs; when ``limit`` are in progress,
        wait up to ``wait`` seconds for one to end, then refuse (``RateLimited``, reason ``busy``)."""
        with self._changed:
            if not self._has_room(connection_id) and not self._wait_for_room(connection_id):
                if self._on_refusal is not None:
                    self._on_refusal()
                raise self._refusal(self._limit)
            self._counts[connection_id] = self._counts.get(connection_id, 0) + 1
        try:
            yield
        finally:
            with self._changed:
                left = self._counts[connection_id] - 1
                if left:
                    self._counts[connection_id] = left
                else:
                    del self._counts[connection_id]
                self._changed.notify_all()

    def _has_room(self, connection_id: str) -> bool:
        return self._counts.get(connection_id, 0) < self._limit

    def _wait_for_room(self, connection_id: str) -> bool:
        """Wait (the condition held) for a place, if no other call of the connection is waiting already:
        one waiter holds one more thread for at most ``wait``; a crowd of them would hold them all."""
        if connection_id in self._waiting:
            return False
        self._waiting.add(connection_id)
        try:
            return self._changed.wait_for(lambda: self._has_room(connection_id), self._wait)
        finally:
            self._waiting.discard(connection_id)

    def count(self, connection_id: str) -> int:
        with self._changed:
            return self._counts.get(connection_id, 0)


def _calls_refusal(limit: int) -> RateLimited:
    return RateLimited(
        f"this connected account already has {limit} calls in progress (they run one at a time): send the next"
        " when one has answered",
        retry_after=BUSY_RETRY_AFTER,
        reason="busy",
    )


# Linking a platform account signs in with a browser of the pool's own for up to twice the gateway's time-out:
# one account's attempts sent at once would hold every browser of a worker, and every other account's
# platform calls would wait or fail ("no browser is free") meanwhile. A person links one account at a time.
LINKS_IN_FLIGHT = 1
LINK_RETRY_AFTER = 5


def link_refusal(limit: int) -> RateLimited:
    return RateLimited(
        "a link of a platform account is already in progress for this account: wait for it to finish",
        retry_after=LINK_RETRY_AFTER,
        reason="busy",
    )


def linking() -> InFlight:
    """The bound on link attempts in progress per service account in this process."""
    return InFlight(limit=LINKS_IN_FLIGHT, wait=0.0, refusal=link_refusal)
