"""The OpenAPI document matches the live route table: nothing missing, nothing extra, nothing Planned."""

from __future__ import annotations

import re

import falcon.inspect

from tests.unit.world_support import World

PLANNED = re.compile(r"/(members|courses|events|leaderboard)\b|/pin$")


def live_routes(world: World) -> set[tuple[str, str]]:
    """The JSON API's routes: those under ``/v1/`` (the dashboard and OAuth pages are not part of it)."""
    routes = set()
    for route in falcon.inspect.inspect_routes(world.client.app):
        if not route.path.startswith("/v1/"):
            continue
        path = re.sub(r"\{(\w+)\}", r"{\1}", route.path)
        for method in route.methods:
            if method.internal or method.method == "OPTIONS":
                continue
            routes.add((method.method, path))
    return routes


def test_document_matches_the_route_table(world: World) -> None:
    document = world.client.simulate_get("/v1/openapi.json").json
    assert document["openapi"].startswith("3.1")
    documented = {(m.upper(), path) for path, ops in document["paths"].items() for m in ops}
    assert documented == live_routes(world)


def test_no_planned_route_is_live_or_documented(world: World) -> None:
    document = world.client.simulate_get("/v1/openapi.json").json
    assert not [p for p in document["paths"] if PLANNED.search(p)]
    assert not [p for _, p in live_routes(world) if PLANNED.search(p)]
    assert "patch" not in document["paths"]["/v1/posts/{post_id}"]


def test_feed_parameters_carry_the_spec_constraints(world: World) -> None:
    document = world.client.simulate_get("/v1/openapi.json").json
    params = {p["name"]: p["schema"] for p in document["paths"]["/v1/groups/{gid}/posts"]["get"]["parameters"]}
    assert params["pages"]["minimum"] == 1 and params["pages"]["maximum"] == 30
    assert len(params["sort"]["enum"]) == 8 and params["sort"]["default"] == "newest"
    assert re.fullmatch(params["since"]["pattern"].strip("^$"), "2026-01-31")
