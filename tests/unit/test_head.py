"""HEAD on every GET route answers as GET does, without the body (RFC 9110 §9.3.2): uptime monitors and
load balancers check a service with HEAD, and every route answered it 405 before."""

from __future__ import annotations

from typing import Any

import falcon.inspect
import pytest

from tests.unit.world_support import Ready

# One concrete path for each kind of GET route: the public ones, the data API, the management API, a page.
PATHS = [
    "/healthz",
    "/readyz",
    "/v1/openapi.json",
    "/.well-known/oauth-authorization-server",
    "/v1/whoami",
    "/v1/groups/builders-club/posts?pages=2",
    "/v1/dms",
    "/v1/me",
    "/v1/connections",
    "/",
    "/login",
    "/keys",
    "/v1/posts/00000000000000000000000000000000",  # not found: a 404 answers HEAD the same way
    "/v1/groups/builders-club/posts?pages=99",  # refused: 400 as for GET
]


def _headers(ready: Ready, path: str) -> dict[str, str]:
    if path.startswith("/v1/") and not path.startswith(("/v1/me", "/v1/connections", "/v1/openapi")):
        return {"Authorization": f"Bearer {ready.key}"}
    return ready.browser.headers()


def _comparable(headers: Any) -> dict[str, str]:
    # The request id differs per request; the rest (type, length, caching, security headers) must not.
    return {name: value for name, value in headers.items() if name not in ("x-request-id", "set-cookie")}


@pytest.mark.parametrize("path", PATHS)
def test_head_answers_as_get_without_the_body(ready: Ready, path: str) -> None:
    client = ready.world.client
    got = client.simulate_get(path, headers=_headers(ready, path))
    head = client.simulate_head(path, headers=_headers(ready, path))
    assert head.status_code == got.status_code != 405
    assert head.content == b""
    assert _comparable(head.headers) == _comparable(got.headers)
    if got.content:
        assert head.headers["content-length"] == str(len(got.content))


def test_every_route_that_takes_get_takes_head(ready: Ready) -> None:
    without = [
        route.path
        for route in falcon.inspect.inspect_routes(ready.world.client.app)
        for methods in [{m.method: m for m in route.methods}]
        if "GET" in methods and not methods["GET"].internal and methods["HEAD"].internal
    ]
    assert without == []


def test_head_where_get_is_not_allowed_is_not_allowed(ready: Ready) -> None:
    answer = ready.world.client.simulate_head("/v1/mcp", headers={"Authorization": f"Bearer {ready.key}"})
    assert answer.status_code == 405
    assert "HEAD" not in answer.headers["allow"]
