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


# --- a document worth generating a client from (issue 15, item 3) ------------------------------------


def test_the_document_validates_as_openapi_3_1(world: World) -> None:
    from openapi_spec_validator import validate

    validate(world.client.simulate_get("/v1/openapi.json").json)


def test_every_operation_has_a_unique_operation_id_and_data_ones_are_the_tool_names(world: World) -> None:
    from adapters.mcp.tools import TOOLS

    document = world.client.simulate_get("/v1/openapi.json").json
    ids = [op["operationId"] for ops in document["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids)) and all(ids)
    for spec in TOOLS:
        operation = document["paths"][spec.http.path][spec.http.method.lower()]
        assert operation["operationId"] == spec.name
        assert operation["security"] == [{"apiKey": [spec.scope]}]


def test_every_parameter_and_body_field_carries_the_tools_own_limits(world: World) -> None:
    """The same ``maxLength``, ``minLength``, ``minimum``, ``maximum``, ``enum``, ``pattern`` and
    ``default`` as the MCP tool's input schema, argument by argument."""
    from adapters.mcp.tools import TOOLS

    document = world.client.simulate_get("/v1/openapi.json").json
    for spec in TOOLS:
        operation = document["paths"][spec.http.path][spec.http.method.lower()]
        rest_name = {arg: name for arg, (_, name) in spec.http.where.items()} | {"idempotencyKey": "Idempotency-Key"}
        params = {p["name"]: p["schema"] for p in operation["parameters"]}
        body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
        fields = body.get("properties", {})
        for arg, schema in spec.input_schema["properties"].items():
            limits = {k: v for k, v in schema.items() if k != "description"}
            documented = params.get(rest_name.get(arg, arg), fields.get(arg))
            assert documented is not None, (spec.name, arg)
            assert {k: v for k, v in documented.items() if k != "description"} == limits, (spec.name, arg)
        if fields:
            assert body["additionalProperties"] is False
    title = document["paths"]["/v1/groups/{gid}/posts"]["post"]["requestBody"]["content"]["application/json"]
    assert title["schema"]["properties"]["title"]["maxLength"] == 300


def test_answers_are_named_components_shared_by_every_operation(world: World) -> None:
    document = world.client.simulate_get("/v1/openapi.json").json
    schemas = document["components"]["schemas"]
    for name in ("Post", "Comment", "Group", "Label", "Conversation", "Message", "PlatformUser", "Error"):
        assert name in schemas, name

    def answer(path: str, method: str = "get") -> dict[str, object]:
        responses = document["paths"][path][method]["responses"]
        status = next(code for code in responses if code != "default")
        return dict(responses[status]["content"]["application/json"]["schema"])

    assert answer("/v1/groups/{gid}/posts") == {"$ref": "#/components/schemas/FeedPage"}
    assert answer("/v1/posts/{post_id}") == {"$ref": "#/components/schemas/PostDetail"}
    assert schemas["FeedPage"]["properties"]["posts"]["items"] == {"$ref": "#/components/schemas/Post"}
    assert schemas["PostDetail"]["properties"]["post"] == {"$ref": "#/components/schemas/Post"}
    assert answer("/v1/groups/{gid}/posts", "post") == {"$ref": "#/components/schemas/Post"}
    assert schemas["Group"]["properties"]["labels"]["items"] == {"$ref": "#/components/schemas/Label"}
    assert "content" not in document["paths"]["/v1/posts/{post_id}"]["delete"]["responses"]["204"]
