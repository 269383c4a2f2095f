"""The sandbox as a real process: ``python -m scripts.sandbox`` under granian, over HTTPS (HTTP/2 and
HTTP/1.1) or plain HTTP."""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from cryptography import x509

from scripts.processes import ROOT
from scripts.sandbox.tls import spki_hash
from tests.sandbox.server import sandbox_server

BROWSER_UA = {"User-Agent": "Mozilla/5.0 (X11; Linux x86_64) Chrome/130.0 Safari/537.36"}


def alpn(base: str, cert: str, offered: list[str]) -> str | None:
    """The protocol the server picks over TLS from those a client offers."""
    host, port = base.removeprefix("https://").rsplit(":", 1)
    context = ssl.create_default_context(cafile=cert)
    context.set_alpn_protocols(offered)
    with (
        socket.create_connection((host, int(port)), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        return tls.selected_alpn_protocol()


@pytest.mark.slow
@pytest.mark.parametrize("mode", [(), ("--plain-http",)], ids=["https", "plain-http"])
def test_serves_until_sigterm(mode: tuple[str, ...]) -> None:
    with sandbox_server("--seed", "3", *mode) as running:
        base, proc, verify = running.base, running.process, running.verify
        assert base.startswith("http://" if mode else "https://")
        assert requests.get(f"{base}/login", timeout=5, verify=verify).status_code == 200
        blocked = requests.get(f"{base}/api2/self", timeout=5, verify=verify)  # python-requests: not a browser
        assert blocked.status_code == 403 and "Request blocked" in blocked.text
        with requests.Session() as s:
            s.trust_env = False  # else REQUESTS_CA_BUNDLE, when set, replaces the session's verify
            s.verify = verify
            s.headers.update(BROWSER_UA)
            s.cookies.set("aws-waf-token", s.get(f"{base}/__fw/challenge", timeout=5).json()["token"])
            r = s.post(
                f"{base}/api2/auth/login", json={"email": "alice@sandbox.test", "password": "sandbox"}, timeout=5
            )
            assert r.status_code == 200 and "auth_token" in s.cookies
            state = s.get(f"{base}/__sandbox/state", timeout=5).json()
            assert state["seed"] == 3
            urls = [
                f"{base}/_next/data/{state['buildId']}/builders-club.json?group=builders-club&p={p}"
                for p in range(1, 31)
            ]
            cookies = s.cookies.get_dict()
            with ThreadPoolExecutor(30) as pool:  # 30 pages at once, as the browser does
                codes = list(
                    pool.map(
                        lambda u: (
                            requests.get(u, headers=BROWSER_UA, cookies=cookies, verify=verify, timeout=10).status_code
                        ),
                        urls,
                    )
                )
            assert codes == [200] * 30
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(15) == 0


@pytest.mark.slow
def test_https_offers_http2_and_http1_and_the_certificate_names_loopback() -> None:
    with sandbox_server() as running:
        assert running.cert and running.spki
        assert alpn(running.base, running.cert, ["h2", "http/1.1"]) == "h2"
        assert alpn(running.base, running.cert, ["http/1.1"]) == "http/1.1"  # a client that asks for it
        certificate = x509.load_pem_x509_certificate(Path(running.cert).read_bytes())
        assert spki_hash(certificate) == running.spki
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert {str(ip) for ip in names.get_values_for_type(x509.IPAddress)} == {"127.0.0.1", "::1"}
        assert names.get_values_for_type(x509.DNSName) == ["localhost"]
        with pytest.raises(requests.exceptions.SSLError):  # not trusted by anyone who was not told of it
            requests.get(f"{running.base}/login", timeout=5)
    with sandbox_server("--http1") as running:
        assert running.cert is not None
        assert alpn(running.base, running.cert, ["h2", "http/1.1"]) == "http/1.1"


@pytest.mark.slow
def test_community_api_sandbox_passes_its_options_on() -> None:
    """``community-api sandbox``, as the README has a user start it: seed 1 unless told, plain HTTP or
    HTTPS with HTTP/1.1 only when asked."""
    cli = ("adapters.cli", "sandbox")
    with sandbox_server("--plain-http", command=cli) as running:
        assert running.base.startswith("http://") and running.cert is None
        assert requests.get(f"{running.base}/__sandbox/state", timeout=5).json()["seed"] == 1
    with sandbox_server("--http1", "--seed", "4", command=cli) as running:
        assert running.cert is not None
        assert alpn(running.base, running.cert, ["h2", "http/1.1"]) == "http/1.1"
        state = requests.get(f"{running.base}/__sandbox/state", timeout=5, verify=running.verify).json()
        assert state["seed"] == 4


def test_an_address_in_use_is_refused_in_one_line_before_announcing_anything() -> None:
    """Before, the "listening" line came from the other program's answer, then granian failed to bind."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        bind = f"127.0.0.1:{taken.getsockname()[1]}"
        result = subprocess.run(
            [sys.executable, "-m", "scripts.sandbox", "--bind", bind, "--plain-http"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert result.returncode == 1
    assert result.stderr == f"sandbox: cannot listen at {bind} (Address already in use)\n"
    assert "listening" not in result.stdout
