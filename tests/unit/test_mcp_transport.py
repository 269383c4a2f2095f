"""``/v1/mcp`` as HTTP: our authentication and error bodies around the MCP machinery, the allowed hosts,
usage counting, and the per-process loop thread that serves it."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import falcon.testing
import pytest

from adapters.mcp.endpoint import origin_allowed
from adapters.mcp.envelope import tidy
from adapters.settings import Settings
from community_api.keys import revoke_key
from tests.unit.test_mcp_world import HOST, McpWorld

LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


@pytest.fixture
def world() -> Iterator[McpWorld]:
    built = McpWorld.build()
    yield built
    built.close()


def requests_today(world: McpWorld) -> int:
    day = world.clock.now().strftime("%Y-%m-%d")
    return world.store.key_usage(world.all_key.key.id, day).requests_today


def assert_error(result: falcon.testing.Result, status: int, code: str) -> None:
    assert result.status_code == status, result.text
    assert result.headers["content-type"].startswith("application/json")
    assert result.json["error"]["code"] == code and result.json["error"]["message"]


@pytest.mark.parametrize(
    "authorization", [None, "Bearer", "Basic abc", "Bearer cda_not-a-key", "Bearer " + "cda_" + "A" * 49]
)
def test_missing_or_bad_key_is_401_before_any_mcp_code(world: McpWorld, authorization: str | None) -> None:
    headers = world.headers(None, {"Authorization": authorization} if authorization else None)
    result = world.client.simulate_post("/v1/mcp", headers=headers, body=b"not even JSON-RPC")
    assert_error(result, 401, "unauthorized")
    assert result.headers["www-authenticate"].startswith('Bearer realm="community-api", resource_metadata="')
    assert not world.resource.bridge.running  # the MCP machinery was never started


def test_revoked_key_and_key_in_the_url_are_401(world: McpWorld) -> None:
    result = world.client.simulate_post(
        "/v1/mcp", headers=world.headers(world.all_key), json=LIST, params={"key": world.read_key.secret}
    )
    assert_error(result, 401, "unauthorized")
    revoke_key(world.store, world.clock, account_id=world.account_id, key_id=world.all_key.key.id)
    assert_error(world.rpc("tools/list", key=world.all_key), 401, "unauthorized")


def test_each_mcp_request_counts_once_for_its_key_and_refusals_do_not(world: McpWorld) -> None:
    world.rpc("tools/list")
    world.call("whoami", {})
    world.call("create_post", {"group": "builders-club"})  # a tool error is still a served request
    world.client.simulate_post("/v1/mcp", headers=world.headers("cda_bad"), json=LIST)
    assert requests_today(world) == 3


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_get_and_delete_answer_405_at_once(world: McpWorld, method: str) -> None:
    for headers in (world.headers(world.all_key, {"Accept": "text/event-stream"}), {}):
        result = world.client.simulate_request(method, "/v1/mcp", headers=headers)
        assert_error(result, 405, "method_not_allowed")
        assert "POST" in result.headers["allow"]
    assert requests_today(world) == 0 and not world.resource.bridge.running


def test_unknown_host_is_refused_with_our_error_body(world: McpWorld) -> None:
    # Without a public URL the service's own host rule answers first (400); with one, the MCP endpoint's
    # DNS-rebinding protection does (421, next test).
    assert_error(world.rpc("tools/list", headers={"Host": "evil.example:8000"}), 400, "invalid_request")
    assert_error(world.rpc("tools/list", headers={"Origin": "http://evil.example"}), 403, "forbidden")
    assert world.rpc("tools/list", headers={"Origin": f"http://{HOST}"}).status_code == 200
    # Loopback names by default, written absolute too (as the REST host rule reads them); addresses have no
    # such form.
    # ``:*`` is any port, the scheme's own included: a Host or Origin on port 80 or 443 names none.
    hosts = ("localhost:8000", "localhost.:8000", "localhost", "localhost.", "127.0.0.1", "[::1]", "LocalHost:8000")
    for host in hosts:
        assert world.rpc("tools/list", headers={"Host": host}).status_code == 200, host
    for origin in ("http://localhost.:6274", "http://localhost", "https://localhost", "http://127.0.0.1"):
        assert world.rpc("tools/list", headers={"Origin": origin}).status_code == 200, origin


def test_allowed_hosts_come_from_settings() -> None:
    settings = Settings(
        mode="test", mcp_allowed_hosts=("api.example.com", "dev.example.com:*"), public_url="https://mcp.example.org"
    )
    world = McpWorld.build(settings)
    try:
        assert world.rpc("tools/list", headers={"Host": "api.example.com"}).status_code == 200
        for host in (
            "dev.example.com:8443",
            "dev.example.com",
            "dev.example.com.",
            "Dev.Example.COM",
        ):  # any port, or none
            assert world.rpc("tools/list", headers={"Host": host}).status_code == 200, host
        assert_error(world.rpc("tools/list", headers={"Host": "api.example.com:8443"}), 421, "misdirected_request")
        assert world.rpc("tools/list", headers={"Host": "mcp.example.org"}).status_code == 200
        # A name written absolute (its final dot, RFC 1034 §3.1) is the same host, as REST reads it.
        assert world.rpc("tools/list", headers={"Host": "api.example.com."}).status_code == 200
        assert world.rpc("tools/list", headers={"Host": "mcp.example.org."}).status_code == 200
        for other in (HOST, "api.example.com..", "api.example.com.evil.example", "xapi.example.com"):
            assert_error(world.rpc("tools/list", headers={"Host": other}), 421, "misdirected_request")
    finally:
        world.close()


def test_the_hosts_rest_serves_are_served_here_too() -> None:
    """Without a public URL, ``COMMUNITY_API_ALLOWED_HOSTS`` names the hosts the service serves: REST and MCP
    alike, a name alone with any port (as REST reads it), ``host:port`` on that port only."""
    settings = Settings(mode="test", allowed_hosts=("Box.LAN", "api.example.com:8443", "[2001:db8::1]"))
    world = McpWorld.build(settings)
    try:
        served = ("box.lan:8000", "box.lan", "BOX.lan.", "api.example.com:8443", "[2001:db8::1]:8000", "[2001:db8::1]")
        for host in served + ("localhost:8000",):  # the loopback defaults stay
            assert world.rpc("tools/list", headers={"Host": host}).status_code == 200, host
            assert (
                world.client.simulate_get(
                    "/v1/whoami", headers=world.headers(world.all_key, {"Host": host})
                ).status_code
                == 200
            ), host
        assert world.rpc("tools/list", headers={"Origin": "http://box.lan:8000"}).status_code == 200
        for other in ("api.example.com:8000", "api.example.com", "box.lan.evil.example"):
            assert world.rpc("tools/list", headers={"Host": other}).status_code == 400, other  # REST's rule first
    finally:
        world.close()


def test_every_loopback_host_rest_serves_is_served_here_too() -> None:
    """Without a public URL the REST host rule serves any loopback name or address; the transport's list
    names three. An agent given ``http://127.0.0.2:8000/v1/mcp`` or ``mcp.localhost`` got 421 where REST
    answered."""
    loopback = ("mcp.localhost:8000", "MCP.LocalHost", "127.0.0.2:8000", "127.1.2.3", "[::ffff:127.0.0.1]:8000")
    world = McpWorld.build(Settings(mode="test"))
    try:
        for host in loopback:
            rest = world.client.simulate_get("/v1/whoami", headers=world.headers(world.all_key, {"Host": host}))
            assert rest.status_code == 200, host
            assert world.rpc("tools/list", headers={"Host": host}).status_code == 200, host
        for other in ("localhost.evil.example:8000", "evil-localhost:8000", "10.0.0.1:8000"):
            assert world.rpc("tools/list", headers={"Host": other}).status_code == 400, other  # REST's rule
    finally:
        world.close()
    # MCP_ALLOWED_HOSTS set without the loopback names replaces them (docs/mcp.md); with a public URL
    # the REST rule is off and the list alone judges: either way only what the list names is served here.
    for settings in (
        Settings(mode="test", mcp_allowed_hosts=("127.0.0.1:8000",)),
        Settings(mode="test", mcp_allowed_hosts=("localhost:*",)),  # one loopback name: that name only
        Settings(mode="test", public_url="https://mcp.example.org"),
    ):
        world = McpWorld.build(settings)
        try:
            for host in loopback:
                assert_error(world.rpc("tools/list", headers={"Host": host}), 421, "misdirected_request")
        finally:
            world.close()


def test_names_written_in_capitals_in_the_settings_are_the_same_names() -> None:
    settings = Settings(
        mode="test", public_url="https://MCP.Example.org", mcp_allowed_origins=("https://App.Example.com",)
    )
    world = McpWorld.build(settings)
    try:
        for host in ("mcp.example.org", "MCP.EXAMPLE.ORG", "mcp.example.org."):
            assert world.rpc("tools/list", headers={"Host": host}).status_code == 200, host
        # A browser writes the origin in lower case.
        answer = world.rpc("tools/list", headers={"Host": "mcp.example.org", "Origin": "https://app.example.com"})
        assert answer.status_code == 200
    finally:
        world.close()


def test_media_type_size_and_malformed_bodies(world: McpWorld) -> None:
    headers = world.headers(world.all_key)
    text_body = world.client.simulate_post("/v1/mcp", headers={**headers, "Content-Type": "text/plain"}, body=b"{}")
    assert_error(text_body, 415, "unsupported_media_type")
    gzipped = world.client.simulate_post(
        "/v1/mcp",
        headers={**headers, "Content-Type": "application/json", "Content-Encoding": "gzip"},
        body=gzip.compress(json.dumps(LIST).encode()),
    )
    assert_error(gzipped, 415, "unsupported_media_type")
    assert gzipped.headers["accept-encoding"] == "identity"
    huge = json.dumps({**LIST, "params": {"padding": "x" * 300_000}})
    too_big = world.client.simulate_post("/v1/mcp", headers={**headers, "Content-Type": "application/json"}, body=huge)
    assert_error(too_big, 413, "payload_too_large")
    for body in (b"{not json", b"[]", b'{"jsonrpc": "2.0"}'):
        result = world.client.simulate_post(
            "/v1/mcp", headers={**headers, "Content-Type": "application/json"}, body=body
        )
        assert 400 <= result.status_code < 500 and "error" in result.json, result.text


def test_the_longest_arguments_allowed_are_taken_however_the_client_escapes_them(world: McpWorld) -> None:
    # Escaped as json.dumps writes them (12 bytes for a character beyond the BMP), a post of the longest
    # title, content and label allowed still fits the endpoint's body limit.
    label = "😀" * 100
    arguments = {"group": "builders-club", "title": "😀" * 300, "content": "😀" * 20_000, "label": label}
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "create_post", "arguments": arguments},
    }
    body = json.dumps(message).encode()
    assert len(body) > 240_000
    headers = {**world.headers(world.all_key), "Content-Type": "application/json"}
    result = world.client.simulate_post("/v1/mcp", headers=headers, body=body)
    assert result.status_code == 200, result.text
    # Read whole, and judged by the core: no such label in the group (not a 413 for its size).
    assert result.json["result"]["isError"] is True and "unknown label" in result.json["result"]["content"][0]["text"]


SEND = {"name": "send_dm", "arguments": {"to": "0" * 32, "content": "hello"}}

# (message, what the answer's message says): each one answered with JSON-RPC's Invalid Request in one
# sentence, where the transport answered 202 and dropped the call (a bad id) or quoted pydantic's report.
BAD_MESSAGES = [
    ({"jsonrpc": "2.0", "id": None, "method": "tools/call", "params": SEND}, "id must be a string or an integer"),
    ({"jsonrpc": "2.0", "id": True, "method": "tools/call", "params": SEND}, "id must be a string or an integer"),
    ({"jsonrpc": "2.0", "id": 1.5, "method": "tools/call", "params": SEND}, "id must be a string or an integer"),
    ({"jsonrpc": "2.0", "id": {"n": 1}, "method": "tools/call", "params": SEND}, "id must be a string or an integer"),
    ({"jsonrpc": "2.0", "id": [1], "method": "tools/call", "params": SEND}, "id must be a string or an integer"),
    ([{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": SEND}], "batches are not supported"),
    ([], "batches are not supported"),
    (5, "a JSON-RPC message is a JSON object"),
    ("tools/list", "a JSON-RPC message is a JSON object"),
    ({"jsonrpc": "1.0", "id": 1, "method": "tools/list"}, '"jsonrpc": "2.0"'),
    ({"id": 1, "method": "tools/list"}, '"jsonrpc": "2.0"'),
    ({"jsonrpc": "2.0"}, "a method (a request or a notification), or a result or an error"),
    ({"jsonrpc": "2.0", "id": 1, "method": 5}, "method must be a string"),
    ({"jsonrpc": "2.0", "id": 1, "method": "ping", "error": {"code": 0, "message": {}}}, "carries no result or error"),
    ({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": SEND, "result": {}}, "carries no result or error"),
    ({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": [SEND]}, "params must be an object"),
    ({"jsonrpc": "2.0", "id": 1, "result": 5}, "not a valid JSON-RPC 2.0 message"),
    ({"jsonrpc": "2.0", "id": 1, "error": {"code": 1}}, "not a valid JSON-RPC 2.0 message"),
    # JSON-RPC 2.0: "Either the result member or error member MUST be included, but both members MUST NOT".
    ({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "x"}}, "a result or an error, not both"),
    # pydantic takes false for 0: the transport accepted this (202)
    ({"jsonrpc": "2.0", "id": 1, "error": {"code": False, "message": "x"}}, "an error's code is an integer"),
    ({"jsonrpc": "2.0", "id": 1, "error": {"code": 1.5, "message": "x"}}, "an error's code is an integer"),
    ({"jsonrpc": "2.0", "id": 1, "error": "code"}, "not a valid JSON-RPC 2.0 message"),
    ({"jsonrpc": "2.0", "id": 0, "error": {"code": 0, "message": ""}, "params": [None]}, "params must be an object"),
    ({"jsonrpc": "2.0", "id": None, "error": {"code": 0, "message": ""}}, "id must be a string or an integer"),
    ({"jsonrpc": "2.0", "error": {"code": 0, "message": ""}}, "id must be a string or an integer"),
    ({"jsonrpc": "2.0", "id": True, "result": {}}, "id must be a string or an integer"),
    ({"jsonrpc": "2.0", "result": {}}, "id must be a string or an integer"),  # a response names its request
]


@pytest.mark.parametrize(("message", "says"), BAD_MESSAGES, ids=lambda value: json.dumps(value)[:40])
def test_a_malformed_message_is_an_invalid_request_in_one_sentence(world: McpWorld, message: object, says: str) -> None:
    result = world.client.simulate_post("/v1/mcp", headers=world.headers(world.all_key), json=message)
    assert result.status_code == 400, result.text
    assert result.json["jsonrpc"] == "2.0" and result.json["id"] is None
    error = result.json["error"]
    assert error["code"] == -32600 and error["message"].startswith("Invalid Request: ")
    assert says in error["message"] and len(error["message"]) < 120, error["message"]
    assert world.gateway.sent_messages() == []  # the send in it did not go out


@pytest.mark.parametrize(
    "answer",
    [
        b'["not", "an", "object"]',
        b'{"error": "a text"}',
        b'{"error": {"message": 5}}',
        b'{"result": {}}',
        b"not JSON",
        b'{"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "Invalid params: x"}}',
    ],
)
def test_only_a_validation_report_is_shortened(answer: bytes) -> None:
    """``tidy`` rewrites the transport's report of a message its models refused, and passes any other
    answer on as it is, whatever its shape."""
    assert tidy(answer) == answer


@pytest.mark.parametrize("body", [b'{"jsonrpc": "2.0", "id": 1,', b"\xff\xfe", b"", b"[1,"])
def test_text_that_is_not_json_is_answered_with_the_transports_parse_error(world: McpWorld, body: bytes) -> None:
    """Not JSON at all: JSON-RPC's Parse error (-32700), as the transport words it (where in the text it
    stopped), not rewritten into an Invalid Request as a message that fails its models is."""
    headers = {**world.headers(world.all_key), "Content-Type": "application/json"}
    result = world.client.simulate_post("/v1/mcp", headers=headers, body=body)
    assert result.status_code == 400, result.text
    assert result.json["jsonrpc"] == "2.0" and result.json["id"] is None
    error = result.json["error"]
    assert error["code"] == -32700 and error["message"].startswith("Parse error: "), error


def test_the_document_refuses_every_message_the_endpoint_refuses(world: McpWorld) -> None:
    """``/v1/openapi.json`` describes the message ``/v1/mcp`` takes: each refused above is outside it (a
    client that checks its message against the document is never surprised by a 400), and a request, a
    notification and a response are inside it."""
    import jsonschema

    document = world.client.simulate_get("/v1/openapi.json").json
    schema = document["paths"]["/v1/mcp"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    validator = jsonschema.Draft202012Validator(schema)
    assert [m for m, _ in BAD_MESSAGES if validator.is_valid(m)] == []
    for good in (
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": "a", "result": {}},
        {"jsonrpc": "2.0", "id": 2, "error": {"code": -1, "message": "no"}},
    ):
        assert validator.is_valid(good), good


def test_a_message_naming_a_member_twice_is_an_invalid_request(world: McpWorld) -> None:
    """Which ``content`` would the DM carry? The transport kept the last; another parser the first."""
    raw = (
        b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "send_dm", "arguments": '
        b'{"to": "' + b"0" * 32 + b'", "content": "hello", "content": "something else"}}}'
    )
    headers = {**world.headers(world.all_key), "Content-Type": "application/json"}
    result = world.client.simulate_post("/v1/mcp", headers=headers, body=raw)
    assert result.status_code == 400, result.text
    error = result.json["error"]
    assert error["code"] == -32600 and "names 'content' twice" in error["message"]
    assert world.gateway.sent_messages() == []


@pytest.mark.parametrize("request_id", ["", "abc", 0, -1, 2**40])
def test_every_string_or_integer_id_is_answered_with_it(world: McpWorld, request_id: object) -> None:
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/list"}
    result = world.client.simulate_post("/v1/mcp", headers=world.headers(world.all_key), json=message)
    assert result.status_code == 200 and result.json["id"] == request_id


def test_notifications_are_accepted_without_a_body(world: McpWorld) -> None:
    message = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    result = world.client.simulate_post("/v1/mcp", headers=world.headers(world.all_key), json=message)
    assert result.status_code == 202 and result.content == b""


def test_the_loop_thread_starts_at_the_first_request_and_serves_concurrent_ones(world: McpWorld) -> None:
    assert not world.resource.bridge.running
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: world.ok("whoami", {})["handle"], range(24)))
    assert answers == ["alice"] * 24
    assert world.resource.bridge.running
    world.resource.bridge.close()
    assert not world.resource.bridge.running
    assert world.ok("whoami", {})["handle"] == "alice"  # a fresh session manager after close()


def test_a_request_leaves_nothing_of_it_running_on_its_threads_loop(world: McpWorld) -> None:
    """Between requests a thread's loop is idle (``bridge.py``): the request's own server task has wound
    down before the answer is handed back, so nothing of it is left to run during the next request."""
    import asyncio

    for tool in ("whoami", "list_groups", "whoami"):
        world.ok(tool, {})
        served = world.resource.bridge._local.loop  # this thread's loop: the test client serves here
        assert asyncio.all_tasks(served.loop) == {served._held}  # only the session manager held open


def test_messages_and_answers_are_the_ones_the_openapi_document_describes(world: McpWorld) -> None:
    """``POST /v1/mcp`` is described as JSON-RPC: what a client sends validates against the documented
    message, what it refuses does not, and each answer (200, 202, 400, 406, 401) matches its status's schema."""
    import jsonschema

    document = world.client.simulate_get("/v1/openapi.json").json
    operation = document["paths"]["/v1/mcp"]["post"]
    message = operation["requestBody"]["content"]["application/json"]["schema"]
    request = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "whoami", "arguments": {}}}
    notification = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    for sent in (request, notification, {"jsonrpc": "2.0", "id": 3, "result": {}}):
        jsonschema.validate(sent, message)
    for refused in ({}, {"jsonrpc": "2.0"}, {"jsonrpc": "1.0", "method": "ping"}, {"jsonrpc": "2.0", "id": 1}):
        assert not jsonschema.Draft202012Validator(message).is_valid(refused), refused

    def check(result: falcon.testing.Result, status: int) -> None:
        assert result.status_code == status, result.text
        described = operation["responses"].get(str(status), operation["responses"]["default"])
        if "content" in described:
            schema = described["content"]["application/json"]["schema"]
            jsonschema.validate(result.json, {**schema, "components": document["components"]})
        if status in (200, 400, 406):  # JSON-RPC 2.0 §5: every response holds both (id null when unread)
            assert {"jsonrpc", "id"} <= set(result.json) and sorted(schema["required"]) == ["id", "jsonrpc"]

    headers = world.headers(world.all_key)
    check(world.client.simulate_post("/v1/mcp", headers=headers, json=request), 200)
    check(world.client.simulate_post("/v1/mcp", headers=headers, json={**request, "method": "nope"}), 200)
    check(world.client.simulate_post("/v1/mcp", headers=headers, json=notification), 202)
    check(world.client.simulate_post("/v1/mcp", headers=headers, json={}), 400)
    check(world.client.simulate_post("/v1/mcp", headers={**headers, "Accept": "text/html"}, json=request), 406)
    check(world.client.simulate_post("/v1/mcp", headers=world.headers(None), json=request), 401)


# --- browser-based clients (CORS) ----------------------------------------------------------------------
INSPECTOR = "http://localhost:6274"  # the MCP Inspector's page: a loopback origin, allowed by default
PREFLIGHT = {
    "Host": HOST,
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "authorization,content-type,mcp-protocol-version",
}


def test_a_browser_client_on_an_allowed_origin_gets_cors_answers(world: McpWorld) -> None:
    """The transport let a loopback page's Origin through, yet the endpoint sent no CORS headers: the
    browser blocked the preflight (a 200 without them), so the page could never call it, although the
    OAuth endpoints it had just used allow any origin."""
    preflight = world.client.simulate_options("/v1/mcp", headers={**PREFLIGHT, "Origin": INSPECTOR})
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == INSPECTOR
    assert "POST" in preflight.headers["access-control-allow-methods"]
    allowed = {h.strip().lower() for h in preflight.headers["access-control-allow-headers"].split(",")}
    assert {"authorization", "content-type", "mcp-protocol-version", "x-community-connection"} <= allowed
    assert "origin" in preflight.headers["vary"].lower()
    assert preflight.headers["access-control-max-age"] == "600"  # one preflight per ten minutes, not per call
    answer = world.rpc("tools/list", headers={"Origin": INSPECTOR})
    assert answer.status_code == 200 and answer.headers["access-control-allow-origin"] == INSPECTOR
    # The 401 too, with the header that says where to get a token readable by the page.
    unauthorized = world.client.simulate_post("/v1/mcp", headers=world.headers(None, {"Origin": INSPECTOR}), json=LIST)
    assert_error(unauthorized, 401, "unauthorized")
    assert unauthorized.headers["access-control-allow-origin"] == INSPECTOR
    assert "www-authenticate" in unauthorized.headers["access-control-expose-headers"].lower()
    assert requests_today(world) == 1  # the preflight is not a request of the key's


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        ("http://localhost:6274", True),
        ("http://localhost", False),  # (the portless entry, when listed, stands for this one)
        ("http://localhost:6274.evil.example", False),  # a port is digits: no name may follow it
        ("http://localhost:", False),
        ("http://localhostx:6274", False),
    ],
)
def test_an_any_port_entry_allows_that_host_on_a_port_of_digits(origin: str, allowed: bool) -> None:
    assert origin_allowed(origin, ["http://localhost:*"]) is allowed


def test_mcp_messages_are_taken_however_their_media_type_is_cased(world: McpWorld) -> None:
    headers = {**world.headers(world.all_key), "Content-Type": "Application/JSON; Charset=UTF-8"}
    answer = world.client.simulate_post("/v1/mcp", headers=headers, body=json.dumps(LIST).encode())
    assert answer.status_code == 200, answer.text
    assert "tools" in answer.json["result"]


@pytest.mark.parametrize(
    "origin", ["http://evil.example", "http://localhost.evil.example", "https://localhost.evil.example:6274"]
)
def test_other_origins_get_no_cors_and_their_preflight_is_refused(world: McpWorld, origin: str) -> None:
    preflight = world.client.simulate_options("/v1/mcp", headers={**PREFLIGHT, "Origin": origin})
    assert_error(preflight, 403, "forbidden")
    assert "access-control-allow-origin" not in preflight.headers
    assert "COMMUNITY_API_MCP_ALLOWED_ORIGINS" in preflight.json["error"]["message"]
    refused = world.rpc("tools/list", headers={"Origin": origin})
    assert_error(refused, 403, "forbidden")
    assert "access-control-allow-origin" not in refused.headers


def test_options_without_an_origin_is_no_preflight(world: McpWorld) -> None:
    """A browser's preflight always names its origin; an OPTIONS without one (a person with curl, a proxy)
    is told what the endpoint allows, as every other route tells it, not that its web origin is refused."""
    answer = world.client.simulate_options("/v1/mcp", headers={"Host": HOST})
    assert answer.status_code == 200 and answer.headers["allow"] == "POST" and not answer.text
    assert not [name for name in answer.headers if name.lower().startswith("access-control-")]
    assert requests_today(world) == 0


def test_browser_origins_come_from_settings() -> None:
    settings = Settings(
        mode="test", usage_flush_seconds=0, mcp_allowed_origins=("https://agent.example.com", "http://dev.local:*")
    )
    world = McpWorld.build(settings)
    try:
        for origin in ("https://agent.example.com", "http://dev.local:3000", "http://dev.local"):
            assert world.client.simulate_options("/v1/mcp", headers={**PREFLIGHT, "Origin": origin}).status_code == 204
            answer = world.rpc("tools/list", headers={"Origin": origin})
            assert answer.status_code == 200 and answer.headers["access-control-allow-origin"] == origin
        assert_error(world.rpc("tools/list", headers={"Origin": "http://agent.example.com"}), 403, "forbidden")
    finally:
        world.close()


def test_an_idempotency_key_header_is_refused_and_nothing_is_sent(world: McpWorld) -> None:
    """The endpoint keeps no Idempotency-Key header (a tool takes an ``idempotencyKey`` argument): a client
    that sent one believed a retry of ``send_dm`` safe, and it sent the DM twice (session 44)."""
    inbox = world.call("list_dms", {})["structuredContent"]["conversations"]
    before = len(world.gateway.sent_messages())
    arguments: dict[str, str] = {"conversationId": inbox[0]["id"], "content": "once, I hoped"}
    send = {"name": "send_dm", "arguments": arguments}
    refused = world.rpc("tools/call", send, headers={"Idempotency-Key": "retry-1"})
    assert_error(refused, 400, "invalid_request")
    assert "take an idempotencyKey argument" in refused.json["error"]["message"]
    assert len(world.gateway.sent_messages()) == before
    # The argument is the way: sent twice, one DM.
    arguments["idempotencyKey"] = "retry-1"
    assert world.rpc("tools/call", send).status_code == 200
    assert world.rpc("tools/call", send).status_code == 200
    assert len(world.gateway.sent_messages()) == before + 1
