"""Absolute URLs never come from the Host header: without COMMUNITY_API_PUBLIC_URL, a Host the service does
not serve answers 400; with it, every absolute URL comes from the setting."""

from __future__ import annotations

from typing import Any

import falcon.testing
import pytest

from adapters.settings import Settings, load_settings
from adapters.wiring import app_for, bootstrap
from fakes.clock import FakeClock
from fakes.key_store import FakeKeyStore
from fakes.platform import FakePlatformGateway
from fakes.platform_pace import FakePlatformPace
from fakes.throttle import FakeThrottle

METADATA = "/.well-known/oauth-authorization-server"


def client(**settings: Any) -> falcon.testing.TestClient:
    clock = FakeClock()
    deps = bootstrap(
        key_store=FakeKeyStore(),
        gateway=FakePlatformGateway(clock=clock),
        throttle=FakeThrottle(clock),
        pace=FakePlatformPace(clock),
        clock=clock,
        settings=Settings(mode="test", **settings),
    )
    return falcon.testing.TestClient(app_for(deps, Settings(mode="test", **settings)))


@pytest.mark.parametrize(
    "host",
    [
        "attacker.example",
        "attacker.example:8000",
        "127.0.0.1.attacker.example",
        "localhost.attacker.example:80",
        "attackerlocalhost:8000",  # ends in "localhost", but is no name under it
        "10.0.0.1",
        "",
        "[2001:db8::1]:80",
        "[::ffff:10.0.0.1]:80",
        "[::ffff:0:7f00:1]",  # IPv4-translated (RFC 2765), not mapped: no loopback
        "attacker.example.",
        "attacker.example.:8000",
        ".",
        "localhost..",
        # Not a Host header's syntax, though its text reads as loopback: absolute URLs made of it were
        # malformed (an issuer "http://[::1"), and the dashboard's forms answered 500.
        "[::1",
        "::1",
        "[::1]:80x",
        "127.0.0.1:8000:1",
        "[::1]]",
        "[[::1]]",
    ],
)
def test_a_host_the_service_does_not_serve_is_400(host: str) -> None:
    answer = client().simulate_get(METADATA, headers={"Host": host})
    assert answer.status_code == 400 and answer.json["error"]["code"] == "invalid_request"
    assert "attacker" not in answer.text
    said = "the request names no host" if not host else "this service does not serve the host named in the request"
    assert answer.json["error"]["message"].startswith(said)


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1:8000",
        "localhost",
        "localhost:5000",
        "[::1]:8000",
        "127.0.0.2",
        "localhost.",
        "localhost.:8000",
        "[::ffff:127.0.0.1]:8000",  # a service bound to it (an IPv6 socket on IPv4's loopback)
        "mcp.localhost:8000",  # a name under localhost is loopback too (RFC 6761 §6.3; browsers resolve it so)
    ],
)
def test_loopback_hosts_are_served_with_their_own_urls(host: str) -> None:
    answer = client().simulate_get(METADATA, headers={"Host": host})
    assert answer.status_code == 200 and answer.json["issuer"] == f"http://{host}"


def test_allowed_hosts_are_served() -> None:
    api = client(allowed_hosts=("api.internal", "proxy.internal:8443"))
    assert (
        api.simulate_get(METADATA, headers={"Host": "api.internal:9000"}).json["issuer"] == "http://api.internal:9000"
    )
    assert api.simulate_get(METADATA, headers={"Host": "proxy.internal:8443"}).status_code == 200
    assert api.simulate_get(METADATA, headers={"Host": "proxy.internal:9999"}).status_code == 400
    assert api.simulate_get(METADATA, headers={"Host": "api.internal."}).status_code == 200  # the absolute name
    assert api.simulate_get(METADATA, headers={"Host": "proxy.internal.:8443"}).status_code == 200


def test_an_allowed_host_written_absolute_or_in_capitals_is_served() -> None:
    api = client(
        allowed_hosts=load_settings(
            {"COMMUNITY_API_MODE": "test", "COMMUNITY_API_ALLOWED_HOSTS": "API.Internal."}
        ).allowed_hosts
    )
    for host in ("api.internal", "api.internal.", "Api.Internal:9000"):
        assert api.simulate_get(METADATA, headers={"Host": host}).status_code == 200, host


def test_a_blank_allowed_host_allows_no_request_without_a_host() -> None:
    api = client(allowed_hosts=("api.internal", " "))
    refused = api.simulate_get(METADATA, headers={"Host": ""})
    assert refused.status_code == 400 and refused.json["error"]["message"].startswith("the request names no host")


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_health_is_answered_whatever_the_host(path: str) -> None:
    """A probe (a container's health check, a load balancer's) names the host by its address, which the
    operator never listed: health shows nothing that a host could make into a URL."""
    answer = client().simulate_get(path, headers={"Host": "10.1.2.3:8000"})
    assert answer.status_code in (200, 503) and answer.json["status"], answer.text


def test_an_asterisk_request_target_keeps_the_host_header() -> None:
    """``OPTIONS *`` (RFC 9112 §3.2.4) is no absolute form: the Host header still names the host."""
    answer = client().simulate_options("/", headers={"Host": "localhost:8000"}, extras={"RAW_URI": "*"})
    assert answer.status_code == 200 and "GET" in answer.headers["allow"], answer.text


def test_with_a_public_url_every_absolute_url_comes_from_it() -> None:
    answer = client(public_url="https://api.example").simulate_get(
        METADATA, headers={"Host": "attacker.example", "X-Forwarded-Host": "attacker.example"}
    )
    assert answer.status_code == 200
    assert "attacker" not in answer.text and answer.json["issuer"] == "https://api.example"


@pytest.mark.parametrize(
    ("target", "host", "issuer"),
    [
        ("http://attacker.example/.well-known/oauth-authorization-server", "127.0.0.1:8000", None),
        ("http://user@127.0.0.1/.well-known/oauth-authorization-server", "127.0.0.1:8000", None),
        ("http://127.0.0.1:8000/.well-known/oauth-authorization-server", "attacker.example", "http://127.0.0.1:8000"),
        ("http://localhost:5000/.well-known/oauth-authorization-server", "", "http://localhost:5000"),
    ],
)
def test_a_request_target_in_absolute_form_names_the_host(target: str, host: str, issuer: str | None) -> None:
    """``GET http://host/path`` (RFC 9112 §3.2.2): the host is the target's, the Host header is ignored; the
    service had checked the Host header and made its URLs from it, answering for a host it was not asked."""
    answer = client().simulate_get(METADATA, headers={"Host": host}, extras={"RAW_URI": target})
    if issuer is None:
        assert answer.status_code == 400 and "attacker" not in answer.text
        assert answer.json["error"]["message"].startswith("this service does not serve the host")
    else:
        assert answer.status_code == 200 and answer.json["issuer"] == issuer
