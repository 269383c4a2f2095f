"""``GET /v1/me``: the account, its connections, its keys with their usage, and the DM quota."""

from __future__ import annotations

import attrs

from community_api.deps import Deps
from community_api.model import Account, ApiKey, Connection, DmQuota, PlatformUser, ReadPace, WritePace


@attrs.frozen
class KeyWithUsage:
    key: ApiKey
    requests_today: int
    requests_total: int


@attrs.frozen
class Usage:
    requests_today: int
    requests_this_month: int
    dms: DmQuota | None
    platform_reads: ReadPace | None  # the active connection's read pace and any hold the platform asked for
    platform_writes: WritePace | None  # its write pace (posts, comments, deletions, DMs)


@attrs.frozen
class Me:
    account: Account
    whoami: PlatformUser | None
    connections: tuple[Connection, ...]
    keys: tuple[KeyWithUsage, ...]
    usage: Usage


def me(deps: Deps, account: Account) -> Me:
    """``whoami`` is the active connection's platform account as recorded when it was linked (no
    platform call); ``usage.dms`` is the DM quota of that connection, ``usage.platformReads`` its read pace
    (reads left this minute, and any hold the platform's 429 put on it), ``usage.platformWrites`` its
    write pace."""
    connections = deps.store.list_connections(account.id)
    active = next((c for c in connections if c.active), None)
    keys: list[KeyWithUsage] = []
    today = month = 0
    for key in deps.store.list_keys(account.id):
        usage = deps.usage.usage(key.id)
        keys.append(KeyWithUsage(key, usage.requests_today, usage.requests_total))
        today += usage.requests_today
        month += usage.requests_this_month
    return Me(
        account=account,
        whoami=PlatformUser(active.platform_user_id, active.handle, active.name) if active else None,
        connections=tuple(connections),
        keys=tuple(keys),
        usage=Usage(
            today,
            month,
            deps.throttle.quota(active.platform_user_id) if active else None,
            deps.pace.status(active.platform_user_id) if active else None,
            deps.pace.write_status(active.platform_user_id) if active else None,
        ),
    )
