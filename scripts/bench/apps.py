"""The apps the benchmarks compare, each served by gunicorn with the same settings."""

from __future__ import annotations

import gc
from collections.abc import Iterable
from pathlib import Path

import falcon

from adapters.http.request_log import configure_logging
from adapters.settings import load_settings
from adapters.store.sqlite_key_store import SqliteKeyStore
from adapters.throttle.limits_platform_pace import LimitsPlatformPace
from adapters.throttle.limits_throttle import LimitsThrottle
from adapters.wiring import create_app
from community_api.clock import SystemClock
from community_api.connections import LinkRequest, link_connection
from community_api.deps import Deps
from community_api.keys import mint_key
from community_api.model import Account, ReadPace, WritePace
from community_api.usage import UsageRecorder
from fakes.clock import FakeClock
from fakes.platform import FakePlatformGateway
from fakes.platform_pace import FakePlatformPace
from fakes.throttle import FakeThrottle


class _Bare:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"id": "usr-alice", "handle": "alice", "name": "Alice Andersen"}


def bare_app() -> falcon.App:
    """A Falcon route that does nothing but answer: the floor of any route."""
    app = falcon.App()
    app.add_route("/v1/whoami", _Bare())
    gc.freeze()  # as get_app() does: the same process settings for both
    return app


class Unpaced:
    """A read pace that admits everything: for the MCP-vs-REST bench, where one key reads thousands of times
    a second (past any pace's limit) and the pace costs both transports the same. A control, not a product:
    ``make bench`` measures the real pace."""

    def admit(self, connection_id: str, reads: int, writes: int = 0, *, counted: int = 0) -> None:
        return None

    def hold(self, connection_id: str, seconds: int) -> None:
        return None

    def status(self, connection_id: str) -> ReadPace:
        return ReadPace(reads_per_minute=0, reads_last_minute=0, reads_left=0, next_read_at=None, held_until=None)

    def write_status(self, connection_id: str) -> WritePace:
        return WritePace(writes_per_minute=0, writes_last_minute=0, writes_left=0, next_write_at=None)

    def ready(self) -> str | None:
        return None


def service_app(paced: bool = True) -> falcon.App:
    """The real service (SQLite key store, usage accounting on, the default throttle storage, metrics
    counted, one JSON log line per request) with the in-memory platform, so the figure measures our
    overhead and not the platform's. ``paced`` False: the read pace out of the way (``Unpaced``)."""
    settings = load_settings()
    configure_logging()  # as get_app() does
    pace = (
        LimitsPlatformPace(
            settings.throttle_uri, settings.platform_reads_per_minute, settings.platform_writes_per_minute
        )
        if paced
        else Unpaced()
    )
    app = create_app(
        key_store=SqliteKeyStore(settings.db, settings.secret),
        gateway=FakePlatformGateway(signing_key=settings.secret.encode()),
        throttle=LimitsThrottle(settings.throttle_uri, salt=settings.secret),
        pace=pace,
        clock=SystemClock(),
        settings=settings,
    )
    gc.freeze()  # as get_app() does
    return app


def prepare_database(db: Path, secret: str, scopes: Iterable[str] | None = None) -> str:
    """An account, alice linked and a key (``scopes``; None: the default read scopes), written to the
    database the service will read. Answers the key."""
    return prepare_keys(db, secret, scopes, count=1)[0]


def prepare_keys(db: Path, secret: str, scopes: Iterable[str] | None, count: int) -> list[str]:
    """``count`` accounts, each with a platform member of its own linked (the read pace counts a platform
    account, so each has a pace of its own, as ``count`` different users would) and a key. Answers the
    keys."""
    store = SqliteKeyStore(str(db), secret)
    clock = SystemClock()
    gateway = FakePlatformGateway(signing_key=secret.encode())
    members = list(gateway.world.users.values())
    if count > len(members):
        raise ValueError(f"the in-memory platform has {len(members)} members: at most that many keys")
    deps = Deps(
        store=store,
        gateway=gateway,
        throttle=FakeThrottle(FakeClock()),
        pace=FakePlatformPace(clock),
        clock=clock,
        usage=UsageRecorder(store, clock),
    )
    keys = []
    for n in range(count):
        account = Account(id=f"acc_bench_{n}", email=f"bench{n}@example.com", created_at=clock.now())
        store.add_account(account, "not-a-real-hash")
        link_connection(deps, account.id, LinkRequest(email=members[n].email, password=members[n].password))
        keys.append(
            mint_key(store, clock, account_id=account.id, name="bench", scopes=scopes, connection_id=None).secret
        )
    # Closed, as after `community-api` commands: the service then starts on a database nobody holds open, as
    # it does in production (a connection left open here once hid the workers' start without a WAL header).
    store.close()
    return keys
