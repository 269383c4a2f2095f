"""How many platform calls each connection has in progress in this process, and the bound on them.

Calls through one connection run one at a time (the gateway serialises them on the connection's browser
session: a page runs one script at a time). Calls past the first used to wait their turn, each holding one
of the worker's few threads while it waited: sixteen requests sent at once through one connection, with
the platform taking 3 s a call, were answered one pair at a time over 33 s (a pair: one browser in each
of two workers), and meanwhile every other request to the service waited for a thread: ``/healthz`` 5 s,
``/v1/openapi.json`` 18 s, whoever sent them. Waiting longer gains the caller nothing: the calls cannot run
any sooner.

So a connection may have ``MAX_CALLS_IN_FLIGHT`` calls in progress in a process, the one running and two
waiting their turn (an agent that calls a few tools at once is served; a worker's four threads are never
all one connection's); one more is refused at once, 429 ``rate_limited`` with ``details.reason`` ``busy`` and
``Retry-After: 1``, before the read pace counts it and before anything reaches the platform (a DM's quota
is given back, an Idempotency-Key released: a retry may act). The count is per worker process: with two
workers a connection has up to six calls in progress, two of them running.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

from community_api.errors import RateLimited

MAX_CALLS_IN_FLIGHT = 3
BUSY_RETRY_AFTER = 1


class InFlight:
    """Per-connection counts of calls in progress (thread-safe; one instance per process, in ``Deps``)."""

    def __init__(self, limit: int = MAX_CALLS_IN_FLIGHT, on_refusal: Callable[[], None] | None = None) -> None:
        """``on_refusal`` is told of each refusal (the composition root counts them for /metrics)."""
        if limit < 1:
            raise ValueError("a connection needs room for at least one call")
        self._limit = limit
        self._on_refusal = on_refusal
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}

    @contextlib.contextmanager
    def call(self, connection_id: str) -> Iterator[None]:
        """Count one call through ``connection_id`` while the block runs, or refuse it (``RateLimited``)."""
        with self._lock:
            count = self._counts.get(connection_id, 0)
            if count >= self._limit:
                if self._on_refusal is not None:
                    self._on_refusal()
                raise RateLimited(
                    f"this connected account already has {count} calls in progress (they run one at a time):"
                    " send the next when one has answered",
                    retry_after=BUSY_RETRY_AFTER,
                    reason="busy",
                )
            self._counts[connection_id] = count + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._counts[connection_id] - 1
                if left:
                    self._counts[connection_id] = left
                else:
                    del self._counts[connection_id]

    def count(self, connection_id: str) -> int:
        with self._lock:
            return self._counts.get(connection_id, 0)
