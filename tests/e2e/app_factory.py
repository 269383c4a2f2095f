"""An app for end-to-end tests: the real SQLite key store and limits throttle, and the in-memory platform
(each gunicorn worker holds its own copy of it; the key store and the throttle are shared).

gunicorn runs ``tests.e2e.app_factory:get_app()``; settings come from ``COMMUNITY_API_*`` as usual.
"""

from __future__ import annotations

import falcon

from adapters.settings import load_settings
from adapters.store.sqlite_key_store import SqliteKeyStore
from adapters.throttle.limits_platform_pace import LimitsPlatformPace
from adapters.throttle.limits_throttle import LimitsThrottle
from adapters.wiring import create_app
from community_api.clock import SystemClock
from fakes.platform import FakePlatformGateway

# The platform signs its sessions with a key of its own, as the real site does: every worker's copy
# accepts the others' tokens, and they stay good when the service's secret changes.
PLATFORM_SIGNING_KEY = b"the in-memory platform's own signing key"


def get_app() -> falcon.App:
    settings = load_settings()
    return create_app(
        key_store=SqliteKeyStore(settings.db, settings.secret, previous_secret=settings.previous_secret),
        gateway=FakePlatformGateway(signing_key=PLATFORM_SIGNING_KEY),
        throttle=LimitsThrottle(settings.throttle_uri, salt=settings.secret),
        pace=LimitsPlatformPace(
            settings.throttle_uri, settings.platform_reads_per_minute, settings.platform_writes_per_minute
        ),
        clock=SystemClock(),
        settings=settings,
    )
