"""What the dashboard shows beyond ``GET /v1/me``: each key's state in words, and usage per key and per
connection. Built on ``me.me`` and the same ports, so the pages and the JSON API cannot disagree.

Rules:
- a key is *live*, *in grace* (rotated; works until ``expires_at``), *expired* or *revoked*;
- usage per key: requests today, this month and in all (UTC days and months);
- the DM quota is shown for every connection, with the time of its next allowed send (None: now).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import attrs

from community_api.deps import Deps
from community_api.me import Me, me
from community_api.model import Account, ApiKey, Connection, DmQuota, ReadPace, WritePace
from community_api.ports import KeyStore

LIVE = "live"
IN_GRACE = "in grace"
EXPIRED = "expired"
REVOKED = "revoked"


@attrs.frozen
class KeyState:
    state: str  # LIVE, IN_GRACE, EXPIRED or REVOKED
    remaining: timedelta | None  # in grace: how long the key keeps working


def key_state(key: ApiKey, now: datetime) -> KeyState:
    if key.revoked_at is not None:
        return KeyState(REVOKED, None)
    if key.expires_at is None:
        return KeyState(LIVE, None)
    if now < key.expires_at:
        return KeyState(IN_GRACE, key.expires_at - now)
    return KeyState(EXPIRED, None)


@attrs.frozen
class KeyUsageRow:
    key: ApiKey
    state: KeyState
    requests_today: int
    requests_this_month: int
    requests_total: int


@attrs.frozen
class ConnectionQuota:
    connection: Connection
    quota: DmQuota
    reads: ReadPace
    writes: WritePace


@attrs.frozen
class UsageReport:
    me: Me
    keys: tuple[KeyUsageRow, ...]
    quotas: tuple[ConnectionQuota, ...]


def usage_report(deps: Deps, account: Account) -> UsageReport:
    """``me.me`` (account totals, keys, connections) with each key's month and every connection's quota."""
    summary = me(deps, account)
    now = deps.clock.now()
    rows = []
    for item in summary.keys:
        usage = deps.usage.usage(item.key.id)
        rows.append(
            KeyUsageRow(
                item.key,
                key_state(item.key, now),
                usage.requests_today,
                usage.requests_this_month,
                usage.requests_total,
            )
        )
    quotas = tuple(
        ConnectionQuota(
            c,
            deps.throttle.quota(c.platform_user_id),
            deps.pace.status(c.platform_user_id),
            deps.pace.write_status(c.platform_user_id),
        )
        for c in summary.connections
    )
    return UsageReport(summary, tuple(rows), quotas)


def signup_open(store: KeyStore, signup_enabled: bool) -> bool:
    """Whether to offer the sign-up form: the rule of ``accounts.create_account``, which stays the
    authority (a sign-up it refuses is refused whatever this says)."""
    return signup_enabled or store.count_accounts() == 0
