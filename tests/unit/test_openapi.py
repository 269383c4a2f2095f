"""The OpenAPI document matches the live route table: nothing missing, nothing extra, nothing Planned."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import falcon.inspect
import falcon.testing

from tests.unit.world_support import PASSWORD, Ready, World

PLANNED = re.compile(r"/(members|courses|events|leaderboard)\b|/pin$")


def live_routes(world: World) -> set[tuple[str, str]]:
    """The JSON API's routes: those under ``/v1/``, and OAuth's (registration, token, metadata). The dashboard's
    pages and the consent page (``/oauth/authorize``) are pages for a person, not part of it."""
    routes = set()
    for route in falcon.inspect.inspect_routes(world.client.app):
        if not route.path.startswith(("/v1/", "/oauth/register", "/oauth/token", "/.well-known/")):
            continue
        path = re.sub(r"\{(\w+)\}", r"{\1}", route.path)
        for method in route.methods:
            if method.internal or method.method in ("OPTIONS", "HEAD"):
                continue  # HEAD is GET without a body (RFC 9110), not an operation of its own
            routes.add((method.method, path))
    return routes


def test_document_matches_the_route_table(world: World) -> None:
    document = world.client.simulate_get("/v1/openapi.json").json
    assert document["openapi"].startswith("3.1")
    documented = {(m.upper(), path) for path, ops in document["paths"].items() for m in ops}
    assert documented == live_routes(world)


def test_every_operation_parameter_and_answer_is_described(world: World) -> None:
    """A client generated from the document (or a person reading it) learns what each thing is."""
    document = world.client.simulate_get("/v1/openapi.json").json
    undescribed: list[tuple[str, ...]] = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if not (operation.get("summary") or operation.get("description")):
                undescribed.append((method, path))
            for parameter in operation.get("parameters", []):
                if "$ref" not in parameter and not parameter.get("description"):
                    undescribed.append((method, path, parameter["name"]))
            for status, answer in operation["responses"].items():
                if "$ref" not in answer and not answer.get("description"):
                    undescribed.append((method, path, status))
    assert undescribed == []


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


def test_the_idempotency_key_says_what_each_conflict_of_a_reused_key_means(world: World) -> None:
    """A client's author reads here which 409 to retry under the same key (``details.reason``)."""
    document = world.client.simulate_get("/v1/openapi.json").json
    for path, method in [
        ("/v1/groups/{gid}/posts", "post"),
        ("/v1/posts/{post_id}/comments", "post"),
        ("/v1/dms", "post"),
    ]:
        (header,) = [p for p in document["paths"][path][method]["parameters"] if p["name"] == "Idempotency-Key"]
        for reason in ("in_progress", "different_request", "never_finished"):
            assert reason in header["description"], (path, reason)


# --- a document worth generating a client from (issue 15, item 3) ------------------------------------


def test_the_document_validates_as_openapi_3_1(world: World) -> None:
    from openapi_spec_validator import validate

    validate(world.client.simulate_get("/v1/openapi.json").json)


def test_every_operation_has_a_unique_operation_id_and_data_ones_are_the_tool_names(world: World) -> None:
    from adapters.operations import OPERATIONS

    document = world.client.simulate_get("/v1/openapi.json").json
    ids = [op["operationId"] for ops in document["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids)) and all(ids)
    for spec in OPERATIONS:
        operation = document["paths"][spec.http.path][spec.http.method.lower()]
        assert operation["operationId"] == spec.name
        assert operation["security"] == [{"apiKey": [spec.scope]}]


def test_every_parameter_and_body_field_carries_the_tools_own_limits(world: World) -> None:
    """The same ``maxLength``, ``minLength``, ``minimum``, ``maximum``, ``enum``, ``pattern`` and
    ``default`` as the MCP tool's input schema, argument by argument."""
    from adapters.operations import OPERATIONS

    document = world.client.simulate_get("/v1/openapi.json").json
    for spec in OPERATIONS:
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


def closed_objects(schema: Any, components: dict[str, Any]) -> Any:
    """``schema`` with every object that names its properties closed to others; an ``allOf`` of objects (a
    key and its usage, a key and its secret) is first made one object of all their properties."""
    if isinstance(schema, list):
        return [closed_objects(item, components) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if "allOf" in schema:
        members = [components[m["$ref"].rsplit("/", 1)[1]] if "$ref" in m else m for m in schema["allOf"]]
        schema = {
            "type": "object",
            "properties": {name: value for m in members for name, value in m["properties"].items()},
            "required": [name for m in members for name in m.get("required", [])],
        }
    made = {name: closed_objects(value, components) for name, value in schema.items()}
    if "properties" in schema:
        made["additionalProperties"] = False
    return made


def test_every_object_an_answer_holds_has_every_property_it_names(world: World) -> None:
    """The service writes every field of what it answers (null where there is none), so each answer's
    objects require all their properties: a generated client gets fields, not optional ones."""
    from adapters.operations import OPERATIONS

    document = world.client.simulate_get("/v1/openapi.json").json
    answers = [
        answer["content"]["application/json"]["schema"]
        for operations in document["paths"].values()
        for operation in operations.values()
        for status, answer in operation["responses"].items()
        if status.startswith("2") and "content" in answer and operation["tags"][0] in ("data", "account")
    ]
    components = [schema for name, schema in document["components"]["schemas"].items() if name != "Error"]
    tools = [spec.output_schema for spec in OPERATIONS]

    def objects(schema: Any) -> Iterator[dict[str, Any]]:
        if isinstance(schema, list):
            for item in schema:
                yield from objects(item)
        elif isinstance(schema, dict):
            if "properties" in schema:
                yield schema
            for value in schema.values():
                yield from objects(value)

    found = [o for o in objects(answers + components + tools) if "error" not in o["properties"]]
    loose = [sorted(set(o["properties"]) - set(o.get("required", []))) for o in found]
    assert [names for names in loose if names] == []
    assert len(found) > 30
    deleted = next(spec for spec in OPERATIONS if spec.name == "delete_post").output_schema
    assert deleted["properties"]["deleted"] == {"const": True}  # never false: a refusal is an error


def test_the_document_is_the_same_when_built_with_the_clock_frozen() -> None:
    """freezegun (which tests and a user's own tests of a client may run under) puts its own ``datetime``
    class in the model's module: the timestamps are still date-times, not a failure to build."""
    from freezegun import freeze_time

    from adapters.http.openapi import document

    expected = document()
    with freeze_time("2030-01-01"):
        assert document() == expected


def test_real_answers_match_their_documented_schemas(ready: Ready) -> None:
    """The answers of the management routes and of the data routes, as the service gives them, validate
    against the schema the document gives each (its named components resolved in the document)."""
    import jsonschema

    world = ready.world
    document = world.client.simulate_get("/v1/openapi.json").json

    def check(method: str, path: str, answer: falcon.testing.Result) -> None:
        responses = document["paths"][path][method.lower()]["responses"]
        assert str(answer.status_code) in responses, (method, path, answer.status_code, answer.text)
        schema = responses[str(answer.status_code)]["content"]["application/json"]["schema"]
        jsonschema.validate(answer.json, {**schema, "components": document["components"]})
        # And nothing in the answer that the document leaves out (a client generated from it drops it).
        components = document["components"]["schemas"]
        closed = {
            **closed_objects(schema, components),
            "components": {"schemas": closed_objects(components, components)},
        }
        jsonschema.Draft202012Validator(closed).validate(answer.json)

    headers = ready.browser.headers()
    signed = world.client.simulate_post(
        "/v1/session", json={"email": ready.browser.account["email"], "password": PASSWORD}
    )
    check("POST", "/v1/session", signed)
    check("GET", "/v1/connections", world.client.simulate_get("/v1/connections", headers=headers))
    bob = world.client.simulate_post(
        "/v1/connections", json={"email": "bob@sandbox.test", "password": "sandbox"}, headers=headers
    )
    check("POST", "/v1/connections", bob)
    activated = world.client.simulate_post(f"/v1/connections/{bob.json['id']}/activate", headers=headers)
    check("POST", "/v1/connections/{connection_id}/activate", activated)
    minted = world.client.simulate_post("/v1/keys", json={"name": "typed"}, headers=headers)
    check("POST", "/v1/keys", minted)
    rotated = world.client.simulate_post(f"/v1/keys/{minted.json['id']}/rotate", headers=headers)
    check("POST", "/v1/keys/{key_id}/rotate", rotated)
    world.get("/v1/whoami", ready.key)  # usage, so that /v1/me shows figures
    check("GET", "/v1/me", world.client.simulate_get("/v1/me", headers=headers))
    feed = world.get("/v1/groups/builders-club/posts", ready.key, params={"pages": "2"})
    check("GET", "/v1/groups/{gid}/posts", feed)
    post_id = feed.json["posts"][0]["id"]
    check("GET", "/v1/posts/{post_id}", world.get(f"/v1/posts/{post_id}", ready.key))
    check("GET", "/v1/dms", world.get("/v1/dms", ready.key))
    check("GET", "/v1/groups", world.get("/v1/groups", ready.key))
    check("GET", "/v1/whoami", world.get("/v1/whoami", ready.key))


def test_management_bodies_carry_the_cores_limits(world: World) -> None:
    from community_api import accounts, keys
    from community_api.readable import READABLE_PATTERN
    from community_api.scopes import ALL_SCOPES

    document = world.client.simulate_get("/v1/openapi.json").json

    def body(path: str) -> dict[str, dict[str, Any]]:
        content = document["paths"][path]["post"]["requestBody"]["content"]["application/json"]
        return dict(content["schema"]["properties"])

    password = body("/v1/accounts")["password"]
    assert password["minLength"] == accounts.MIN_PASSWORD and password["maxLength"] == accounts.MAX_PASSWORD
    assert body("/v1/me/password")["newPassword"] == password
    assert body("/v1/keys")["name"]["maxLength"] == keys.MAX_NAME_LENGTH
    assert body("/v1/keys")["scopes"]["items"]["enum"] == list(ALL_SCOPES)
    assert body("/v1/keys")["scopes"]["minItems"] == 1  # an empty list is refused
    assert body("/v1/keys")["name"]["pattern"] == READABLE_PATTERN  # no control characters, no bidi overrides
    assert body("/v1/accounts")["email"]["format"] == "email"
    # What the core refuses, the document refuses: one character too short is a 400.
    short = world.client.simulate_post(
        "/v1/accounts", json={"email": "new@example.com", "password": "x" * (accounts.MIN_PASSWORD - 1)}
    )
    assert short.status_code == 400


def test_a_body_the_document_calls_required_is_refused_when_missing_and_only_then(world: World) -> None:
    """A generated client leaves out an optional body; the service must then act, and refuse a request
    without a body that the document requires."""
    document = world.client.simulate_get("/v1/openapi.json").json
    browser = world.sign_up()
    checked = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            body = operation.get("requestBody", {})
            if "application/json" not in body.get("content", {}):
                continue  # OAuth's form bodies
            if any("apiKey" in rule for rule in operation.get("security", [])):
                continue  # the data routes: their bodies are checked with the tools' (test_commands.py)
            answer = world.client.simulate_request(method.upper(), path, headers=browser.headers())
            refused = answer.status_code == 400
            assert refused is body["required"], (method, path, answer.status_code, answer.text)
            checked.append((method, path))
    assert ("post", "/v1/keys") in checked and ("delete", "/v1/me") in checked and len(checked) >= 6


def test_the_document_names_the_csrf_header_wherever_the_service_requires_it(world: World) -> None:
    """A web-session request that changes something must echo the session's CSRF token (the ``csrfToken``
    that signing in answers) in ``X-CSRF-Token``. A client written from the document sends it only if the
    document names it: it is a required header of exactly the operations that refuse a request without it."""
    document = world.client.simulate_get("/v1/openapi.json").json
    browser = world.sign_up()
    cookie_only = {"Cookie": f"cda_session={browser.cookie}"}
    seen = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if operation.get("security") != [{"webSession": []}]:
                continue
            named = [p for p in operation.get("parameters", []) if p["in"] == "header" and p["name"] == "X-CSRF-Token"]
            assert all(p["required"] and "csrfToken" in p["description"] for p in named), (method, path)
            url = re.sub(r"\{(\w+)\}", "nothing", path)
            answer = world.client.simulate_request(method.upper(), url, headers=cookie_only)
            refused = answer.status_code == 403 and "X-CSRF-Token" in answer.json["error"]["message"]
            assert refused is bool(named), (method, path, answer.status_code, answer.text)
            seen.append((method, path, refused))
    assert ("delete", "/v1/keys/{key_id}", True) in seen and ("get", "/v1/me", False) in seen
    assert "X-CSRF-Token" in document["components"]["securitySchemes"]["webSession"]["description"]
    # Its shape: the token signing in answered fits it; two joined by a comma (the header sent twice, 400) do not.
    import jsonschema

    (csrf,) = [p for p in document["paths"]["/v1/keys"]["post"]["parameters"] if p["name"] == "X-CSRF-Token"]
    shape = jsonschema.Draft202012Validator(csrf["schema"])
    assert shape.is_valid(browser.csrf) and not shape.is_valid(f"{browser.csrf},{browser.csrf}")


def test_client_registration_is_described_by_the_fields_the_service_reads(world: World) -> None:
    """RFC 7591 metadata is described beside the registry: its fields are ``ClientMetadata``'s, by RFC names."""
    import attrs

    from community_api.oauth_clients import ClientMetadata

    document = world.client.simulate_get("/v1/openapi.json").json
    body = document["paths"]["/oauth/register"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    fields = attrs.fields(ClientMetadata)
    assert set(body["properties"]) == {field.name for field in fields}
    assert body["required"] == [field.name for field in fields if field.default is attrs.NOTHING]


def test_oauth_requests_the_service_refuses_are_ones_the_document_refuses(world: World) -> None:
    """A client that checks its request against the document is not surprised: what each grant needs, and
    what registration's lists must hold, are in the schemas."""
    import jsonschema

    document = world.client.simulate_get("/v1/openapi.json").json

    def schema(path: str, media: str) -> jsonschema.Draft202012Validator:
        content = document["paths"][path]["post"]["requestBody"]["content"][media]
        return jsonschema.Draft202012Validator(content["schema"])

    token = schema("/oauth/token", "application/x-www-form-urlencoded")
    code = {"grant_type": "authorization_code", "client_id": "c", "code": "x", "redirect_uri": "https://a/cb"}
    assert token.is_valid({**code, "code_verifier": "v" * 43})
    assert not token.is_valid(code)  # no PKCE verifier
    assert token.is_valid({"grant_type": "refresh_token", "client_id": "c", "refresh_token": "r"})
    assert not token.is_valid({"grant_type": "refresh_token", "client_id": "c"})
    register = schema("/oauth/register", "application/json")
    uris = {"redirect_uris": ["https://agent.example/cb"]}
    assert register.is_valid({**uris, "grant_types": ["authorization_code", "refresh_token"], "software_id": "x"})
    assert not register.is_valid({**uris, "grant_types": []})
    assert not register.is_valid({**uris, "response_types": [""]})


def test_every_link_names_something_its_target_finds(ready: Ready) -> None:
    """Each OpenAPI link, followed as a client would: run the operation, read the linked value from its real
    answer by the link's JSON pointer, and call the target with it. A read target answers 200, a comment
    or a post the account made can be deleted (204)."""
    from adapters.operations import OPERATIONS

    world, key = ready.world, ready.key
    document = world.client.simulate_get("/v1/openapi.json").json
    by_name = {spec.name: spec for spec in OPERATIONS}
    post = world.post("/v1/groups/builders-club/posts", key, {"title": "Linked"}).json
    comment = world.post(f"/v1/posts/{post['id']}/comments", key, {"content": "linked"}).json
    bob = world.gateway.user("bob")
    answers = {
        "list_groups": world.get("/v1/groups", key).json,
        "get_group": world.get("/v1/groups/builders-club", key).json,
        "get_feed": world.get("/v1/groups/builders-club/posts", key).json,
        "create_post": post,
        "get_post": world.get(f"/v1/posts/{post['id']}", key).json,
        "list_comments": world.get(f"/v1/posts/{post['id']}/comments", key).json,
        "create_comment": comment,
        "list_dms": world.get("/v1/dms", key).json,
        "send_dm": world.post("/v1/dms", key, {"to": bob.id, "content": "hi"}, params={"group": "builders-club"}).json,
    }
    answers["get_dm_thread"] = world.get(f"/v1/dms/{answers['send_dm']['conversation']['id']}", key).json
    followed = 0
    for spec in OPERATIONS:
        response = document["paths"][spec.http.path][spec.http.method.lower()]["responses"][str(spec.http.status)]
        for target_name, link in response.get("links", {}).items():
            target = by_name[link["operationId"]]
            path = target.http.path
            for field, expression in link["parameters"].items():
                pointer = expression.removeprefix("$response.body#")
                value: object = answers[spec.name]
                for step in pointer.strip("/").split("/"):
                    value = value[int(step)] if isinstance(value, list) else value[step]  # type: ignore[index]
                assert isinstance(value, str) and value, (spec.name, target_name, pointer)
                path = path.replace("{" + field + "}", value)
            if target.http.method == "GET":
                assert world.get(path, key).status_code == 200, (spec.name, target_name, path)
            followed += 1
    assert followed >= 20
    # The links that end something, on what the account made: they name it rightly.
    assert world.delete(f"/v1/comments/{comment['id']}", key).status_code == 204
    assert world.delete(f"/v1/posts/{post['id']}", key).status_code == 204


def test_each_answer_links_to_every_operation_it_names_the_path_of_and_to_no_other(world: World) -> None:
    """The whole map: a link per operation whose path fields all come from the answer; none to an operation
    that takes no path field (every answer would link to it), none from an operation to itself."""
    document = world.client.simulate_get("/v1/openapi.json").json
    links = {
        operation["operationId"]: sorted(answer["links"])
        for operations in document["paths"].values()
        for operation in operations.values()
        for answer in operation["responses"].values()
        if "links" in answer
    }
    assert links == {
        "list_groups": ["create_post", "get_feed", "get_group"],
        "get_group": ["create_post", "get_feed"],
        "get_feed": ["create_comment", "delete_post", "get_post", "list_comments"],
        "create_post": ["create_comment", "delete_post", "get_post", "list_comments"],
        "get_post": ["create_comment", "delete_comment", "delete_post", "list_comments"],
        "list_comments": ["delete_comment"],
        "create_comment": ["delete_comment"],
        "list_dms": ["get_dm_thread"],
        "send_dm": ["get_dm_thread"],
    }


def test_a_data_argument_is_required_in_the_document_exactly_when_the_tool_requires_it(world: World) -> None:
    """What a generated client makes a required argument: each path field, and each query parameter, header
    or body field the MCP tool requires; every other one optional. A body, where there is one, is sent."""
    from adapters.operations import OPERATIONS

    document = world.client.simulate_get("/v1/openapi.json").json
    for spec in OPERATIONS:
        operation = document["paths"][spec.http.path][spec.http.method.lower()]
        required = set(spec.input_schema.get("required", []))
        places = {arg: place for arg, place in spec.http.where.items()} | {
            "idempotencyKey": ("header", "Idempotency-Key")
        }
        documented = {(p["in"], p["name"]): p["required"] for p in operation["parameters"]}
        body = operation.get("requestBody")
        fields = body["content"]["application/json"]["schema"] if body else {"properties": {}, "required": []}
        for arg in spec.input_schema["properties"]:
            if arg in fields["properties"]:
                assert (arg in fields["required"]) is (arg in required), (spec.name, arg)
                continue
            where, name = places.get(arg, ("query", arg))
            assert documented[(where, name)] is (where == "path" or arg in required), (spec.name, arg)
        assert body is None or body["required"] is True, spec.name
    feed = document["paths"]["/v1/groups/{gid}/posts"]
    assert feed["post"]["requestBody"]["content"]["application/json"]["schema"]["required"] == ["title"]
    assert {p["name"]: p["required"] for p in feed["get"]["parameters"]}["gid"] is True


def test_a_dm_body_the_service_refuses_for_its_recipients_is_one_the_document_refuses(ready: Ready) -> None:
    """Exactly one of ``to`` and ``conversationId``: the service's rule, in the body's schema."""
    import jsonschema

    world = ready.world
    document = world.client.simulate_get("/v1/openapi.json").json
    schema = document["paths"]["/v1/dms"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    one = "0123456789abcdef0123456789abcdef"
    for body in ({"content": "hi"}, {"to": one, "conversationId": one, "content": "hi"}):
        assert world.post("/v1/dms", ready.key, body).status_code == 400
        assert not jsonschema.Draft202012Validator(schema).is_valid(body), body
    assert jsonschema.Draft202012Validator(schema).is_valid({"to": one, "content": "hi"})


def test_every_data_operation_documents_the_503_and_the_errors_details(world: World) -> None:
    """A client may rely on what the document promises: a 503 from any data operation, and an error that
    always has its code, message and details (the service's refusals always carry all three), a retryAfter
    of at least one second."""
    import jsonschema

    from adapters.operations import OPERATIONS

    document = world.client.simulate_get("/v1/openapi.json").json
    for spec in OPERATIONS:
        answers = document["paths"][spec.http.path][spec.http.method.lower()]["responses"]
        assert answers["503"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}
    error = {"$ref": "#/components/schemas/Error", "components": document["components"]}
    valid = jsonschema.Draft202012Validator(error)
    assert valid.is_valid({"error": {"code": "rate_limited", "message": "wait", "details": {"retryAfter": 1}}})
    for answer in (
        {},
        {"error": {"code": "rate_limited", "message": "wait"}},
        {"error": {"code": "rate_limited", "message": "wait", "details": {"retryAfter": 0}}},
    ):
        assert not valid.is_valid(answer), answer


def test_every_429_the_service_answers_is_documented_with_its_retry_after(world: World) -> None:
    """A generated client learns from the document that it may be told to wait, and where the wait is: each
    data operation and each management route with a limit documents 429 with a ``Retry-After`` header, and
    the 429s the service gives (the read pace, the sign-in guard, the password asked again) are those."""
    import jsonschema

    from tests.unit.world_support import build_world

    document = world.client.simulate_get("/v1/openapi.json").json
    limited = {
        (method.upper(), path)
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        if "429" in operation["responses"]
    }
    data = {
        (method.upper(), path)
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        if operation.get("tags") == ["data"]
    }
    assert len(data) == 13 and data <= limited
    assert limited - data == {
        ("POST", "/v1/accounts"),
        ("POST", "/v1/session"),
        ("POST", "/v1/connections"),
        ("DELETE", "/v1/me"),
        ("POST", "/v1/me/password"),
    }

    def documented(method: str, path: str, answer: falcon.testing.Result) -> None:
        assert answer.status_code == 429, (method, path, answer.text)
        described = document["paths"][path][method.lower()]["responses"]["429"]
        header = described["headers"]["Retry-After"]
        assert header["required"] and int(answer.headers["Retry-After"]) >= header["schema"]["minimum"]
        schema = described["content"]["application/json"]["schema"]
        jsonschema.validate(answer.json, {**schema, "components": document["components"]})
        assert int(answer.headers["Retry-After"]) == answer.json["error"]["details"]["retryAfter"]

    slow = build_world(reads_per_minute=1)
    browser = slow.sign_up()
    slow.link(browser)
    key = slow.mint(browser, scopes=["groups:read"])["secret"]
    answers = [slow.get("/v1/whoami", key) for _ in range(3)]
    documented("GET", "/v1/whoami", answers[-1])
    for guess in range(5):
        slow.client.simulate_delete("/v1/me", headers=browser.headers(), json={"password": f"guess {guess}"})
    held = slow.client.simulate_delete("/v1/me", headers=browser.headers(), json={"password": PASSWORD})
    documented("DELETE", "/v1/me", held)
    for guess in range(5):
        slow.client.simulate_post("/v1/session", json={"email": "owner@example.com", "password": f"guess {guess}"})
    documented(
        "POST",
        "/v1/session",
        slow.client.simulate_post("/v1/session", json={"email": "owner@example.com", "password": PASSWORD}),
    )


def test_refusals_validate_against_the_documented_error_and_its_details(ready: Ready) -> None:
    """The error details a client may act on (``field``, ``parameter``, ``fields``, ``unknown``, ``allowed``,
    ``requiredScope``…) are named in the Error schema with their types, and the service's refusals of each
    kind validate against it."""
    import jsonschema

    world = ready.world
    document = world.client.simulate_get("/v1/openapi.json").json
    error = {"$ref": "#/components/schemas/Error", "components": document["components"]}
    details = document["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["details"]
    assert {"field", "parameter", "fields", "unknown", "allowed", "reason", "retryAfter", "requiredScope"} <= set(
        details["properties"]
    )
    feed = "/v1/groups/builders-club/posts"
    reader = world.mint(ready.browser, scopes=["groups:read"])["secret"]
    refusals = {
        "unknown field": world.post(feed, ready.key, {"title": "x", "titel": "y"}),
        "unknown parameter": world.get(feed, ready.key, query_string="page=2"),
        "bad parameter": world.get(feed, ready.key, query_string="pages=99"),
        "fields combined": world.post("/v1/dms", ready.key, {"content": "hi"}),
        "missing scope": world.get(feed, reader),
        "unknown label": world.post(feed, ready.key, {"title": "x", "label": "no such label"}),
        "unknown scope": world.client.simulate_post(
            "/v1/keys", json={"scopes": ["root"]}, headers=ready.browser.headers()
        ),
    }
    for kind, answer in refusals.items():
        assert 400 <= answer.status_code < 500, (kind, answer.text)
        jsonschema.validate(answer.json, error)
        assert set(answer.json["error"]["details"]) & set(details["properties"]), kind  # a documented member


def test_the_services_own_ids_have_the_shape_the_document_gives_them(ready: Ready) -> None:
    """A key's and a connection's id, as the service answers them, match the document's patterns; what the
    service refuses in ``X-Community-Connection`` (another shape: 404; the header sent twice, two ids joined
    by a comma: 400) the document refuses too, so a client checking its request is not surprised."""
    import jsonschema

    world = ready.world
    document = world.client.simulate_get("/v1/openapi.json").json

    def schema_of(path: str, method: str, name: str) -> jsonschema.Draft202012Validator:
        (found,) = [p for p in document["paths"][path][method]["parameters"] if p["name"] == name]
        return jsonschema.Draft202012Validator(found["schema"])

    header = schema_of("/v1/whoami", "get", "X-Community-Connection")
    connection_id = ready.connection["id"]
    key_id = world.mint(ready.browser, scopes=["groups:read"])["id"]
    assert schema_of("/v1/connections/{connection_id}", "delete", "connection_id").is_valid(connection_id)
    assert schema_of("/v1/keys/{key_id}", "delete", "key_id").is_valid(key_id)
    assert not schema_of("/v1/keys/{key_id}", "delete", "key_id").is_valid(connection_id)
    assert header.is_valid(connection_id) and header.is_valid("")  # blank is the header not sent
    answers = {
        connection_id: 200,
        "": 200,
        key_id: 404,
        "B": 404,
        f"{connection_id},{connection_id}": 400,
        f"{connection_id}, con_AAAAAAAAAAAAAAAA": 400,
    }
    for value, status in answers.items():
        answer = world.get("/v1/whoami", ready.key, headers={"X-Community-Connection": value})
        assert answer.status_code == status, (value, answer.text)
        assert header.is_valid(value) == (status == 200), value
    # On /v1/mcp the header is read by each tool call (a not_found tool error there): a notification is taken
    # whatever it holds, so the document gives it no pattern.
    notification = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    headers = {"Authorization": f"Bearer {ready.key}", "X-Community-Connection": "B", "Accept": "application/json"}
    assert world.client.simulate_post("/v1/mcp", json=notification, headers=headers).status_code == 202
    assert schema_of("/v1/mcp", "post", "X-Community-Connection").is_valid("B")


def test_each_management_route_asks_for_the_credentials_the_document_names(ready: Ready) -> None:
    """Called with none: a route the document secures with the web session or a key answers 401, one it
    secures with nothing answers without asking (a generated client sends what the document says)."""
    world = ready.world
    document = world.client.simulate_get("/v1/openapi.json").json
    key_id = world.client.simulate_get("/v1/me", headers=ready.browser.headers()).json["keys"][0]["id"]
    ids = {"{key_id}": key_id, "{connection_id}": ready.connection["id"]}
    asked: dict[str, list[str]] = {"webSession": [], "apiKey": [], "none": []}
    for path, operations in document["paths"].items():
        if not path.startswith("/v1/"):
            continue  # OAuth's, with security [] and tested in test_oauth_flow.py
        for method, operation in operations.items():
            if operation.get("tags") == ["data"]:
                continue
            target = path
            for name, value in ids.items():
                target = target.replace(name, value)
            answer = world.client.simulate_request(method.upper(), target, json={})
            schemes = [name for rule in operation["security"] for name in rule] or ["none"]
            assert len(schemes) == 1, (method, path, schemes)
            assert (answer.status_code == 401) is (schemes[0] != "none"), (method, path, answer.status_code)
            asked[schemes[0]].append(operation["operationId"])
    assert "sign_out" in asked["webSession"] and "get_me" in asked["webSession"]
    assert sorted(asked["none"]) == ["create_account", "get_openapi", "sign_in"]
    assert asked["apiKey"] == ["mcp"]


def test_management_answers_are_typed_and_rotation_documents_its_grace(world: World) -> None:
    """Every answer with a body is a schema a client can type (not a bare object), but the document's own;
    rotating documents ``grace`` with the core's choices; deleting the account requires its password."""
    from community_api import keys

    document = world.client.simulate_get("/v1/openapi.json").json
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for status, answer in operation["responses"].items():
                schema = answer.get("content", {}).get("application/json", {}).get("schema")
                if status.startswith("2") and schema is not None and path != "/v1/openapi.json":
                    assert schema != {"type": "object"}, (method, path, status)
    rotate = document["paths"]["/v1/keys/{key_id}/rotate"]["post"]
    grace = {p["name"]: p for p in rotate["parameters"]}["grace"]
    assert (grace["in"], grace["required"]) == ("query", False)
    assert grace["schema"]["enum"] == list(keys.GRACE_CHOICES) and grace["schema"]["default"] == "24h"
    deletion = document["paths"]["/v1/me"]["delete"]["requestBody"]["content"]["application/json"]["schema"]
    assert deletion["required"] == ["password"]
    browser = world.sign_up()
    refused = world.client.simulate_delete("/v1/me", json={}, headers=browser.headers())
    assert refused.status_code in (400, 403), refused.text
    assert world.client.simulate_get("/v1/me", headers=browser.headers()).status_code == 200  # still there
