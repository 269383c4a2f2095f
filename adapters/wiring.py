"""The composition root: the only module that knows every adapter.

``create_app`` builds the WSGI app from ports and stays pure (tests call it with fakes);
``get_app`` reads the settings and builds the real adapters (gunicorn runs ``adapters.wiring:get_app()``).
"""

from __future__ import annotations

import atexit
import gc
import logging
from typing import Any, cast

import falcon
from argon2 import PasswordHasher
from argon2.profiles import CHEAPEST

from adapters.http import errors
from adapters.http import management_resources as manage
from adapters.http.client_address import trusted_networks
from adapters.http.encoded_slash import NoEncodedSlashRouter
from adapters.http.health import add_health_routes
from adapters.http.host_check import AllowedHosts
from adapters.http.metrics_resource import MetricsResource
from adapters.http.no_store import NoStore
from adapters.http.nosniff import Nosniff
from adapters.http.openapi import OpenApiResource
from adapters.http.operation_resources import OperationRoute, add_operation_routes
from adapters.http.request_log import RequestLog, configure_logging
from adapters.mcp import add_mcp_route
from adapters.metrics import REFUSALS, ConnectionsCollector, MeteredGateway, MeteredPace, MeteredThrottle
from adapters.settings import Settings, load_settings
from adapters.web import add_web_routes
from adapters.web.pages import failure_page
from community_api.clock import SystemClock
from community_api.deps import Deps
from community_api.in_flight import InFlight
from community_api.ports import Clock, KeyStore, PlatformGateway, PlatformPace, Throttle
from community_api.sign_in_guard import DeviceCookies
from community_api.usage import UsageRecorder

log = logging.getLogger(__name__)


def add_rest_routes(app: falcon.App, deps: Deps, settings: Settings) -> None:
    add_operation_routes(app, deps)  # the data API, one route per entry of adapters/operations.py

    options: dict[str, Any] = {
        "signup_enabled": settings.signup,
        "secure_cookies": settings.public_url.startswith("https://"),
        "trusted_proxies": trusted_networks(settings.trusted_proxies),
    }
    app.add_route("/v1/accounts", manage.AccountsResource(deps, **options))
    app.add_route("/v1/session", manage.SessionResource(deps, **options))
    app.add_route("/v1/connections", manage.ConnectionsResource(deps, **options))
    app.add_route("/v1/connections/{connection_id}", manage.ConnectionResource(deps, **options))
    app.add_route("/v1/connections/{connection_id}/activate", manage.ConnectionActivationResource(deps, **options))
    app.add_route("/v1/keys", manage.KeysResource(deps, **options))
    app.add_route("/v1/keys/{key_id}/rotate", manage.KeyRotationResource(deps, **options))
    app.add_route("/v1/keys/{key_id}", manage.KeyResource(deps, **options))
    app.add_route("/v1/me", manage.MeResource(deps, **options))
    app.add_route("/v1/me/password", manage.PasswordResource(deps, **options))
    app.add_route("/v1/sessions", manage.SessionsResource(deps, **options))
    app.add_route("/v1/openapi.json", OpenApiResource())
    add_health_routes(app, deps)
    connections = ConnectionsCollector(deps.store, deps.clock)  # read at each scrape
    app.add_route(
        "/metrics", MetricsResource(settings.metrics_token, trusted_networks(settings.trusted_proxies), connections)
    )


def bootstrap(
    *,
    key_store: KeyStore,
    gateway: PlatformGateway,
    throttle: Throttle,
    pace: PlatformPace,
    clock: Clock,
    settings: Settings,
) -> Deps:
    """The collaborators every use case takes (tests call this with fakes)."""
    return Deps(
        store=key_store,
        # Counted for /metrics: each platform call, and each refusal of the two limits.
        gateway=cast(PlatformGateway, MeteredGateway(gateway)),
        throttle=MeteredThrottle(throttle),
        pace=MeteredPace(pace),
        clock=clock,
        usage=UsageRecorder(key_store, clock, settings.usage_flush_seconds),
        # Tests sign in hundreds of times: argon2's cheap profile there, the default everywhere else.
        password_hasher=PasswordHasher.from_parameters(CHEAPEST) if settings.mode == "test" else PasswordHasher(),
        device_cookies=DeviceCookies(settings.secret.encode()),
        in_flight=InFlight(on_refusal=REFUSALS.labels("busy").inc),
    )


def app_for(deps: Deps, settings: Settings) -> falcon.App:
    middleware: list[Any] = [
        RequestLog(),
        Nosniff(),
        AllowedHosts(settings.public_url, settings.allowed_hosts),
        NoStore(manage.ManagementResource, OperationRoute),
    ]
    app = falcon.App(media_type=falcon.MEDIA_JSON, middleware=middleware, router=NoEncodedSlashRouter())
    app.req_options.strip_url_path_trailing_slash = True
    errors.install(app, page=failure_page(settings))
    add_rest_routes(app, deps, settings)
    add_mcp_route(app, deps, settings)
    add_web_routes(app, deps, settings)
    return app


def create_app(
    *,
    key_store: KeyStore,
    gateway: PlatformGateway,
    throttle: Throttle,
    pace: PlatformPace,
    clock: Clock,
    settings: Settings,
) -> falcon.App:
    deps = bootstrap(key_store=key_store, gateway=gateway, throttle=throttle, pace=pace, clock=clock, settings=settings)
    return app_for(deps, settings)


def build_gateway(settings: Settings, key_store: KeyStore) -> PlatformGateway:
    from adapters.platform.selenium_platform_gateway import SeleniumPlatformGateway

    # A browser kept warm for a connection since unlinked (or whose account was deleted) holds the platform
    # session the store erased: the pool closes it once the store no longer knows the connection.
    return SeleniumPlatformGateway.from_settings(
        settings, linked=lambda connection_id: key_store.get_connection(connection_id) is not None
    )


def get_app(settings: Settings | None = None) -> falcon.App:
    from adapters.store.sqlite_key_store import SqliteKeyStore
    from adapters.throttle.limits_platform_pace import LimitsPlatformPace
    from adapters.throttle.limits_throttle import LimitsThrottle

    settings = settings or load_settings()
    configure_logging()
    # Opened now: a worker that cannot use the database fails to boot (gunicorn then stops) instead of
    # answering 500 to every request.
    key_store = SqliteKeyStore.open(settings.db, settings.secret, previous_secret=settings.previous_secret)
    deps = bootstrap(
        key_store=key_store,
        gateway=build_gateway(settings, key_store),
        throttle=LimitsThrottle(settings.throttle_uri, salt=settings.secret),
        pace=LimitsPlatformPace(
            settings.throttle_uri, settings.platform_reads_per_minute, settings.platform_writes_per_minute
        ),
        clock=SystemClock(),
        settings=settings,
    )
    app = app_for(deps, settings)
    atexit.register(deps.usage.close)  # a worker that stops writes the request counts it still holds
    # Everything built so far lives as long as the worker: keep it out of the garbage collector's
    # generations, so collections during requests only walk what requests allocate.
    gc.freeze()
    return app
