"""``community-api demo`` (what ``make demo`` runs) on a fresh database: it prints a working key and curl
lines that work when pasted, and SIGTERM ends it with its processes."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from adapters.platform.procfs import descendants, process_table
from scripts.processes import ROOT, alive, free_port

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture
def demo_env() -> Iterator[dict[str, str]]:
    """The environment a demo runs in: no setting of ours, and a temporary folder of its own (``TMPDIR``)
    removed after the test. The demo keeps its folder (logs, database) for its user to read; run by the tests
    it had left one in /tmp per run, hundreds of MB over time. Short, under /tmp: the browser's sockets live
    under it, and a socket's path is limited to 107 bytes."""
    folder = tempfile.mkdtemp(prefix="cda-demo-test-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMMUNITY_API_")}
    yield env | {"TMPDIR": folder}
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("stop", ["Ctrl-C", "SIGTERM", "SIGHUP", "SIGTERM twice"])
def test_demo_prints_curl_lines_that_work(stop: str, demo_env: dict[str, str]) -> None:
    """...and ends everything it started when stopped: by Ctrl-C in its terminal (SIGINT to its whole
    process group), by SIGTERM, by its terminal closing (SIGHUP), or by SIGTERM to `make demo`'s group,
    which gives the demo a second one moments later (make passes its own on to its child)."""
    api_port, platform_port = free_port(), free_port()
    metrics = Path(demo_env["TMPDIR"]) / "real-service-metrics"
    real_database = Path(demo_env["TMPDIR"]) / "real-service.sqlite3"
    if stop == "SIGHUP":
        # Once, from a shell that exported a real service's settings: the demo must not follow them to its
        # public URL, a Grid that cannot reach the stand-in, or its metrics folder (which a start empties).
        metrics.mkdir()
        (metrics / "counter_1.db").write_bytes(b"the real service's")
        demo_env = demo_env | {
            "COMMUNITY_API_PUBLIC_URL": "https://api.example.com",
            "COMMUNITY_API_SELENIUM_REMOTE_URL": "http://127.0.0.1:9",
            "COMMUNITY_API_THROTTLE_STORAGE": "redis://127.0.0.1:9/0",  # its shared storage: nothing listens
            "COMMUNITY_API_TRUSTED_PROXIES": "",  # set empty: as if not set, and not named
            "COMMUNITY_API_DB": str(real_database),  # a tunable, but the demo's own database wins
            "PROMETHEUS_MULTIPROC_DIR": str(metrics),
        }
    demo = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "adapters.cli",
            "demo",
            "--bind",
            f"127.0.0.1:{api_port}",
            "--sandbox-bind",
            f"127.0.0.1:{platform_port}",
        ],
        cwd=ROOT,
        env=demo_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # a group of its own, as a terminal gives a command it runs
    )
    lines: list[str] = []
    started: list[int] = []
    try:
        deadline = time.monotonic() + 180
        assert demo.stdout is not None
        while time.monotonic() < deadline:
            line = demo.stdout.readline()
            if not line:
                break
            lines.append(line.rstrip("\n"))
            if line.startswith("Press Ctrl-C"):
                break
        output = "\n".join(lines)
        assert "Press Ctrl-C" in output, output
        if stop == "SIGHUP":
            assert (
                "demo: not passing on COMMUNITY_API_PUBLIC_URL, COMMUNITY_API_SELENIUM_REMOTE_URL, "
                "COMMUNITY_API_THROTTLE_STORAGE, PROMETHEUS_MULTIPROC_DIR from this shell" in output
            )
            metadata = requests.get(f"http://127.0.0.1:{api_port}/.well-known/oauth-authorization-server", timeout=10)
            assert metadata.json()["issuer"] == f"http://127.0.0.1:{api_port}"
            assert (metrics / "counter_1.db").read_bytes() == b"the real service's"
            assert not real_database.exists()
        # The stand-in speaks HTTPS (HTTP/2), as the real hosts do, with the certificate it printed.
        platform = re.search(r"the stand-in platform: (https://\S+) .*self-signed: (\S+)\)", output)
        assert platform, output
        protocol = subprocess.run(
            [
                "curl",
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_version}",
                "--cacert",
                platform.group(2),
                platform.group(1) + "/login",
            ],
            capture_output=True,
            text=True,
            timeout=10,
        )
        assert protocol.stdout == "2"
        # The dashboard's address and account, as printed, sign in.
        dashboard = re.search(r"The dashboard: (http://\S+) \(sign in as (\S+) / (\S+)\)", output)
        assert dashboard, output
        signed_in = requests.post(
            dashboard.group(1).removesuffix("/login") + "/v1/session",
            json={"email": dashboard.group(2), "password": dashboard.group(3)},
            timeout=30,
        )
        assert signed_in.status_code == 200, signed_in.text
        assert requests.get(dashboard.group(1), timeout=30).status_code == 200
        curls = [line.strip() for line in lines if line.strip().startswith("curl ")]
        assert len(curls) >= 13
        for command in curls:
            if "-X DELETE" in command or " -d " in command or "openapi" in command:
                continue  # reads only: the demo's writes would post as alice
            result = subprocess.run(shlex.split(command), capture_output=True, text=True, timeout=120)
            body = json.loads(result.stdout)
            assert "error" not in body, (command, body)
        if stop == "SIGTERM":  # once: the README's example scripts, run as a user runs them against the demo
            key = re.search(r"cda_[A-Za-z0-9]{49}", output)
            assert key, output
            env = demo_env | {"CDA_URL": f"http://127.0.0.1:{api_port}", "CDA_KEY": key.group(0)}
            digest = subprocess.run(
                [sys.executable, "scripts/examples/digest.py", "--group", "builders-club", "--pages", "1"],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=180,
            )
            assert digest.returncode == 0, digest.stderr
            assert digest.stdout.startswith("As @alice (Alice Andersen), since 24h:\nbuilders-club: "), digest.stdout
            assert re.search(r"^Waiting for your reply: [1-9]\d* conversations$", digest.stdout, re.MULTILINE)
            # The comment example, run twice under one Idempotency-Key (a run cut short, finished): one comment.
            post = re.search(r"/v1/posts/([0-9a-f]{32})", output)
            assert post, output
            text = f"From the example, {api_port}"
            example = [sys.executable, "scripts/examples/comment.py", post.group(1), text, "--idempotency-key", "e2e-1"]
            runs = [
                subprocess.run(example, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60) for _ in "12"
            ]
            assert [run.returncode for run in runs] == [0, 0], [run.stderr for run in runs]
            made = re.fullmatch(r"Commented: ([0-9a-f]{32})\n", runs[0].stdout)
            assert (
                made
                and runs[1].stdout
                == f"Commented: {made.group(1)} (made by an earlier run: answered again, not posted twice)\n"
            )
            comments = subprocess.run(
                [
                    "curl",
                    "-s",
                    "-H",
                    f"Authorization: Bearer {key.group(0)}",
                    f"http://127.0.0.1:{api_port}/v1/posts/{post.group(1)}/comments",
                ],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert [c["content"] for c in json.loads(comments.stdout)["comments"]].count(text) == 1
        config_start = output.index("{", output.index("MCP client configuration"))
        config = json.loads(output[config_start : output.index("\nOpenAPI")])
        assert config["mcpServers"]["community"]["url"].endswith("/v1/mcp")
        started = descendants(demo.pid, process_table())
        assert len(started) >= 4  # the stand-in, gunicorn's master and workers, a browser
    finally:
        if stop == "Ctrl-C":
            os.killpg(demo.pid, signal.SIGINT)
        elif stop == "SIGTERM twice":
            # More arrive while the first unwinds: before, one of them ended the demo there, its stand-in
            # and service left serving (seen with 0.3 ms between two). A burst over 2 ms covers the moment.
            os.killpg(demo.pid, signal.SIGTERM)
            burst_end = time.perf_counter() + 0.002
            while time.perf_counter() < burst_end and demo.poll() is None:
                demo.send_signal(signal.SIGTERM)
        else:
            demo.send_signal(getattr(signal, stop))
        demo.wait(30)
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [pid for pid in started if alive(pid)]
    for pid in left:  # so that a failure here does not leave them serving after the test
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert demo.returncode == 0
    assert left == []
    for port in (api_port, platform_port):
        probe = subprocess.run(["curl", "-s", "-o", "/dev/null", f"http://127.0.0.1:{port}/"], timeout=10)
        assert probe.returncode != 0, f"something still listens on {port}"
    # What stays: the logs and the database, named at the end; not the pace's mapped file (8 MiB a run).
    (folder,) = Path(demo_env["TMPDIR"]).glob("community-api-demo-*")
    assert sorted(p.name for p in folder.iterdir()) == ["demo.sqlite3", "sandbox.log", "service.log"]
    assert demo.stdout is not None
    with demo.stdout:
        assert f"demo: stopped; its logs and database stay in {folder}" in demo.stdout.read()


@pytest.mark.parametrize("option", ["--bind", "--sandbox-bind"])
def test_demo_refuses_an_address_another_program_listens_at(option: str) -> None:
    """Before, with another web server on the service's port, the demo signed in to that server and ended
    in a traceback (501 for POST /v1/session)."""
    other = {"--bind": "--sandbox-bind", "--sandbox-bind": "--bind"}[option]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        result = subprocess.run(
            [sys.executable, "-m", "adapters.cli", "demo", option, address, other, f"127.0.0.1:{free_port()}"],
            cwd=ROOT,
            env={k: v for k, v in os.environ.items() if not k.startswith("COMMUNITY_API_")},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert f"demo: cannot listen at {address} (Address already in use)" in result.stderr
    port = int(address.rsplit(":", 1)[1])
    assert f"make demo DEMO_ARGS='{option} 127.0.0.1:{port + 10}'" in result.stderr  # the next one tried
    assert result.stdout == ""  # nothing started, nothing announced


@pytest.mark.parametrize("bind", ["127.0.0.1:\u00b2", ":8000", "127.0.0.1:65536", "127.0.0.1:0", "127.0.0.1"])
def test_demo_refuses_what_is_no_host_and_port_before_starting_anything(bind: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "adapters.cli", "demo", "--bind", bind, "--sandbox-bind", f"127.0.0.1:{free_port()}"],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if not k.startswith("COMMUNITY_API_")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr == (
        f"demo: --bind takes HOST:PORT (a port from 1 to 65535), such as 127.0.0.1:8000, not {bind!r}\n"
    )
    assert result.stdout == ""


def test_exit_after_setup_prints_the_key_and_its_lines_then_stops_everything(demo_env: dict[str, str]) -> None:
    """``demo --exit-after-setup``, for a script that wants the set-up and its lines, not a running demo:
    exit status 0, the key printed, and nothing left listening."""
    api_port, platform_port = free_port(), free_port()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "adapters.cli",
            "demo",
            "--bind",
            f"127.0.0.1:{api_port}",
            "--sandbox-bind",
            f"127.0.0.1:{platform_port}",
            "--exit-after-setup",
        ],
        cwd=ROOT,
        env=demo_env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert re.search(r"Your key \(every scope, acting as alice\):\n  cda_\S+\n", result.stdout)
    assert "curl -s -H 'Authorization: Bearer cda_" in result.stdout
    assert "demo: stopped; its logs and database stay in" in result.stdout
    for port in (api_port, platform_port):
        probe = subprocess.run(["curl", "-s", "-o", "/dev/null", f"http://127.0.0.1:{port}/"], timeout=10)
        assert probe.returncode != 0, f"something still listens on {port}"


def test_ctrl_c_stops_the_demo_even_when_it_started_with_sigint_ignored(demo_env: dict[str, str]) -> None:
    """A command started by a script's `&` (or nohup, or some CI runners) inherits SIGINT ignored, and
    Python then leaves it so: before, the demo said "Press Ctrl-C to stop" and outlived every Ctrl-C, its
    stand-in and service with it. Stopped here while it starts, which ends it the same way."""
    demo = subprocess.Popen(
        [sys.executable, "-m", "adapters.cli", "demo", "--bind", f"127.0.0.1:{free_port()}"]
        + ["--sandbox-bind", f"127.0.0.1:{free_port()}"],
        cwd=ROOT,
        env=demo_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # noqa: PLW1509 - the inherited state
    )
    try:
        assert demo.stdout is not None
        assert "starting the stand-in platform" in demo.stdout.readline()
        deadline = time.monotonic() + 30
        started: list[int] = []
        while not started and time.monotonic() < deadline:  # the stand-in, started first
            started = descendants(demo.pid, process_table())
            time.sleep(0.05)
        assert started
    finally:
        os.killpg(demo.pid, signal.SIGINT)
        try:
            demo.wait(30)
        except subprocess.TimeoutExpired:
            left = descendants(demo.pid, process_table())
            os.killpg(demo.pid, signal.SIGKILL)
            for pid in left:  # the stand-in and the service, in groups of their own
                os.kill(pid, signal.SIGTERM)
            raise
    demo.stdout.close()
    deadline = time.monotonic() + 15
    while any(alive(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [pid for pid in started if alive(pid)] == []


def test_a_service_that_will_not_start_says_why(demo_env: dict[str, str]) -> None:
    """A setting the service refuses (``make demo`` passes the environment on): the demo said only "the
    service exited with code 2"; the reason was in a log in a temporary folder it never named."""
    demo_env["COMMUNITY_API_PLATFORM_READS_PER_MINUTE"] = "100000"
    result = subprocess.run(
        [sys.executable, "-m", "adapters.cli", "demo", "--bind", f"127.0.0.1:{free_port()}"]
        + ["--sandbox-bind", f"127.0.0.1:{free_port()}"],
        cwd=ROOT,
        env=demo_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "demo: the service exited with code 2" in result.stderr
    assert "COMMUNITY_API_PLATFORM_READS_PER_MINUTE must be from 1 to 65536" in result.stderr
