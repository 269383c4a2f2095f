"""``create_app(seed)``: the stand-in platform as one Falcon WSGI app.

Routes: the www host at ``/`` (``pages.py``), the api2 host at ``/api2/`` (``api2.py``), the firewall
challenge at ``/__fw/challenge`` and the control API at ``/__sandbox/`` (``control.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import falcon

from scripts.sandbox import api2, pages
from scripts.sandbox.control import Control
from scripts.sandbox.firewall import (
    CHALLENGE_PATH,
    ChallengeResource,
    FaultMiddleware,
    FirewallMiddleware,
    RequestLogMiddleware,
)
from scripts.sandbox.state import DAY, ApiError, Sandbox
from scripts.sandbox.web import api_error, not_found


def create_app(
    seed: int = 1,
    *,
    clock: Callable[[], float] = time.time,
    firewall_ttl: float = DAY,
    session_ttl: float = 365 * DAY,
    sandbox: Sandbox | None = None,
) -> falcon.App:
    sb = sandbox or Sandbox(seed, clock=clock, firewall_ttl=firewall_ttl, session_ttl=session_ttl)
    # The log sees every request; then faults, then the firewall.
    middleware: list[Any] = [RequestLogMiddleware(sb), FaultMiddleware(sb), FirewallMiddleware(sb)]
    app = falcon.App(middleware=middleware, cors_enable=False)
    app.req_options.auto_parse_qs_csv = False
    app.req_options.strip_url_path_trailing_slash = True
    app.add_error_handler(ApiError, api_error)
    app.add_error_handler(falcon.HTTPNotFound, not_found)
    app.add_error_handler(falcon.HTTPRouteNotFound, not_found)
    app.add_route(CHALLENGE_PATH, ChallengeResource(sb))
    app.add_route("/__sandbox/{action}", Control(sb))
    api2.add_routes(app, sb)
    pages.add_routes(app, sb)
    return app
