"""Every request a platform call sends, counted against the pace before it is sent.

Why: the pace (``PlatformPace``) keeps a connected account under the rates at which the platform answers
429 and restricts accounts, but a use-case step does not know how many requests the gateway will need: a
list of groups is one request for the list and one per group for its labels (PLATFORM.md, "Groups");
a post given without its group may be looked for in each of the account's groups; a DM to a member first
reads both members' groups; a 5xx on a read is asked again. Counting only the step let a loop over
``list_groups`` make twenty requests for each one it counted.

So ``deps.on_platform`` admits the step's known cost before the call (refused without touching the
platform), and opens a meter for the call. The gateway calls ``spend`` before each request it sends: what
the step already paid is used first, and any request past it is admitted by the pace then, refused with the
same 429 (``read_pace``/``write_pace``, exact ``Retry-After``) before it is sent. A call refused half-way
has sent only what the pace admitted; a write step's checks (reads) come before its write, so a refused
check sends no write.

The meter is per thread of execution (a ``ContextVar``): a gateway call runs on the thread that serves its
request. Outside any ``on_platform`` (signing in, adopting a session, start-up checks) ``spend`` counts
nothing: those are not a connected account's calls.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import attrs

from community_api.ports import PlatformPace


@attrs.define
class PlatformMeter:
    pace: PlatformPace
    platform_user_id: str
    reads_paid: int  # admitted by the step before the call, not yet sent
    writes_paid: int
    reads_sent: int = 0
    writes_sent: int = 0
    # Counted by earlier steps of the same client request (``on_platform``'s ``counted``): a retry sends
    # them again, so a refusal waits for them too.
    earlier_reads: int = 0
    earlier_writes: int = 0

    @property
    def reads_counted(self) -> int:
        """The reads this call holds in the pace's window: admitted before it, or sent since."""
        return self.reads_sent + self.reads_paid

    def spend(self, reads: int, writes: int) -> None:
        extra_reads = max(0, reads - self.reads_paid)
        extra_writes = max(0, writes - self.writes_paid)
        # Admitted before anything is counted as sent: a refusal leaves the meter as it was. What the call
        # counted so far goes along: the call as a whole counts at most the limit (so a call larger than
        # the limit can pass), and a refusal's Retry-After is the wait for the whole call again.
        if extra_reads:
            self.pace.admit(self.platform_user_id, extra_reads, counted=self.earlier_reads + self.reads_counted)
        if extra_writes:
            counted = self.earlier_writes + self.writes_sent + self.writes_paid
            self.pace.admit(self.platform_user_id, 0, extra_writes, counted=counted)
        self.reads_paid -= reads - extra_reads
        self.writes_paid -= writes - extra_writes
        self.reads_sent += reads
        self.writes_sent += writes


current: ContextVar[PlatformMeter | None] = ContextVar("platform_meter", default=None)


@contextmanager
def metered(pace: PlatformPace, platform_user_id: str, *, reads: int, writes: int) -> Iterator[PlatformMeter]:
    """Run a platform call with ``reads`` and ``writes`` already admitted by the pace."""
    meter = PlatformMeter(pace, platform_user_id, reads_paid=reads, writes_paid=writes)
    token = current.set(meter)
    try:
        yield meter
    finally:
        current.reset(token)


def spend(*, reads: int = 0, writes: int = 0) -> None:
    """Count requests about to be sent to the platform; ``RateLimited`` when the pace refuses them (then
    they must not be sent). Called by the gateway before each request (or batch of requests) it sends."""
    if reads < 0 or writes < 0:
        raise ValueError("requests are counted from 0")
    meter = current.get()
    if meter is not None and (reads or writes):
        meter.spend(reads, writes)
