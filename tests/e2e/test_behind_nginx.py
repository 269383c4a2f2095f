"""The service behind Debian's nginx, as ``deploy/nginx/community-api.conf`` configures it: TLS on a
certificate made for the test, HTTP/2, ``proxy_pass`` to gunicorn, the MCP endpoint unbuffered.

The public name is ``api.community.test``, resolved to 127.0.0.1 for this test's clients (Chromium's host
resolver rules; ``socket.getaddrinfo`` in this process), so the Host, the TLS name and the URLs are those
of a real deployment rather than loopback's, which the service would accept anyway. Through nginx:
- the dashboard signs in with Chromium over HTTP/2, its cookies Secure;
- REST: accounts, a linked connection, a key, ``GET /v1/whoami``; the OAuth metadata carries https URLs;
- MCP: the official client lists the tools and calls ``whoami``;
- the failed-sign-in throttle counts the clients nginx saw (two loopback addresses, 127.0.0.2 and
  127.0.0.3), whatever ``X-Forwarded-For`` they send; gunicorn, reached directly, trusts no one's.
- a feed and an MCP call's JSON answer come gzipped to a client that accepts it; a dashboard page does not.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import attrs
import httpx2
import pytest
import requests
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from selenium import webdriver
from selenium.webdriver.chrome.service import Service as ChromeService
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from adapters.platform.browser import CHROMEDRIVER, CHROMIUM, chrome_options
from scripts.processes import ROOT, free_port, gunicorn_args, serving, stop
from scripts.sandbox.tls import Certificate, make_certificate
from tests.e2e.dashboard_support import fill, heading, press

pytestmark = pytest.mark.slow
NGINX = "/usr/sbin/nginx"
NAME = "api.community.test"
SECRET = "nginx-e2e-secret-" + "n" * 40
EMAIL, PASSWORD = "owner@example.com", "owner password 1"


@attrs.define
class Deployment:
    public_url: str  # https://api.community.test:<port>, through nginx
    direct_url: str  # http://127.0.0.1:<port>, gunicorn itself
    cert: Certificate
    folder: Path


def render_nginx(folder: Path, listen: int, upstream: int | str, cert: Certificate, http_extra: str = "") -> Path:
    """The deployment's server block with its values filled in, inside a main file that keeps every path
    nginx writes (pid, logs, temporary bodies) in ``folder`` so that it runs without touching /etc or /var;
    ``upstream``: gunicorn's port on 127.0.0.1, or its ``unix:PATH``; ``http_extra``: directives an
    operator added to the main file's ``http`` block."""
    site = (ROOT / "deploy" / "nginx" / "community-api.conf").read_text()
    for placeholder, value in {
        "@UPSTREAM@": upstream if isinstance(upstream, str) else f"127.0.0.1:{upstream}",
        "@LISTEN@": f"127.0.0.1:{listen}",
        "@SERVER_NAME@": NAME,
        "@CERTIFICATE@": str(cert.cert_path),
        "@CERTIFICATE_KEY@": str(cert.key_path),
    }.items():
        site = site.replace(placeholder, value)
    assert not re.search(r"@[A-Z_]+@", site), "a placeholder of the deployment file was left unfilled"
    (folder / "site.conf").write_text(site)
    temp = "\n".join(
        f"    {kind}_temp_path {folder / kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    # As root nginx's workers would become "nobody", who cannot read this test's private folder.
    user = "user root root;\n" if os.geteuid() == 0 else ""
    main = folder / "nginx.conf"
    main.write_text(
        f"{user}worker_processes 1;\ndaemon off;\npid {folder / 'nginx.pid'};\n"
        f"error_log {folder / 'nginx-error.log'} warn;\nevents {{ worker_connections 256; }}\n"
        f"http {{\n    access_log off;\n{temp}\n{http_extra}    include {folder / 'site.conf'};\n}}\n"
    )
    return main


@contextmanager
def nginx(folder: Path, config: Path, port: int) -> Iterator[subprocess.Popen[bytes]]:
    check = subprocess.run(
        [NGINX, "-t", "-p", str(folder), "-c", str(config), "-e", str(folder / "nginx-error.log")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert check.returncode == 0, check.stderr
    with open(folder / "nginx.out", "wb") as out:
        process = subprocess.Popen(
            [NGINX, "-p", str(folder), "-c", str(config), "-e", str(folder / "nginx-error.log")],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 20
            while True:
                assert process.poll() is None, (folder / "nginx-error.log").read_text()
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline, "nginx did not listen"
                    time.sleep(0.05)
            yield process
        finally:
            stop(process)


@pytest.fixture(scope="module")
def resolve_public_name() -> Iterator[None]:
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        named = host.decode("idna") if isinstance(host, bytes) else host  # anyio passes IDNA bytes
        return real("127.0.0.1" if named == NAME else host, *args, **kwargs)

    socket.getaddrinfo = getaddrinfo
    try:
        yield
    finally:
        socket.getaddrinfo = real


def service_env(folder: Path, public_url: str) -> dict[str, str]:
    """The service's settings behind the deployment's nginx, its database in ``folder``; ``PUBLIC_URL`` is
    what deploy/nginx/community-api.conf asks of it whichever way nginx reaches it."""
    return {
        "COMMUNITY_API_MODE": "test",
        "COMMUNITY_API_DB": str(folder / "service.sqlite3"),
        "COMMUNITY_API_SECRET": SECRET,
        "COMMUNITY_API_SIGNUP": "true",
        "COMMUNITY_API_PUBLIC_URL": public_url,
    }


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, resolve_public_name: None) -> Iterator[Deployment]:
    if not Path(NGINX).exists():
        pytest.fail("nginx is missing: `make test-deps` installs Debian's nginx")
    folder = tmp_path_factory.mktemp("nginx")
    cert = make_certificate(folder, dns_names=(NAME,), stem="proxy", common_name="community-api test proxy")
    listen, upstream = free_port(), free_port()
    public_url = f"https://{NAME}:{listen}"
    env = service_env(folder, public_url) | {
        "COMMUNITY_API_USAGE_FLUSH_SECONDS": "0",
        "COMMUNITY_API_TRUSTED_PROXIES": "127.0.0.1",  # what deploy/nginx/community-api.conf asks too
    }
    args = gunicorn_args("tests.e2e.app_factory:get_app()", upstream, workers=2, worker_class="gthread")
    args[-1:-1] = ["--forwarded-allow-ips", "127.0.0.1"]  # as `community-api serve` passes TRUSTED_PROXIES
    direct_url = f"http://127.0.0.1:{upstream}"
    with (
        serving(args, direct_url + "/healthz", env=env, log_path=folder / "service.log"),
        nginx(folder, render_nginx(folder, listen, upstream, cert), listen),
    ):
        yield Deployment(public_url, direct_url, cert, folder)


class FromAddress(requests.adapters.HTTPAdapter):
    """Connections from a chosen loopback address: a client other than nginx's own 127.0.0.1."""

    def __init__(self, address: str) -> None:
        self.address = address
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["source_address"] = (self.address, 0)
        super().init_poolmanager(*args, **kwargs)


def client(deployment: Deployment, address: str = "127.0.0.2") -> requests.Session:
    session = requests.Session()
    session.trust_env = False
    session.verify = str(deployment.cert.cert_path)
    session.mount("https://", FromAddress(address))
    session.mount("http://", FromAddress(address))
    return session


@contextmanager
def chromium(deployment: Deployment) -> Iterator[WebDriver]:
    profile = tempfile.mkdtemp(prefix="cda-nginx-chromium-")
    options = chrome_options(profile, (deployment.cert.spki,))
    options.add_argument(f"--host-resolver-rules=MAP {NAME} 127.0.0.1")
    options.binary_location = CHROMIUM
    driver = webdriver.Chrome(service=ChromeService(executable_path=CHROMEDRIVER), options=options)
    try:
        driver.set_page_load_timeout(30)
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def test_the_dashboard_signs_in_through_nginx_over_http2_with_secure_cookies(deployment: Deployment) -> None:
    with chromium(deployment) as driver:
        driver.get(deployment.public_url + "/signup")
        assert heading(driver) == "Create an account"
        assert driver.execute_script("return performance.getEntriesByType('navigation')[0].nextHopProtocol") == "h2"
        fill(driver, "email", EMAIL)
        fill(driver, "password", PASSWORD)
        fill(driver, "password_again", PASSWORD)
        press(driver, "form[action='/signup'] button[type=submit]")
        press(driver, "form.sign-out button")
        assert driver.current_url == deployment.public_url + "/login"
        fill(driver, "email", EMAIL)
        fill(driver, "password", PASSWORD)
        press(driver, "form[action='/login'] button[type=submit]")
        assert driver.current_url == deployment.public_url + "/connections"
        assert EMAIL in driver.find_element(By.CLASS_NAME, "who").text
        cookies = {cookie["name"]: cookie for cookie in driver.get_cookies()}
        assert cookies["cda_session"]["secure"] is True and cookies["cda_session"]["httpOnly"] is True


def test_rest_through_nginx_with_https_urls(deployment: Deployment) -> None:
    owner = client(deployment)
    url = deployment.public_url
    signed = owner.post(url + "/v1/session", json={"email": EMAIL, "password": PASSWORD}, timeout=10)
    if signed.status_code == 401:  # run alone, without the dashboard test's account
        assert owner.post(url + "/v1/accounts", json={"email": EMAIL, "password": PASSWORD}).status_code == 201
        signed = owner.post(url + "/v1/session", json={"email": EMAIL, "password": PASSWORD}, timeout=10)
    assert signed.status_code == 200, signed.text
    assert "secure" in signed.headers["set-cookie"].lower()
    csrf = {"X-CSRF-Token": signed.json()["csrfToken"]}
    linked = owner.post(
        url + "/v1/connections", json={"email": "alice@sandbox.test", "password": "sandbox"}, headers=csrf, timeout=30
    )
    assert linked.status_code == 201, linked.text
    key = owner.post(url + "/v1/keys", json={"name": "behind nginx"}, headers=csrf, timeout=10).json()["secret"]
    answer = owner.get(
        url + "/v1/whoami", headers={"Authorization": f"Bearer {key}", "X-Request-Id": "nginx-1"}, timeout=10
    )
    assert answer.status_code == 200 and answer.json()["handle"] == "alice"
    assert answer.headers["x-request-id"] == "nginx-1"
    # nginx passes the path on as sent (proxy_pass without a URI): an id holding %2F is no route, never the
    # route it spells once decoded (session 44).
    slashed = owner.get(
        url + "/v1/groups/builders-club%2Fposts", headers={"Authorization": f"Bearer {key}"}, timeout=10
    )
    assert slashed.status_code == 404 and "encoded slash" in slashed.json()["error"]["message"]

    metadata = owner.get(url + "/.well-known/oauth-authorization-server", timeout=10).json()
    assert metadata["issuer"] == url
    for field in ("authorization_endpoint", "token_endpoint", "registration_endpoint"):
        assert metadata[field].startswith(url + "/"), metadata[field]
    resource = owner.get(url + "/.well-known/oauth-protected-resource/v1/mcp", timeout=10).json()
    assert resource["resource"] == url + "/v1/mcp"
    challenge = owner.post(url + "/v1/mcp", json={}, timeout=10)
    assert challenge.status_code == 401
    assert (
        f'resource_metadata="{url}/.well-known/oauth-protected-resource/v1/mcp"'
        in challenge.headers["www-authenticate"]
    )
    (deployment.folder / "key").write_text(key)


def deployment_key(deployment: Deployment) -> str:
    """The key the REST test minted through nginx (kept in the deployment's folder); run alone, a test mints
    it the same way first."""
    key_file = deployment.folder / "key"
    if not key_file.exists():
        test_rest_through_nginx_with_https_urls(deployment)
    return key_file.read_text()


def test_mcp_through_nginx_with_the_official_client(deployment: Deployment) -> None:
    key = deployment_key(deployment)

    async def run(mode: str) -> tuple[set[str], dict[str, Any]]:
        http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {key}"},
            timeout=30,
            trust_env=False,
            verify=ssl.create_default_context(cafile=str(deployment.cert.cert_path)),
        )
        async with (
            http,
            Client(streamable_http_client(deployment.public_url + "/v1/mcp", http_client=http), mode=mode) as mcp,
        ):
            tools = {tool.name for tool in (await mcp.list_tools()).tools}
            result = await mcp.call_tool("whoami", {})
            assert result.is_error is False, result.content
            return tools, dict(result.structured_content or {})

    for mode in ("auto", "legacy"):  # the current protocol, and the handshake-era one
        tools, me = anyio.run(run, mode)
        assert {"whoami", "get_feed"} <= tools and "send_dm" not in tools  # a key with the read scopes
        assert me["handle"] == "alice"


def test_the_sign_in_throttle_counts_the_clients_nginx_saw(deployment: Deployment) -> None:
    url = deployment.public_url
    email = "throttled@example.com"
    first, second = client(deployment, "127.0.0.2"), client(deployment, "127.0.0.3")
    for spoofed in ("198.51.100.1", "198.51.100.2", "127.0.0.3", "10.0.0.1", "::1"):
        # A client's own X-Forwarded-For is replaced by nginx: every attempt counts against 127.0.0.2.
        refused = first.post(
            url + "/v1/session",
            json={"email": email, "password": "wrong password"},
            headers={"X-Forwarded-For": spoofed},
            timeout=10,
        )
        assert refused.status_code == 401, refused.text
    assert (
        first.post(
            url + "/v1/session",
            json={"email": email, "password": "wrong password"},
            headers={"X-Forwarded-For": "203.0.113.50"},
            timeout=10,
        ).status_code
        == 429
    )
    # Another client is not locked out by the first one's failures.
    assert (
        second.post(url + "/v1/session", json={"email": email, "password": "wrong password"}, timeout=10).status_code
        == 401
    )
    # Straight to gunicorn, 127.0.0.2 is not a trusted proxy: its X-Forwarded-For is ignored.
    direct = first.post(
        deployment.direct_url + "/v1/session",
        json={"email": email, "password": "wrong password"},
        headers={"X-Forwarded-For": "203.0.113.51", "Host": f"{NAME}:{url.rsplit(':', 1)[1]}"},
        timeout=10,
    )
    assert direct.status_code == 429


def test_over_a_unix_socket_the_sign_in_throttle_counts_the_clients_nginx_saw(
    tmp_path_factory: pytest.TempPathFactory, resolve_public_name: None
) -> None:
    """nginx passing to gunicorn over a unix socket (``--bind unix:PATH``, ``server unix:PATH`` upstream):
    its peer has no address, so no TRUSTED_PROXIES names it. Before, every client then counted as that one
    peer: five failed sign-ins of a stranger held back the owner's, from anywhere."""
    folder = tmp_path_factory.mktemp("nginx-unix")
    cert = make_certificate(folder, dns_names=(NAME,), stem="proxy", common_name="community-api test proxy")
    listen = free_port()
    sock = folder / "api.sock"
    env = service_env(folder, f"https://{NAME}:{listen}")  # and no TRUSTED_PROXIES: none to name
    args = gunicorn_args("tests.e2e.app_factory:get_app()", 0, workers=2, worker_class="gthread")
    args[args.index("--bind") + 1] = f"unix:{sock}"
    url = f"https://{NAME}:{listen}"
    deployment = Deployment(url, url, cert, folder)
    with (
        nginx(folder, render_nginx(folder, listen, f"unix:{sock}", cert), listen),
        serving(args, url + "/healthz", env=env, log_path=folder / "service.log", verify=str(cert.cert_path)),
    ):
        first, second = client(deployment, "127.0.0.2"), client(deployment, "127.0.0.3")
        deadline = time.monotonic() + 30  # nginx answered (502) before gunicorn listened on the socket
        while first.get(url + "/healthz", timeout=10).status_code != 200:
            assert time.monotonic() < deadline, (folder / "service.log").read_text()[-2000:]
            time.sleep(0.1)
        wrong = {"email": "held@example.com", "password": "wrong password"}
        statuses = [first.post(url + "/v1/session", json=wrong, timeout=10).status_code for _ in range(6)]
        assert statuses == [401] * 5 + [429]
        # The other client is not held back by the first one's failures, nor the owner once signed up.
        assert second.post(url + "/v1/session", json=wrong, timeout=10).status_code == 401
        signed_up = second.post(url + "/v1/accounts", json={"email": EMAIL, "password": PASSWORD}, timeout=10)
        assert signed_up.status_code == 201, signed_up.text
        assert first.post(url + "/v1/session", json={"email": EMAIL, "password": PASSWORD}, timeout=10).ok


def test_the_mcp_endpoint_is_not_buffered(deployment: Deployment) -> None:
    """Its answers go out as they come (an event stream would); its requests are read whole first, as
    every other route's (next test)."""
    site = (deployment.folder / "site.conf").read_text()
    block = site.split("location = /v1/mcp", 1)[1].split("}", 1)[0]
    assert "proxy_buffering off;" in block and "proxy_request_buffering" not in block


def test_clients_that_send_slowly_hold_nginx_not_gunicorn(deployment: Deployment) -> None:
    """Twelve connections start a POST to /v1/mcp with a good key and stop mid-body: gunicorn has eight
    threads (two workers of four), and with the MCP location's request buffering off (as it was) they
    held all of them: /healthz through nginx answered nothing within 10 s. nginx now reads a body whole
    before it passes it on."""
    key = deployment_key(deployment)
    port = int(deployment.public_url.rsplit(":", 1)[1])
    context = ssl.create_default_context(cafile=str(deployment.cert.cert_path))
    stalled = []
    try:
        for _ in range(12):
            raw = socket.create_connection(("127.0.0.1", port), timeout=10)
            tls = context.wrap_socket(raw, server_hostname=NAME)
            head = f"POST /v1/mcp HTTP/1.1\r\nHost: {NAME}:{port}\r\nContent-Type: application/json\r\n"
            head += f"Authorization: Bearer {key}\r\nAccept: application/json, text/event-stream\r\n"
            tls.sendall(f"{head}Content-Length: 1000\r\n\r\n{{".encode())
            stalled.append(tls)
        time.sleep(1)
        started = time.monotonic()
        answer = requests.get(deployment.public_url + "/healthz", verify=str(deployment.cert.cert_path), timeout=10)
        assert answer.status_code == 200 and time.monotonic() - started < 5
    finally:
        for tls in stalled:
            tls.close()


def test_an_http2_body_without_a_length_reaches_the_mcp_endpoint_whole(deployment: Deployment) -> None:
    """An HTTP/2 client need not send a content-length. With request buffering off (the MCP location
    above), nginx then passes the body on to gunicorn chunked, which the service used to read as empty:
    the MCP endpoint answered a JSON-RPC parse error to a well-formed call."""
    key = deployment_key(deployment)
    port = deployment.public_url.rsplit(":", 1)[1]
    message = b'{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "whoami", "arguments": {}}}'
    headers = [
        f"Authorization: Bearer {key}",
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
    ]
    command = ["curl", "--silent", "--show-error", "--http2", "--max-time", "30", "--request", "POST"]
    command += ["--resolve", f"{NAME}:{port}:127.0.0.1", "--cacert", str(deployment.cert.cert_path)]
    command += ["--upload-file", "-"]  # from a pipe: the length is not known, and none is sent
    command += [part for header in headers for part in ("--header", header)]
    command += ["--write-out", "\n%{http_version} %{http_code}", f"{deployment.public_url}/v1/mcp"]
    result = subprocess.run(command, input=message, capture_output=True, timeout=60, check=False)
    body, _, status = result.stdout.decode().rpartition("\n")
    assert status == "2 200", (status, body, result.stderr)
    answer = json.loads(body)
    assert answer["id"] == 9 and answer["result"]["structuredContent"]["handle"] == "alice", body


def test_an_operator_who_turns_on_nginx_cache_still_gets_each_key_its_own_answers(deployment: Deployment) -> None:
    """nginx's ``proxy_cache`` keys its entries on the URL alone, not on ``Authorization``: turned on for the
    whole site (as one turns it on "for speed"), it served the second key to ask for ``/v1/whoami`` or
    ``/v1/dms`` the first key's answer, another account's inbox. The data API's answers now say
    ``Cache-Control: no-store``, which nginx obeys; what is the same for everyone is still cached."""
    deployment_key(deployment)  # the owner, alice linked
    owner, url = client(deployment), deployment.public_url
    signed = owner.post(url + "/v1/session", json={"email": EMAIL, "password": PASSWORD}, timeout=10)
    csrf = {"X-CSRF-Token": signed.json()["csrfToken"]}
    linked = owner.post(
        url + "/v1/connections", json={"email": "bob@sandbox.test", "password": "sandbox"}, headers=csrf, timeout=30
    )
    assert linked.status_code == 201, linked.text
    keys = {}
    for connection in owner.get(url + "/v1/connections", timeout=10).json()["connections"]:
        wanted = {"name": connection["handle"], "connectionId": connection["id"], "scopes": ["groups:read", "dms:read"]}
        minted = owner.post(url + "/v1/keys", json=wanted, headers=csrf, timeout=10)
        assert minted.status_code == 201, minted.text
        keys[connection["handle"]] = minted.json()["secret"]
    assert set(keys) == {"alice", "bob"}

    folder = deployment.folder / "cached"
    folder.mkdir()
    listen, upstream = free_port(), int(deployment.direct_url.rsplit(":", 1)[1])
    cache = (
        f"    proxy_cache_path {folder / 'cache'} keys_zone=community_api_cache:1m;\n"
        "    proxy_cache community_api_cache;\n    proxy_cache_valid 200 10m;\n"
        "    add_header X-Cache-Status $upstream_cache_status always;\n"
    )
    with nginx(folder, render_nginx(folder, listen, upstream, deployment.cert, http_extra=cache), listen):
        cached, reader = f"https://{NAME}:{listen}", client(deployment)
        public = [reader.get(cached + "/v1/openapi.json", timeout=10) for _ in range(2)]
        assert [answer.headers["x-cache-status"] for answer in public] == ["MISS", "HIT"]  # the cache is on
        for path, mine in (("/v1/whoami", "handle"), ("/v1/dms", "conversations")):
            first = reader.get(cached + path, headers={"Authorization": f"Bearer {keys['alice']}"}, timeout=10)
            second = reader.get(cached + path, headers={"Authorization": f"Bearer {keys['bob']}"}, timeout=10)
            assert first.status_code == second.status_code == 200, (first.text, second.text)
            assert first.json()[mine] != second.json()[mine], path
            assert second.headers["x-cache-status"] != "HIT" and second.headers["cache-control"] == "no-store"
        again = reader.get(cached + "/v1/whoami", headers={"Authorization": f"Bearer {keys['bob']}"}, timeout=10)
        assert again.json()["handle"] == "bob"


def _wire_bytes(session: requests.Session, method: str, url: str, **kwargs: Any) -> tuple[requests.Response, bytes]:
    """The answer and its body as it crossed the wire (not decoded)."""
    answer = session.request(method, url, stream=True, timeout=30, **kwargs)
    return answer, answer.raw.read(decode_content=False)


def test_platform_data_goes_out_gzipped_and_pages_with_a_secret_do_not(deployment: Deployment) -> None:
    """A feed is large JSON (about 560 KB for 30 pages): nginx gzips it, and MCP's JSON answers, for a
    client that accepts it. The dashboard's pages carry a form token: they go out as they are (BREACH)."""
    key = deployment_key(deployment)
    owner, url = client(deployment), deployment.public_url
    bearer = {"Authorization": f"Bearer {key}"}
    feed_url = url + "/v1/groups/builders-club/posts?pages=2"

    packed, wire = _wire_bytes(owner, "GET", feed_url, headers={**bearer, "Accept-Encoding": "gzip"})
    assert packed.status_code == 200 and packed.headers["content-encoding"] == "gzip"
    assert "accept-encoding" in packed.headers["vary"].lower()
    plain, as_is = _wire_bytes(owner, "GET", feed_url, headers={**bearer, "Accept-Encoding": "identity"})
    assert plain.status_code == 200 and "content-encoding" not in plain.headers
    assert json.loads(gzip.decompress(wire)) == json.loads(as_is)
    assert len(wire) * 3 < len(as_is), (len(wire), len(as_is))

    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    call["params"] = {"name": "get_feed", "arguments": {"group": "builders-club", "pages": 2}}
    mcp_headers = {**bearer, "Accept": "application/json, text/event-stream", "Accept-Encoding": "gzip"}
    answer, wire = _wire_bytes(owner, "POST", url + "/v1/mcp", json=call, headers=mcp_headers)
    assert answer.status_code == 200 and answer.headers["content-encoding"] == "gzip"
    assert json.loads(gzip.decompress(wire))["result"]["structuredContent"]["posts"]

    page, body = _wire_bytes(owner, "GET", url + "/login", headers={"Accept-Encoding": "gzip"})
    assert page.status_code == 200 and "content-encoding" not in page.headers
    assert len(body) > 1024 and b"csrf_token" in body  # large enough to be gzipped, were it allowed
