"""The collaborators every use case may need, built once by the composition root (``adapters/wiring``)
and by the tests with fakes (cosmicpython's bootstrap)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager

import attrs
from argon2 import PasswordHasher

from community_api import platform_meter
from community_api.errors import ConnectionExpired, RateLimited, ServiceError
from community_api.in_flight import InFlight
from community_api.in_flight import linking as in_flight_linking
from community_api.model import CONNECTION_EXPIRED, AuditEvent, Connection
from community_api.platform_meter import PlatformMeter
from community_api.ports import Clock, KeyStore, PlatformGateway, PlatformPace, Throttle
from community_api.refusal_audit import RefusalAudit
from community_api.sign_in_guard import DeviceCookies
from community_api.usage import UsageRecorder


@attrs.define
class Deps:
    store: KeyStore
    gateway: PlatformGateway
    throttle: Throttle
    pace: PlatformPace
    clock: Clock
    usage: UsageRecorder
    password_hasher: PasswordHasher = attrs.field(factory=PasswordHasher)
    # Signs the device cookies of sign-in (``sign_in_guard``); the composition root derives its key from
    # the service secret, so every worker accepts the others' cookies.
    device_cookies: DeviceCookies = attrs.field(factory=lambda: DeviceCookies(secrets.token_bytes(32)))
    # Refused key and token uses reach the audit at a bounded rate (``refusal_audit``): one per process.
    refusals: RefusalAudit = attrs.field(factory=RefusalAudit)
    # Platform calls in progress per connection in this process, and their bound (``in_flight``).
    in_flight: InFlight = attrs.field(factory=InFlight)
    # Link attempts (a sign-in on the platform, in a browser) in progress per service account in this process.
    linking: InFlight = attrs.field(factory=in_flight_linking)


# What one use-case step is admitted for by the pace before it calls the platform, in platform requests
# (PLATFORM.md, "Rates seen by others"); any request past these is counted as the gateway sends it
# (``platform_meter``). Most steps are one request; a feed costs one per page, a post with its comments two (its
# comments and its page, which marks it read), a DM thread two. Writes count against the write pace: a
# post, a comment, a deletion or a DM is one; a DM to a member opens the conversation first, a second.
ONE_READ = 1
GROUP_READS = 2  # the group, and its labels (a list of groups: one, then one per group as it goes)
POST_DETAIL_READS = 2
THREAD_READS = 2  # the thread, and the first inbox page beside it (the conversation's details)
ONE_WRITE = 1
OPEN_AND_SEND_WRITES = 2  # the chat request that opens (or finds) the conversation, and the message
OUR_PACE = ("read_pace", "write_pace")


def _mark_expired(deps: Deps, connection: Connection) -> None:
    """The connection's platform session ended: mark it, and write one audit line when it turns so (the
    account's Account page then says why its keys answer ``connection_expired``). Calls that met the end
    at once write one line between them; a connection unlinked meanwhile is left alone."""
    with deps.store.unit_of_work() as uow:
        current = uow.connections.get_connection(connection.id)
        if current is None or current.status == CONNECTION_EXPIRED:
            return
        uow.connections.set_connection_status(connection.id, CONNECTION_EXPIRED)
        event = AuditEvent(
            at=deps.clock.now(),
            event="connection.expired",
            account_id=connection.account_id,
            subject=connection.id,
            detail=connection.handle,
        )
        uow.audit.add_audit(event)
        uow.commit()


@contextmanager
def on_platform(
    deps: Deps, connection: Connection, *, reads: int = 0, writes: int = 0, counted: int = 0
) -> Iterator[PlatformMeter]:
    """The one way the core calls the platform through a connection.

    - first: a connection that already has ``in_flight.MAX_CALLS_IN_FLIGHT`` calls in progress in this
      process is refused (429, reason ``busy``): they run one at a time, and a call waiting its turn holds
      a thread that every other request of the service needs;
    - before: ``deps.pace.admit`` refuses (429) a platform account the platform told to slow down, or
      one whose reads (or writes) would pass the pace, without touching the platform. The pace counts the platform
      account (its user id), not the connection: the platform counts by account, and one account may be
      linked by several service accounts;
    - during: the call's meter (``platform_meter``) counts each request the gateway sends; those past the
      ``reads`` and ``writes`` admitted before are admitted by the pace as they go, or refused (429) unsent;
    - ``counted``: requests of the same kind that earlier steps of the same client request sent (a feed
      read in batches): a refusal then waits for the whole request, which a retry sends again, and the
      whole request counts at most the limit (``PlatformPace.admit``);
    - a 429 of the platform holds that platform account for its ``Retry-After`` in every worker;
    - when the platform says the session expired, the connection (its own session) is marked so that the
      next request answers ``connection_expired`` at once and the dashboard shows it."""
    with deps.in_flight.call(connection.id):
        deps.pace.admit(connection.platform_user_id, reads, writes, counted=counted)
        meter = PlatformMeter(deps.pace, connection.platform_user_id, reads, writes)
        if counted:  # the meter's own refusals wait for the whole request too
            meter.earlier_reads, meter.earlier_writes = (counted, 0) if reads else (0, counted)
        token = platform_meter.current.set(meter)  # (not ``metered``: one context manager less per call)
        try:
            yield meter
        except ServiceError as error:
            # A request the pace refused mid-call was never sent: that refusal is ours, as one before it.
            error.via_platform = not (isinstance(error, RateLimited) and error.details.get("reason") in OUR_PACE)
            if isinstance(error, RateLimited) and error.details.get("source") == "platform":
                deps.pace.hold(connection.platform_user_id, error.retry_after)
            elif isinstance(error, ConnectionExpired):
                _mark_expired(deps, connection)
                error.details.setdefault("connectionId", connection.id)
            raise
        finally:
            platform_meter.current.reset(token)
