"""``GET /healthz`` (the process answers) and ``GET /readyz`` (it can serve: the database takes a write,
the throttles' storage answers, a browser can be had). Both answer JSON without a key, are never counted
as usage, and show nothing secret; they answer whatever the Host header (a load balancer's probe may
name the machine), since nothing in them is built from it."""

from __future__ import annotations

import falcon

from adapters.http.operation_resources import send_json
from community_api.deps import Deps
from community_api.health import readiness

HEALTH_PATHS = frozenset({"/healthz", "/readyz"})


class HealthResource:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        send_json(resp, {"status": "ok"})
        resp.set_header("Cache-Control", "no-store")


class ReadyResource:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        answer = readiness(self.deps)
        send_json(
            resp,
            {"status": "ready" if answer.ready else "not_ready", "checks": answer.checks},
            200 if answer.ready else 503,
        )
        resp.set_header("Cache-Control", "no-store")


def add_health_routes(app: falcon.App, deps: Deps) -> None:
    app.add_route("/healthz", HealthResource())
    app.add_route("/readyz", ReadyResource(deps))
