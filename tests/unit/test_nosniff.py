"""Every answer says ``X-Content-Type-Options: nosniff`` (``adapters/http/nosniff.py``): the data API's, the
management API's, the MCP endpoint's, the OAuth endpoints', the public documents' and the dashboard's,
refusals included. Some repeat a bit of the request (a path without a route, an unknown field's name)."""

from __future__ import annotations

import falcon.testing

from tests.unit.world_support import Ready

FEED = "/v1/groups/builders-club/posts"


def answers(ready: Ready) -> dict[str, falcon.testing.Result]:
    world, key = ready.world, ready.key
    client = world.client
    return {
        "a read": world.get("/v1/whoami", key),
        "a write": world.post(FEED, key, {"title": "Read as JSON only"}),
        "no key": client.simulate_get("/v1/whoami"),
        "an unknown field": world.post(FEED, key, {"title": "x", "<script>alert(1)</script>": 1}),
        "a path without a route": client.simulate_get("/v1/%3Cscript%3Ealert(1)%3C/script%3E"),
        "a wrong method": client.simulate_put("/v1/whoami", headers={"Authorization": f"Bearer {key}"}),
        "a body too large": world.post(FEED, key, {"title": "x" * 300_000}),
        "the management API without a session": client.simulate_get("/v1/me"),
        "the MCP endpoint without a key": client.simulate_post("/v1/mcp", json={}),
        "the OAuth metadata": client.simulate_get("/.well-known/oauth-authorization-server"),
        "the token endpoint": client.simulate_post("/oauth/token", body="grant_type=x"),
        "the OpenAPI document": client.simulate_get("/v1/openapi.json"),
        "health": client.simulate_get("/healthz"),
        "the sign-in page": client.simulate_get("/login"),
        "a HEAD": client.simulate_head("/v1/whoami", headers={"Authorization": f"Bearer {key}"}),
    }


def test_every_answer_says_nosniff(ready: Ready) -> None:
    said = answers(ready)
    for name, answer in said.items():
        assert answer.headers.get("X-Content-Type-Options") == "nosniff", (name, answer.status_code)
    assert {answer.status_code for answer in said.values()} >= {200, 201, 400, 401, 404, 405, 413}
