"""OAuth access tokens at the MCP endpoint, in process: the 401 that starts discovery, the official MCP
client's own OAuth flow (discovery, registration, PKCE, consent approved in a browser, token) ending in
a tool list, and a revoked grant refused at once.

Needs ``adapters/mcp/endpoint.py`` to authenticate with ``bearer_key(..., resource=resource_url(settings,
req))`` (see docs/dashboard.md): without it the endpoint takes API keys only.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import falcon.testing
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientMetadata

from adapters.http.auth import resource_metadata_url
from adapters.mcp import McpResource
from community_api.keys import revoke_key
from tests.unit.oauth_support import REDIRECT_URI, RESOURCE, Connector, MemoryStorage
from tests.unit.web_support import HOST, ORIGIN, WebBrowser, account_id, query_of
from tests.unit.world_support import World, build_world

READ_TOOLS = {"whoami", "list_groups", "get_group", "get_feed", "get_post", "list_comments"}
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
MCP_HEADERS = {"Host": HOST, "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}


@pytest.fixture
def world() -> Iterator[World]:
    built = build_world()
    yield built
    found: Any = built.client.app._router.find("/v1/mcp")  # to stop the endpoint's loop thread
    resource = found[0]
    assert isinstance(resource, McpResource)
    resource.bridge.close()


@pytest.fixture
def owner(world: World) -> WebBrowser:
    browser = WebBrowser(world)
    browser.sign_up()
    browser.link("alice")
    return browser


def mcp(world: World, token: str | None) -> falcon.testing.Result:
    headers = {**MCP_HEADERS, **({"Authorization": f"Bearer {token}"} if token else {})}
    return world.client.simulate_post("/v1/mcp", headers=headers, json=LIST)


def test_401_points_the_client_at_the_protected_resource_metadata(world: World) -> None:
    refused = mcp(world, None)
    assert refused.status_code == 401
    challenge = refused.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert f'resource_metadata="{ORIGIN}/.well-known/oauth-protected-resource/v1/mcp"' in challenge
    assert 'scope="groups:read posts:read comments:read"' in challenge
    assert "error=" not in challenge  # none sent: no error code (RFC 6750 §3)
    for token in ("cdo_unknown", "cda_unknown"):
        stale = mcp(world, token).headers["www-authenticate"]
        assert stale == challenge + ', error="invalid_token"'  # sent and refused: said, never why
    metadata = world.client.simulate_get("/.well-known/oauth-protected-resource/v1/mcp", headers={"Host": HOST})
    assert metadata.json["resource"] == RESOURCE
    # REST keeps its plain challenge: OAuth tokens are not for it.
    assert world.client.simulate_get("/v1/whoami").headers["www-authenticate"] == 'Bearer realm="community-api"'


@pytest.mark.parametrize(
    ("resource", "metadata"),
    [
        ("https://api.example/v1/mcp", "https://api.example/.well-known/oauth-protected-resource/v1/mcp"),
        # RFC 9728 §3.1: a terminating slash of the resource's path is removed.
        ("https://api.example/v1/mcp/", "https://api.example/.well-known/oauth-protected-resource/v1/mcp"),
        ("https://api.example/", "https://api.example/.well-known/oauth-protected-resource"),
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000/.well-known/oauth-protected-resource"),
    ],
)
def test_the_metadata_of_a_resource_is_at_its_well_known_url(resource: str, metadata: str) -> None:
    assert resource_metadata_url(resource) == metadata


def test_an_access_token_works_until_its_grant_is_revoked(world: World, owner: WebBrowser) -> None:
    connector = Connector(world)
    connector.register()
    tokens = connector.redeem(connector.approve(owner)).json
    listed = mcp(world, tokens["access_token"])
    assert listed.status_code == 200, listed.text
    assert {t["name"] for t in listed.json["result"]["tools"]} == {
        "whoami",
        "list_groups",
        "get_group",
        "get_feed",
        "get_post",
    }  # groups:read posts:read
    grant = next(k for k in world.store.list_keys(account_id(world)) if k.kind == "connector")
    day = world.clock.now().strftime("%Y-%m-%d")
    assert world.store.key_usage(grant.id, day).requests_today == 1  # counted on the connector key
    revoke_key(world.store, world.clock, account_id=grant.account_id, key_id=grant.id)
    assert mcp(world, tokens["access_token"]).status_code == 401
    assert mcp(world, "cdo_" + tokens["access_token"][4:-1] + "x").status_code == 401  # a typo: bad checksum


def test_an_expired_access_token_is_refused(world: World, owner: WebBrowser) -> None:
    connector = Connector(world)
    connector.register()
    tokens = connector.redeem(connector.approve(owner)).json
    world.clock.advance(hours=1)
    assert mcp(world, tokens["access_token"]).status_code == 401
    # The refusal is in the owner's audit trail, naming the token by its first characters only: the
    # trail is shown to the owner and the operator, and never holds a secret.
    [refused] = [e for e in world.store.list_audit(account_id(world)) if e.event == "oauth.token_refused"]
    assert (refused.subject, refused.detail) == (tokens["access_token"][:12], "expired")
    every_line = repr(world.store.list_audit(account_id(world)))
    assert tokens["access_token"] not in every_line and tokens["refresh_token"] not in every_line


def test_the_official_client_runs_the_whole_oauth_flow(world: World, owner: WebBrowser) -> None:
    answers: list[AuthorizationCodeResult] = []

    async def approve_in_browser(url: str) -> None:
        # The person's browser: the consent page, approved as it is (the scopes the client asked for).
        page = owner.get(url.removeprefix(ORIGIN))
        assert page.status_code == 200, page.text[:300]
        done = owner.submit(page, "/oauth/authorize", button=("decision", "approve"))
        answer = query_of(done.headers["location"])
        answers.append(AuthorizationCodeResult(code=answer["code"], state=answer["state"], iss=answer["iss"]))

    async def callback() -> AuthorizationCodeResult:
        return answers[-1]

    async def forward(request: httpx2.Request) -> httpx2.Response:
        def send() -> falcon.testing.Result:
            path = request.url.path + (f"?{request.url.query.decode()}" if request.url.query else "")
            return world.client.simulate_request(
                request.method, path, headers=dict(request.headers), body=request.content
            )

        result = await anyio.to_thread.run_sync(send)
        return httpx2.Response(result.status_code, headers=list(result.headers.items()), content=result.content)

    storage = MemoryStorage()
    provider = OAuthClientProvider(
        server_url=RESOURCE,
        client_metadata=OAuthClientMetadata(redirect_uris=[REDIRECT_URI], client_name="SDK agent"),  # type: ignore[list-item]
        storage=storage,
        redirect_handler=approve_in_browser,
        callback_handler=callback,
    )

    async def run() -> set[str]:
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(forward), auth=provider)
        async with http, Client(streamable_http_client(RESOURCE, http_client=http), mode="legacy") as client:
            return {tool.name for tool in (await client.list_tools()).tools}

    assert anyio.run(run) == READ_TOOLS
    assert storage.tokens is not None and storage.tokens.access_token.startswith("cdo_")
    assert storage.tokens.scope == "groups:read posts:read comments:read"
    grant = next(k for k in world.store.list_keys(account_id(world)) if k.kind == "connector")
    assert grant.name == "SDK agent"
