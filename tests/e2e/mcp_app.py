"""The app with the MCP endpoint, for the MCP tests: ``build_app`` for in-process tests on fakes,
``get_app()`` for gunicorn (a real SQLite key store, the in-memory platform).

``get_app`` reads ``COMMUNITY_API_*`` as usual; the tests mint keys into the same SQLite file before
gunicorn starts. Each worker holds its own in-memory platform; the key store and the throttle are
shared.
"""

from __future__ import annotations

from typing import Any

import falcon

from adapters.mcp import McpResource, add_mcp_route
from adapters.mcp.endpoint import PATH
from adapters.settings import Settings, load_settings
from adapters.store.sqlite_key_store import SqliteKeyStore
from adapters.throttle.limits_platform_pace import LimitsPlatformPace
from adapters.throttle.limits_throttle import LimitsThrottle
from adapters.wiring import app_for, bootstrap
from community_api.clock import SystemClock
from community_api.ports import Clock, KeyStore, PlatformGateway, PlatformPace, Throttle
from fakes.platform import FakePlatformGateway


def build_app(
    *,
    key_store: KeyStore,
    gateway: PlatformGateway,
    throttle: Throttle,
    pace: PlatformPace,
    clock: Clock,
    settings: Settings,
) -> tuple[falcon.App, McpResource]:
    """What ``create_app`` builds, with ``/v1/mcp`` mounted, and the MCP resource (to stop its loop thread).

    Mounts the endpoint itself only while the composition root does not yet, so these tests run both
    before and after ``adapters/wiring.py`` takes the route over.
    """
    deps = bootstrap(key_store=key_store, gateway=gateway, throttle=throttle, pace=pace, clock=clock, settings=settings)
    app = app_for(deps, settings)
    found: Any = app._router.find(PATH)
    resource = found[0] if found is not None else add_mcp_route(app, deps, settings)
    return app, resource


def get_app() -> falcon.App:
    settings = load_settings()
    clock = SystemClock()
    app, _ = build_app(
        key_store=SqliteKeyStore(settings.db, settings.secret),
        # Signed session tokens: every worker's copy of the platform accepts the test's linked session.
        gateway=FakePlatformGateway(clock=clock, seed=1, signing_key=settings.secret.encode()),
        throttle=LimitsThrottle(settings.throttle_uri, salt=settings.secret),
        pace=LimitsPlatformPace(
            settings.throttle_uri, settings.platform_reads_per_minute, settings.platform_writes_per_minute
        ),
        clock=clock,
        settings=settings,
    )
    return app
