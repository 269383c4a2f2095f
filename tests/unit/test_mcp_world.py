"""The MCP endpoint in process: the service built with fakes, an account with alice (active) and bob
linked, and three keys; driven through falcon.testing as raw JSON-RPC or with the official MCP client.

Also the tests of what each key is offered (the tool list). The other ``test_mcp_*`` modules import
``McpWorld`` from here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, TypeVar

import anyio
import attrs
import falcon.testing
import httpx2
import jsonschema
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from adapters.mcp import McpResource
from adapters.operations import OPERATIONS_BY_NAME
from adapters.settings import Settings
from community_api.connections import LinkRequest, link_connection
from community_api.keys import IssuedKey, mint_key
from community_api.model import Account, Connection
from community_api.platform_ids import PLATFORM_ID_PATTERN
from community_api.scopes import ALL_SCOPES
from fakes.clock import FakeClock
from fakes.key_store import FakeKeyStore
from fakes.platform import FakePlatformGateway
from fakes.platform_pace import FakePlatformPace
from fakes.throttle import FakeThrottle
from tests.e2e.mcp_app import build_app

DM_GAP = 37.0
HOST = "127.0.0.1:8000"
URL = f"http://{HOST}/v1/mcp"
LEGACY_VERSION = "2025-11-25"
READ_TOOLS = {"whoami", "list_groups", "get_group", "get_feed", "get_post", "list_comments"}
T = TypeVar("T")


@attrs.define
class McpWorld:
    clock: FakeClock
    store: FakeKeyStore
    gateway: FakePlatformGateway
    throttle: FakeThrottle
    resource: McpResource
    client: falcon.testing.TestClient
    account_id: str
    alice: Connection
    bob: Connection
    all_key: IssuedKey  # every scope, unbound
    read_key: IssuedKey  # the default scopes (read only, no DMs), unbound
    bound_key: IssuedKey  # every scope, bound to alice

    @classmethod
    def build(cls, settings: Settings | None = None) -> McpWorld:
        clock = FakeClock()
        store = FakeKeyStore()
        gateway = FakePlatformGateway(clock=clock, seed=1)
        throttle = FakeThrottle(clock, draw_gap=lambda connection_id, last_send: DM_GAP)
        settings = settings or Settings(mode="test", usage_flush_seconds=0, allowed_hosts=("falconframework.org",))
        pace = FakePlatformPace(clock, reads_per_minute=10_000)  # the pace has tests of its own
        app, resource = build_app(
            key_store=store, gateway=gateway, throttle=throttle, pace=pace, clock=clock, settings=settings
        )
        deps = resource.deps
        store.add_account(Account(id="acc_owner", email="owner@example.com", created_at=clock.now()), "unused")
        alice = link_connection(deps, "acc_owner", LinkRequest(email="alice@sandbox.test", password="sandbox"))
        bob = link_connection(deps, "acc_owner", LinkRequest(email="bob@sandbox.test", password="sandbox"))

        def mint(scopes: Any, connection_id: str | None = None) -> IssuedKey:
            return mint_key(store, clock, account_id="acc_owner", name="k", scopes=scopes, connection_id=connection_id)

        return cls(
            clock,
            store,
            gateway,
            throttle,
            resource,
            falcon.testing.TestClient(app),
            "acc_owner",
            alice,
            bob,
            mint(ALL_SCOPES),
            mint(None),
            mint(ALL_SCOPES, alice.id),
        )

    def close(self) -> None:
        self.resource.bridge.close()

    # --- raw JSON-RPC (the handshake-era wire, which needs no initialize in stateless mode) ---------------

    def headers(self, key: IssuedKey | str | None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        headers = {
            "Host": HOST,
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": LEGACY_VERSION,
        }
        if key is not None:
            headers["Authorization"] = f"Bearer {key.secret if isinstance(key, IssuedKey) else key}"
        return {**headers, **(extra or {})}

    def rpc(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        key: IssuedKey | str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> falcon.testing.Result:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": method}
        if params is not None:
            message["params"] = params
        return self.client.simulate_post("/v1/mcp", headers=self.headers(key or self.all_key, headers), json=message)

    def tool_names(self, key: IssuedKey) -> set[str]:
        result = self.rpc("tools/list", key=key)
        assert result.status_code == 200, result.text
        return {tool["name"] for tool in result.json["result"]["tools"]}

    def call(
        self, tool: str, args: dict[str, Any], key: IssuedKey | None = None, headers: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        result = self.rpc("tools/call", {"name": tool, "arguments": args}, key=key, headers=headers)
        assert result.status_code == 200, result.text
        return dict(result.json["result"])

    def ok(
        self, tool: str, args: dict[str, Any], key: IssuedKey | None = None, headers: Mapping[str, str] | None = None
    ) -> Any:
        """The structured result of a successful call, checked against the tool's output schema and text."""
        result = self.call(tool, args, key, headers)
        assert result["isError"] is False, result["content"][0]["text"]
        payload = result["structuredContent"]
        jsonschema.validate(payload, OPERATIONS_BY_NAME[tool].output_schema)
        assert json.loads(result["content"][0]["text"]) == payload
        return payload

    def fail(
        self, tool: str, args: dict[str, Any], key: IssuedKey | None = None, headers: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        """The error body of a failed call: ``{"code", "message", "details"}``."""
        result = self.call(tool, args, key, headers)
        assert result["isError"] is True, result
        assert "structuredContent" not in result
        return dict(json.loads(result["content"][0]["text"])["error"])

    def rest(self, path: str, key: IssuedKey | None = None, **params: Any) -> Any:
        headers = {"Authorization": f"Bearer {(key or self.all_key).secret}"}
        result = self.client.simulate_get(path, headers=headers, params=params)
        assert result.status_code == 200, result.text
        return result.json

    def group_id(self) -> str:
        return str(self.ok("list_groups", {})["groups"][0]["id"])

    # --- the official client, over httpx2 into the same in-process app ----------------------------------

    def with_client(self, key: IssuedKey, mode: str, body: Callable[[Client], Awaitable[T]]) -> T:
        async def forward(request: httpx2.Request) -> httpx2.Response:
            def send() -> falcon.testing.Result:
                return self.client.simulate_request(
                    request.method, request.url.path, headers=dict(request.headers), body=request.content
                )

            result = await anyio.to_thread.run_sync(send)
            return httpx2.Response(result.status_code, headers=list(result.headers.items()), content=result.content)

        async def run() -> T:
            headers = {"Authorization": f"Bearer {key.secret}"}
            http = httpx2.AsyncClient(transport=httpx2.MockTransport(forward), headers=headers)
            async with http, Client(streamable_http_client(URL, http_client=http), mode=mode) as client:
                return await body(client)

        return anyio.run(run)


@pytest.fixture
def world() -> Iterator[McpWorld]:
    built = McpWorld.build()
    yield built
    built.close()


def test_a_key_with_every_scope_is_offered_every_tool(world: McpWorld) -> None:
    assert world.tool_names(world.all_key) == set(OPERATIONS_BY_NAME) and len(OPERATIONS_BY_NAME) == 13


def test_a_read_only_key_is_offered_only_the_read_tools(world: McpWorld) -> None:
    assert world.tool_names(world.read_key) == READ_TOOLS


def test_a_bound_key_is_offered_the_tools_of_its_scopes(world: McpWorld) -> None:
    dm_reader = mint_key(
        world.store,
        world.clock,
        account_id=world.account_id,
        name="dm",
        scopes=["dms:read"],
        connection_id=world.bob.id,
    )
    assert world.tool_names(dm_reader) == {"list_dms", "get_dm_thread"}
    assert world.tool_names(world.bound_key) == set(OPERATIONS_BY_NAME)


def test_listed_tools_carry_schemas_and_annotations(world: McpWorld) -> None:
    tools = {t["name"]: t for t in world.rpc("tools/list").json["result"]["tools"]}
    for tool in tools.values():
        assert tool["description"] and tool["inputSchema"]["type"] == "object"
        assert tool["title"] == OPERATIONS_BY_NAME[tool["name"]].title  # what a client shows a person
        assert tool["outputSchema"]["type"] == "object"
        jsonschema.Draft202012Validator.check_schema(tool["inputSchema"])
        jsonschema.Draft202012Validator.check_schema(tool["outputSchema"])
        hints = tool["annotations"]
        assert hints["readOnlyHint"] is (tool["name"] in READ_TOOLS | {"list_dms", "get_dm_thread"})
    assert tools["delete_post"]["annotations"]["destructiveHint"] is True
    assert tools["delete_comment"]["annotations"]["idempotentHint"] is True
    for name in ("create_post", "create_comment", "send_dm"):
        assert tools[name]["annotations"]["destructiveHint"] is False
        assert tools[name]["annotations"]["idempotentHint"] is False
    feed = tools["get_feed"]["inputSchema"]["properties"]
    assert (feed["pages"]["minimum"], feed["pages"]["maximum"]) == (1, 30)
    assert len(feed["sort"]["enum"]) == 8 and feed["sort"]["default"] == "newest"
    since = re.compile(feed["since"]["pattern"])
    assert all(since.fullmatch(v) for v in ("24h", "7d", "2026-01-31", "2026-12-01"))
    assert not any(since.fullmatch(v) for v in ("2500-20-07", "2026-00-10", "2026-01-32", "30d", "2026-1-1"))
    assert tools["send_dm"]["inputSchema"]["oneOf"] == [
        {"required": ["to"], "properties": {"to": {"pattern": PLATFORM_ID_PATTERN}}},
        {"required": ["conversationId"], "properties": {"conversationId": {"pattern": PLATFORM_ID_PATTERN}}},
    ]
    assert "30 to 45 seconds" in tools["send_dm"]["description"] and "20 an hour" in tools["send_dm"]["description"]
    assert "about 30 posts" in tools["get_feed"]["description"]
    assert (tools["send_dm"]["title"], tools["get_feed"]["title"]) == ("Send a DM", "Read a group's feed")


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_official_client_lists_per_key_in_both_protocol_modes(world: McpWorld, mode: str) -> None:
    async def names(client: Client) -> tuple[str, set[str], tuple[int | None, str | None]]:
        result = await client.list_tools()
        return client.protocol_version, {tool.name for tool in result.tools}, (result.ttl_ms, result.cache_scope)

    version, listed, caching = world.with_client(world.read_key, mode, names)
    assert listed == READ_TOOLS
    assert version == (LEGACY_VERSION if mode == "legacy" else "2026-07-28")
    # The list is the key's: a client or a cache in between must keep it for that key alone, and ask again.
    assert caching == (0, "private")
    assert world.with_client(world.all_key, mode, names)[1] == set(OPERATIONS_BY_NAME)


def test_the_server_reached_without_the_http_endpoint_offers_nothing_and_does_nothing(world: McpWorld) -> None:
    """Who calls is known only from the HTTP endpoint, which checks the key before any MCP code runs.
    Reached another way (in memory here; a stdio transport one day), the server has no caller: it offers no
    tool and refuses every call as unauthorized, and nothing reaches the platform."""
    from adapters.mcp.server import build_server

    async def run() -> tuple[Any, Any]:
        async with Client(build_server(world.resource.deps)) as client:
            return await client.list_tools(), await client.call_tool(
                "create_post", {"group": "builders-club", "title": "x"}
            )

    listed, called = anyio.run(run)
    assert listed.tools == []
    assert called.is_error is True
    assert json.loads(called.content[0].text)["error"]["code"] == "unauthorized"
    assert world.gateway.created_posts() == []
