"""OAuth for MCP connectors end to end: gunicorn serving ``adapters.wiring:get_app()`` in front of the
stand-in platform, the official ``mcp`` client doing its own OAuth (discovery from the 401, registration,
PKCE, the token request), the consent page clicked in headless Chromium, a tool call as alice, a refresh,
and the grant revoked from the dashboard followed by a 401."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import anyio
import attrs
import httpx2
import pytest
import requests
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientMetadata
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from tests.e2e.dashboard_support import PASSWORD, chromium, fill, heading, press, running_service, screenshot
from tests.sandbox_support import SandboxProcess, running_sandbox
from tests.unit.oauth_support import MemoryStorage, pkce

pytestmark = [pytest.mark.browser, pytest.mark.slow]
EMAIL = "agent-owner@example.com"
READ_TOOLS = {"whoami", "list_groups", "get_group", "get_feed", "get_post", "list_comments"}


class Callback:
    """The client's redirect URI: a loopback HTTP server that keeps the query of each request."""

    def __init__(self) -> None:
        self.queries: list[dict[str, str]] = []
        arrived = self.arrived = threading.Event()
        queries = self.queries

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
                url = urlsplit(self.path)
                if url.path != "/callback":  # e.g. the browser's own /favicon.ico request
                    self.send_response(404)
                    self.end_headers()
                    return
                queries.append({k: v[0] for k, v in parse_qs(url.query).items()})
                arrived.set()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(b"You may close this window.")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/callback"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@attrs.define
class Service:
    url: str
    driver: WebDriver
    callback: Callback
    log: Path

    @property
    def mcp(self) -> str:
        return self.url + "/v1/mcp"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    folder = tmp_path_factory.mktemp("oauth")
    sandbox: SandboxProcess
    callback = Callback()
    try:
        with running_sandbox() as sandbox, running_service(folder, sandbox) as url, chromium() as driver:
            # The account and alice through the JSON API (the dashboard's own test covers those pages).
            web = requests.Session()
            assert web.post(url + "/v1/accounts", json={"email": EMAIL, "password": PASSWORD}, timeout=10).ok
            signed = web.post(url + "/v1/session", json={"email": EMAIL, "password": PASSWORD}, timeout=10)
            web.headers["X-CSRF-Token"] = signed.json()["csrfToken"]
            linked = web.post(
                url + "/v1/connections", json={"email": "alice@sandbox.test", "password": "sandbox"}, timeout=120
            )
            assert linked.status_code == 201, linked.text
            yield Service(url, driver, callback, folder / "service.log")
    finally:
        callback.close()


def sign_in(service: Service) -> None:
    driver = service.driver
    fill(driver, "email", EMAIL)
    fill(driver, "password", PASSWORD)
    press(driver, "form[action='/login'] button[type=submit]")


def test_an_mcp_client_connects_with_oauth_and_loses_access_when_revoked(service: Service) -> None:
    driver = service.driver

    async def approve_in_browser(authorization_url: str) -> None:
        driver.get(authorization_url)
        assert "/login?next=" in driver.current_url  # signed out: sign in first, then back to the request
        sign_in(service)
        assert heading(driver) == "Connect E2E agent?"
        ticked = {b.get_attribute("value") for b in driver.find_elements(By.NAME, "granted_scope") if b.is_selected()}
        assert ticked == {"groups:read", "posts:read", "comments:read"}  # from the 401's scope
        screenshot(driver, "consent")
        driver.find_element(By.CSS_SELECTOR, "button[name=decision][value=approve]").click()
        # Chromium follows the redirect to the client only if form-action allows the client's origin.
        assert service.callback.arrived.wait(30), driver.page_source[:500]

    async def callback() -> AuthorizationCodeResult:
        answer = service.callback.queries[-1]
        return AuthorizationCodeResult(code=answer["code"], state=answer.get("state"), iss=answer.get("iss"))

    storage = MemoryStorage()
    provider = OAuthClientProvider(
        server_url=service.mcp,
        client_metadata=OAuthClientMetadata(redirect_uris=[service.callback.url], client_name="E2E agent"),  # type: ignore[list-item]
        storage=storage,
        redirect_handler=approve_in_browser,
        callback_handler=callback,
    )

    async def first_session() -> tuple[set[str], dict[str, Any]]:
        http = httpx2.AsyncClient(auth=provider, timeout=120)
        async with http, Client(streamable_http_client(service.mcp, http_client=http), mode="legacy") as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            whoami = await client.call_tool("whoami", {})
            return tools, dict(whoami.structured_content or {})

    tools, whoami = anyio.run(first_session)
    assert tools == READ_TOOLS and whoami["handle"] == "alice"
    assert storage.tokens is not None and storage.tokens.refresh_token is not None
    assert storage.tokens.access_token.startswith("cdo_")

    # Refresh: a new pair; the new access token works for MCP.
    client_id = storage.client.client_id  # type: ignore[union-attr]
    refreshed = requests.post(
        service.url + "/oauth/token",
        data={
            "grant_type": "refresh_token",
            "refresh_token": storage.tokens.refresh_token,
            "client_id": client_id,
            "resource": service.mcp,
        },
        timeout=10,
    )
    assert refreshed.status_code == 200, refreshed.text
    access = refreshed.json()["access_token"]
    assert access != storage.tokens.access_token

    async def with_token() -> str:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {access}"}, timeout=120)
        async with http, Client(streamable_http_client(service.mcp, http_client=http), mode="legacy") as client:
            answer = (await client.call_tool("whoami", {})).structured_content or {}
            return str(answer["handle"])

    assert anyio.run(with_token) == "alice"

    # The grant is a connector key on the dashboard; revoking it there ends its tokens at once.
    driver.get(service.url + "/keys")
    row = driver.find_element(By.XPATH, "//tr[.//span[contains(., 'OAuth connector')]]")
    assert "E2E agent" in row.text and not row.find_elements(By.PARTIAL_LINK_TEXT, "Rotate")
    screenshot(driver, "keys-with-connector")
    row.find_element(By.PARTIAL_LINK_TEXT, "Revoke").click()
    assert "disconnects that" in driver.page_source
    screenshot(driver, "revoke-connector")
    press(driver, "form[action$='/revoke'] button[type=submit]")
    WebDriverWait(driver, 10).until(lambda d: "notice=revoked" in d.current_url)

    refused = requests.post(
        service.mcp,
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={
            "Authorization": f"Bearer {access}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-11-25",
        },
        timeout=30,
    )
    assert refused.status_code == 401
    assert (
        f'resource_metadata="{service.url}/.well-known/oauth-protected-resource/v1/mcp"'
        in refused.headers["WWW-Authenticate"]
    )
    again = requests.post(
        service.url + "/oauth/token",
        data={
            "grant_type": "refresh_token",
            "refresh_token": refreshed.json()["refresh_token"],
            "client_id": client_id,
        },
        timeout=10,
    )
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    log = service.log.read_text()
    assert access not in log and storage.tokens.refresh_token not in log  # tokens never reach the log


def test_a_client_registered_on_one_loopback_port_connects_on_another(service: Service) -> None:
    """RFC 8252 §7.3 in a real browser: a native client registered while it listened on one port is given
    another by the system the next time; the consent page's form-action follows the port it asks with, so
    Chromium goes on to the client, and the code is redeemed with that URI."""
    registered = requests.post(
        service.url + "/oauth/register",
        json={"redirect_uris": ["http://127.0.0.1:9/callback"], "client_name": "Moved agent"},
        timeout=10,
    )
    assert registered.status_code == 201, registered.text
    client_id = registered.json()["client_id"]
    verifier, challenge = pkce()
    service.callback.arrived.clear()
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": service.callback.url,  # another port than the registered one
        "state": "moved",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "scope": "groups:read",
        "resource": service.mcp,
    }
    driver = service.driver
    driver.get(service.url + "/oauth/authorize?" + urlencode(query))
    if "/login" in driver.current_url:  # this test run on its own
        sign_in(service)
    assert heading(driver) == "Connect Moved agent?"
    driver.find_element(By.CSS_SELECTOR, "button[name=decision][value=approve]").click()
    assert service.callback.arrived.wait(30), driver.page_source[:500]
    answer = service.callback.queries[-1]
    assert answer["state"] == "moved" and answer["iss"] == service.url
    tokens = requests.post(
        service.url + "/oauth/token",
        data={
            "grant_type": "authorization_code",
            "code": answer["code"],
            "redirect_uri": service.callback.url,
            "client_id": client_id,
            "code_verifier": verifier,
            "resource": service.mcp,
        },
        timeout=10,
    )
    assert tokens.status_code == 200, tokens.text
    assert tokens.json()["scope"] == "groups:read"
