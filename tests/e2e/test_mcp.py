"""The MCP endpoint under gunicorn — three sync workers, and three gthread workers with ``--preload`` — on a
real SQLite key store, driven by the official MCP client in its handshake (legacy) and 2026 (auto) modes.

Keys and connections are written into the SQLite file before gunicorn starts; the platform is the
in-memory fake (one copy per worker, accepting each other's signed sessions).
"""

from __future__ import annotations

import http.server
import json
import re
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import anyio
import attrs
import httpx2
import pytest
import requests
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from adapters.settings import Settings
from adapters.store.sqlite_key_store import SqliteKeyStore
from adapters.throttle.limits_throttle import LimitsThrottle
from adapters.wiring import bootstrap
from community_api.clock import SystemClock
from community_api.connections import LinkRequest, link_connection
from community_api.keys import mint_key
from community_api.model import Account, Connection
from community_api.scopes import ALL_SCOPES
from fakes.platform import FakePlatformGateway
from fakes.platform_pace import FakePlatformPace
from fakes.platform_seed import platform_id
from scripts.processes import free_port, gunicorn_args, serving
from tests.e2e.dashboard_support import chromium

pytestmark = pytest.mark.slow
SECRET = "e2e-mcp-secret-" + "x" * 40
READ_TOOLS = {"whoami", "list_groups", "get_group", "get_feed", "get_post", "list_comments"}
EVERY_TOOL = READ_TOOLS | {
    "create_post",
    "delete_post",
    "create_comment",
    "delete_comment",
    "list_dms",
    "get_dm_thread",
    "send_dm",
}
GROUP = "builders-club"
T = TypeVar("T")


@attrs.define
class Service:
    url: str
    log: Path
    alice: Connection
    bob: Connection
    keys: dict[str, str]  # all, read, bound (to alice)

    @property
    def mcp(self) -> str:
        return self.url + "/v1/mcp"

    def client(
        self,
        key: str,
        mode: str,
        body: Callable[[Client], Awaitable[T]],
        headers: dict[str, str] | None = None,
        statuses: list[int] | None = None,
    ) -> T:
        """Run ``body`` with a connected client; ``statuses`` collects the HTTP statuses it received."""

        async def record(response: httpx2.Response) -> None:
            if statuses is not None:
                statuses.append(response.status_code)

        async def run() -> T:
            http = httpx2.AsyncClient(
                headers={"Authorization": f"Bearer {key}", **(headers or {})},
                timeout=30,
                event_hooks={"response": [record]},
            )
            async with http, Client(streamable_http_client(self.mcp, http_client=http), mode=mode) as client:
                return await body(client)

        return anyio.run(run)


def prepare(db: Path) -> tuple[Connection, Connection, dict[str, str]]:
    """An account with alice (active) and bob linked, and three keys, written straight into the database."""
    store = SqliteKeyStore(str(db), SECRET)
    clock = SystemClock()
    deps = bootstrap(
        key_store=store,
        gateway=FakePlatformGateway(clock=clock, signing_key=SECRET.encode()),
        throttle=LimitsThrottle("memory://", salt=SECRET),
        pace=FakePlatformPace(clock),
        clock=clock,
        settings=Settings(mode="test"),
    )
    store.add_account(Account(id="acc_e2e", email="e2e@example.com", created_at=clock.now()), "unused")
    alice = link_connection(deps, "acc_e2e", LinkRequest(email="alice@sandbox.test", password="sandbox"))
    bob = link_connection(deps, "acc_e2e", LinkRequest(email="bob@sandbox.test", password="sandbox"))

    def mint(scopes: Any, connection_id: str | None = None) -> str:
        issued = mint_key(store, clock, account_id="acc_e2e", name="e2e", scopes=scopes, connection_id=connection_id)
        return issued.secret

    return alice, bob, {"all": mint(ALL_SCOPES), "read": mint(None), "bound": mint(ALL_SCOPES, alice.id)}


@pytest.fixture(scope="module", params=[("sync", False), ("gthread", True)], ids=["sync", "gthread-preload"])
def service(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    worker_class, preload = request.param
    folder = tmp_path_factory.mktemp(f"mcp-{worker_class}")
    db, log = folder / "service.sqlite3", folder / "gunicorn.log"
    alice, bob, keys = prepare(db)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        "COMMUNITY_API_MODE": "test",
        "COMMUNITY_API_PLATFORM_READS_PER_MINUTE": "20000",  # the read pace has tests of its own
        "COMMUNITY_API_PLATFORM_WRITES_PER_MINUTE": "20000",  # and the write pace
        "COMMUNITY_API_DB": str(db),
        "COMMUNITY_API_SECRET": SECRET,
        "COMMUNITY_API_USAGE_FLUSH_SECONDS": "0",
        "COMMUNITY_API_MCP_ALLOWED_HOSTS": "127.0.0.1:*",
    }
    args = gunicorn_args("tests.e2e.mcp_app:get_app()", port, workers=3, worker_class=worker_class, preload=preload)
    args[-1:-1] = ["--access-logformat", "pid=%(p)s %(m)s %(U)s %(s)s"]
    with serving(args, url + "/v1/openapi.json", env=env, log_path=log):
        yield Service(url, log, alice, bob, keys)


async def names(client: Client) -> set[str]:
    return {tool.name for tool in (await client.list_tools()).tools}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_tool_lists_follow_the_key(service: Service, mode: str) -> None:
    assert service.client(service.keys["read"], mode, names) == READ_TOOLS
    assert service.client(service.keys["all"], mode, names) == EVERY_TOOL
    assert service.client(service.keys["bound"], mode, names) == EVERY_TOOL


def own_post_and_comment(handle: str) -> tuple[str, str]:
    """A seeded post and comment of ``handle``: every worker's copy of the platform has them, whereas
    something created through one worker exists only in that worker's copy."""
    world = FakePlatformGateway(seed=1).world
    user = next(u.id for u in world.users.values() if u.handle == handle)
    post = next(p.id for p in world.posts.values() if p.author_id == user and not p.pinned)
    comment = next(c.id for c in world.comments.values() if c.author_id == user and c.post_id != post)
    return post, comment


async def every_tool(client: Client) -> dict[str, Any]:
    """Call each of the 13 tools once; answers the structured results by tool name."""
    out: dict[str, Any] = {}

    async def call(name: str, args: dict[str, Any]) -> Any:
        result = await client.call_tool(name, args)  # the client checks the result against the output schema
        assert result.is_error is False, (name, result.content)
        out[name] = result.structured_content
        return result.structured_content

    me = await call("whoami", {})
    await call("list_groups", {})
    await call("get_group", {"group": GROUP})
    posts = (await call("get_feed", {"group": GROUP, "pages": 3, "sort": "newest"}))["posts"]
    target = next(p for p in posts if p["commentCount"] > 0)
    await call("get_post", {"postId": target["id"], "group": GROUP})
    await call("list_comments", {"postId": target["id"]})
    handle = me["handle"]
    await call("create_post", {"group": GROUP, "title": f"from {handle}", "idempotencyKey": f"e2e-{handle}"})
    await call("create_comment", {"postId": target["id"], "content": "hello"})
    own_post, own_comment = own_post_and_comment(handle)
    await call("delete_post", {"postId": own_post})
    await call("delete_comment", {"commentId": own_comment})
    inbox = await call("list_dms", {})
    conversation = inbox["conversations"][0]
    await call("get_dm_thread", {"conversationId": conversation["id"]})
    await call("send_dm", {"conversationId": conversation["id"], "content": "hi from MCP"})
    return out


def served_by(service: Service, before: int) -> set[str]:
    """The PIDs of the workers that answered MCP requests with 200 after the log's first ``before`` lines."""
    lines = service.log.read_text().splitlines()[before:]
    return {m.group(1) for line in lines if (m := re.search(r"pid=<?(\d+)>? POST /v1/mcp 200", line))}


def test_every_tool_in_both_modes_on_several_workers(service: Service) -> None:
    before = len(service.log.read_text().splitlines())
    # A new TCP connection per request lets any worker take it (gthread workers keep connections).
    spread = {"Connection": "close"}

    async def every_tool_then_spread(client: Client) -> dict[str, Any]:
        out = await every_tool(client)
        # Which idle worker accepts a connection is the kernel's choice, and it often hands one worker
        # all of a short run (epoll wakes the last waiter first). So the one session goes on, in rounds
        # of concurrent calls, until its requests were served by several workers: each must know it.
        for _ in range(20):
            if len(served_by(service, before)) >= 2:
                break
            async with anyio.create_task_group() as calls:
                for _ in range(6):
                    calls.start_soon(expect_alice, client)
        return out

    async def expect_alice(client: Client) -> None:
        result = await client.call_tool("whoami", {})
        assert result.is_error is False and result.structured_content["handle"] == "alice"

    # Each mode sends its DM as another account, so the shared DM pace lets both through.
    legacy = service.client(service.keys["all"], "legacy", every_tool_then_spread, spread)
    assert len(served_by(service, before)) >= 2, "one MCP session should have been served by several workers"
    as_bob = {**spread, "X-Community-Connection": service.bob.id}
    modern = service.client(service.keys["all"], "auto", every_tool, as_bob)
    assert set(legacy) == set(modern) == EVERY_TOOL
    assert legacy["whoami"]["handle"] == "alice" and modern["whoami"]["handle"] == "bob"
    assert legacy["send_dm"]["message"]["content"] == "hi from MCP"


def test_refusals_are_tool_errors(service: Service) -> None:
    async def first_dm(client: Client) -> None:
        # A DM of alice's, through a worker of its own (or refused: one was sent already, in the test above).
        result = await client.call_tool("send_dm", {"to": service.bob.platform_user_id, "content": "first"})
        assert result.is_error is False or '"rate_limited"' in result.content[0].text  # type: ignore[union-attr]

    service.client(service.keys["all"], "legacy", first_dm, {"Connection": "close"})

    async def refusals(client: Client) -> list[str]:
        texts = []
        calls: list[tuple[str, dict[str, Any]]] = [
            ("get_feed", {"group": GROUP, "pages": 31}),
            ("send_dm", {"to": platform_id("usr-bob"), "conversationId": platform_id("cnv-00001"), "content": "hi"}),
            ("send_dm", {"to": service.bob.platform_user_id, "content": "too soon"}),
        ]
        for name, args in calls:
            result = await client.call_tool(name, args)
            assert result.is_error is True
            texts.append(result.content[0].text)  # type: ignore[union-attr]
        return texts

    pages, xor, throttled = service.client(service.keys["all"], "auto", refusals)
    assert '"invalid_request"' in pages and "pages" in pages
    assert "exactly one of to and conversationId" in xor
    # alice sent a DM above on another connection, which any worker may have served: the pace is shared.
    assert '"rate_limited"' in throttled and re.search(r'"retryAfter": (\d+)', throttled)

    async def mismatch(client: Client) -> str:
        result = await client.call_tool("whoami", {})
        assert result.is_error is True
        return result.content[0].text  # type: ignore[union-attr]

    header = {"X-Community-Connection": service.bob.id}
    for mode in ("legacy", "auto"):
        assert '"connection_mismatch"' in service.client(service.keys["bound"], mode, mismatch, header)

    async def forbidden(client: Client) -> str:
        result = await client.call_tool("send_dm", {"to": platform_id("usr-bob"), "content": "hi"})
        return result.content[0].text  # type: ignore[union-attr]

    assert '"requiredScope": "dms:write"' in service.client(service.keys["read"], "legacy", forbidden)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_a_bad_key_is_refused_with_401(service: Service, mode: str) -> None:
    statuses: list[int] = []
    # The client turns a non-JSON-RPC error answer into a generic error; the status tells what it was.
    with pytest.raises(Exception):  # noqa: B017 - an ExceptionGroup around MCPError, differing by mode
        service.client("cda_" + "A" * 49, mode, names, statuses=statuses)
    assert statuses and set(statuses) == {401}
    answer = requests.post(service.mcp, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=10)
    assert answer.status_code == 401
    assert answer.headers["WWW-Authenticate"].startswith('Bearer realm="community-api", resource_metadata="')
    assert answer.json()["error"]["code"] == "unauthorized"


def test_get_and_delete_answer_405_at_once_and_unknown_hosts_are_refused(service: Service) -> None:
    headers = {"Authorization": f"Bearer {service.keys['all']}", "Accept": "text/event-stream"}
    for method in ("GET", "DELETE"):
        answer = requests.request(method, service.mcp, headers=headers, timeout=5)
        assert answer.status_code == 405 and answer.json()["error"]["code"] == "method_not_allowed"
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    rebound = {**headers, "Accept": "application/json", "Host": "attacker.example"}
    answer = requests.post(service.mcp, json=listing, headers=rebound, timeout=5)
    # No public URL here: the service's host rule answers before the MCP endpoint's own (421) would.
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_request"


class _BlankPage(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        body = b"<!doctype html><title>a browser-based MCP client</title>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        return None


FETCH_MCP = """
const [url, key, done] = arguments;
const headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                 "MCP-Protocol-Version": "2025-11-25"};
if (key) headers["Authorization"] = "Bearer " + key;
fetch(url, {method: "POST", headers, body: JSON.stringify({jsonrpc: "2.0", id: 1, method: "tools/list"})})
  .then(async r => done({status: r.status, body: await r.text(),
                         authenticate: r.headers.get("WWW-Authenticate")}))
  .catch(e => done({error: String(e)}));
"""


@pytest.mark.browser
def test_a_page_of_another_origin_calls_the_endpoint_in_chromium(service: Service) -> None:
    """A browser-based MCP client: its page (another port: another origin, allowed) fetches the endpoint
    with its key. Before, the preflight got no CORS headers and Chromium refused the call."""
    page = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), _BlankPage)
    threading.Thread(target=page.serve_forever, daemon=True).start()
    try:
        with chromium() as driver:
            driver.get(f"http://127.0.0.1:{page.server_port}/")
            listed = driver.execute_async_script(FETCH_MCP, service.mcp, service.keys["read"])
            assert listed.get("status") == 200, listed
            assert {t["name"] for t in json.loads(listed["body"])["result"]["tools"]} == READ_TOOLS
            refused = driver.execute_async_script(FETCH_MCP, service.mcp, None)
            assert refused.get("status") == 401, refused
            assert "resource_metadata=" in refused["authenticate"]  # readable: exposed to the page
    finally:
        page.shutdown()
        page.server_close()
