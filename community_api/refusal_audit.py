"""Refused credential uses in the audit table, at a rate no stranger can drive.

Every refused use of a well-formed API key or OAuth access token is audited (DESIGN §2). But the shape
of a key is public (``cda_`` + 43 base62 characters + a CRC-32 anyone can compute), so anyone can send
well-formed keys that name nothing at the wire's speed, and one audit row per request let a single client
with no credentials write about 3 GB an hour into the database (measured: 3,164 refused requests a
second, 9.5 MB in 10 s), each write taking the database's write lock from everyone else.

So refusals are written by *bucket*, at most one row per bucket per window (a minute) in each worker:

- a known key or token refused (revoked, expired, another resource) is its own bucket: its owner's trail
  shows, to the minute, that the dead credential is still in use; a flood of one never hides another;
- every use of a value that names nothing shares one bucket per event, whatever its prefix.

Uses refused while their bucket is quiet are counted, and the bucket's next row says how many
(``"unknown; 3163 more since the previous line"``). So the table grows by at most (buckets × workers) rows
a minute, and still accounts for every refused use up to the last row of each bucket.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from datetime import datetime, timedelta
from typing import Protocol

import attrs

from community_api.model import AuditEvent


class AuditWriter(Protocol):
    """All ``record`` needs of the audit trail (``store_ports.AuditLog`` is one): it only appends."""

    def add_audit(self, event: AuditEvent) -> None: ...


WINDOW = timedelta(minutes=1)
MAX_BUCKETS = 10_000


@attrs.define
class _Bucket:
    written_at: datetime
    unwritten: int = 0


class RefusalAudit:
    """Writes refused uses through ``record``, one row per bucket per ``window``. Thread-safe: one per
    worker process, shared by its threads. Past ``max_buckets`` the longest-quiet bucket is forgotten
    (with its count of unwritten uses); a known credential's bucket comes back at its next use."""

    def __init__(self, window: timedelta = WINDOW, max_buckets: int = MAX_BUCKETS) -> None:
        self._window = window
        self._max_buckets = max_buckets
        self._buckets: OrderedDict[tuple[str, ...], _Bucket] = OrderedDict()
        self._lock = threading.Lock()

    def record(self, audit: AuditWriter, event: AuditEvent) -> bool:
        """Write ``event`` (a refusal) unless its bucket wrote one less than a window ago; answers whether
        it was written. The bucket is the event with its key id, or, for a value that names no key, the
        event alone."""
        bucket = (event.event, event.key_id or "", event.detail or "") if event.key_id else (event.event,)
        with self._lock:
            held = self._buckets.get(bucket)
            if held is not None and event.at - held.written_at < self._window:
                held.unwritten += 1
                return False
            unwritten = held.unwritten if held is not None else 0
            self._buckets[bucket] = _Bucket(written_at=event.at)
            self._buckets.move_to_end(bucket)
            while len(self._buckets) > self._max_buckets:
                self._buckets.popitem(last=False)
        if unwritten:
            event = attrs.evolve(event, detail=f"{event.detail}; {unwritten} more since the previous line")
        audit.add_audit(event)
        return True
