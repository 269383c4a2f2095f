"""The apps the benchmarks compare, each served by gunicorn with the same settings."""

from __future__ import annotations

import gc

import falcon

from adapters.settings import load_settings
from adapters.store.sqlite_key_store import SqliteKeyStore
from adapters.throttle.limits_throttle import LimitsThrottle
from adapters.wiring import create_app
from community_api.clock import SystemClock
from tests.fakes.platform import FakePlatformGateway


class _Bare:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"id": "usr-alice", "handle": "alice", "name": "Alice Andersen"}


def bare_app() -> falcon.App:
    """A Falcon route that does nothing but answer: the floor of any route."""
    app = falcon.App()
    app.add_route("/v1/whoami", _Bare())
    gc.freeze()  # as get_app() does: the same process settings for both
    return app


def service_app() -> falcon.App:
    """The real service (SQLite key store, usage accounting on, SQLite throttle) with the in-memory
    platform, so the figure measures our overhead and not the platform's."""
    settings = load_settings()
    app = create_app(
        key_store=SqliteKeyStore(settings.db, settings.secret),
        gateway=FakePlatformGateway(signing_key=settings.secret.encode()),
        throttle=LimitsThrottle(settings.throttle_uri, salt=settings.secret),
        clock=SystemClock(),
        settings=settings,
    )
    gc.freeze()  # as get_app() does
    return app
