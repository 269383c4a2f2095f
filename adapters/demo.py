"""``community-api demo``: the stand-in platform and the service on loopback, ready to try.

It starts the stand-in platform and the service (gunicorn, two workers) as processes of their own,
creates a demo account, links alice through the headless browser exactly as a user's account would be
linked, mints a key with every scope, and prints curl lines for every route and an MCP client
configuration. Ctrl-C, SIGTERM or its terminal closing (SIGHUP) ends both, and whatever they started.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import FrameType

import requests

from adapters.gunicorn_command import host_and_port
from adapters.serve_bind import bind_refusal
from community_api.scopes import ALL_SCOPES

DEMO_EMAIL = "demo@example.com"
DEMO_PASSWORD = "demo-password-123"  # noqa: S105 - the throw-away demo account, printed to the user


def _wait(url: str, process: subprocess.Popen[bytes], what: str, log: Path, timeout: float = 60.0) -> None:
    """Until ``url`` answers 200 (not merely answers: only the process started here serves it). A process
    that ends first is reported with the end of its log, where it said why (a setting it refused)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            said = log.read_text(errors="replace").strip()[-2000:]
            raise SystemExit(f"demo: the {what} exited with code {process.returncode}" + (f":\n{said}" if said else ""))
        try:
            if requests.get(url, timeout=1).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.2)
    raise SystemExit(f"demo: the {what} did not answer at {url} within {timeout:.0f} s")


def _wait_for_sandbox(log_path: Path, process: subprocess.Popen[bytes], timeout: float = 60.0) -> tuple[str, str, str]:
    """The stand-in's https URL, certificate file and key hash, once it has printed that it listens."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        said = log_path.read_text(errors="replace")
        url, cert, spki = (
            re.search(rf"sandbox {what} (\S+)", said) for what in ("listening on", "certificate", "spki")
        )
        if url and cert and spki:
            return url.group(1), cert.group(1), spki.group(1)
        if process.poll() is not None:
            raise SystemExit(f"demo: the stand-in platform exited with code {process.returncode}:\n{said[-2000:]}")
        time.sleep(0.1)
    raise SystemExit(f"demo: the stand-in platform did not start within {timeout:.0f} s (log: {log_path})")


def _start(args: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """A child in a process group of its own: a terminal's Ctrl-C reaches the demo alone, which then stops
    the whole group (``_stop``), gunicorn's workers and their browsers included."""
    return subprocess.Popen(
        args,
        env=env,
        stdout=open(log, "wb"),  # noqa: SIM115 - lives as long as the process
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


class StopOnFirstSignal:
    """The demo's handler of SIGINT, SIGTERM and SIGHUP: the first raises ``KeyboardInterrupt``, which
    stops the demo and what it started; any later one is ignored. Stopping ``make demo`` with SIGTERM to its
    group sends the demo two at once — the group's and the one make passes on to its child — and when the
    second arrived while the first was unwinding, before the ``finally`` ignored further signals, a second
    ``KeyboardInterrupt`` ended the demo there: its stand-in and service (groups of their own) stayed,
    serving on their ports. A second Ctrl-C pressed at once did the same."""

    def __init__(self) -> None:
        self.raised = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.raised:
            return
        self.raised = True
        raise KeyboardInterrupt


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the child's group (gunicorn's graceful stop), then SIGKILL to whatever of the group is
    left after 15 s: a worker that outlived its master would otherwise keep the port after the demo ended."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(15)
    with contextlib.suppress(ProcessLookupError):  # the group ended with its leader
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def curl_lines(api: str, key: str, group: str, post_id: str, conversation_id: str, bob_id: str) -> list[str]:
    auth = f"-H 'Authorization: Bearer {key}'"
    json_header = "-H 'Content-Type: application/json'"
    return [
        f"curl -s {auth} {api}/v1/whoami",
        f"curl -s {auth} {api}/v1/groups",
        f"curl -s {auth} {api}/v1/groups/{group}",
        f"curl -s {auth} '{api}/v1/groups/{group}/posts?pages=2&sort=newest&since=7d'",
        f"curl -s {auth} {api}/v1/posts/{post_id}",
        f"curl -s {auth} {api}/v1/posts/{post_id}/comments",
        f'curl -s {auth} {json_header} -d \'{{"title": "Hello from the API", "content": "Posted by a script"}}\' '
        f"{api}/v1/groups/{group}/posts",
        f'curl -s {auth} {json_header} -d \'{{"content": "Nice post!"}}\' {api}/v1/posts/{post_id}/comments',
        f"curl -s {auth} -X DELETE {api}/v1/posts/POST_ID_YOU_CREATED",
        f"curl -s {auth} -X DELETE {api}/v1/comments/COMMENT_ID_YOU_CREATED",
        f"curl -s {auth} '{api}/v1/dms?awaitingReply=true'",
        f"curl -s {auth} {api}/v1/dms/{conversation_id}",
        f'curl -s {auth} {json_header} -d \'{{"to": "{bob_id}", "content": "Hi Bob"}}\' \'{api}/v1/dms?group={group}\'',
    ]


def _refuse_if_taken(bind: str, option: str) -> None:
    """Stop with a clear line when another program already listens at ``bind`` (HOST:PORT). Without this,
    the service could not bind, and the demo would talk to whatever answers there."""
    host, port = host_and_port(bind)
    if not host or port is None or not (port.isascii() and port.isdigit()) or not 1 <= int(port) <= 65535:
        raise SystemExit(
            f"demo: {option} takes HOST:PORT (a port from 1 to 65535), such as 127.0.0.1:8000, not {bind!r}"
        )
    error = bind_refusal(host, int(port))
    if error is not None:
        raise SystemExit(
            f"demo: cannot listen at {bind} ({error.strerror}): another program may be using it; "
            f"choose another: make demo DEMO_ARGS='{option} {host}:{int(port) + 10}' "
            f"(or community-api demo {option} {host}:{int(port) + 10})"
        )


# Settings that aim the service outside the demo: exported in a shell for a real service (its public URL and
# hosts, a Selenium Grid, a shared throttle storage, its metrics folder, which a new service empties of its
# files), they would send the demo's links to another site, its browsers to machines that cannot reach the
# stand-in, or write into the real service's storage. They are not passed on, and the demo says so; the
# service's tunables (its pace, pool size, sign-up, secret) are.
NOT_FOR_THE_DEMO = (
    "COMMUNITY_API_PUBLIC_URL",
    "COMMUNITY_API_ALLOWED_HOSTS",
    "COMMUNITY_API_MCP_ALLOWED_HOSTS",
    "COMMUNITY_API_MCP_ALLOWED_ORIGINS",
    "COMMUNITY_API_TRUSTED_PROXIES",
    "COMMUNITY_API_SELENIUM_REMOTE_URL",
    "COMMUNITY_API_THROTTLE_STORAGE",
    "COMMUNITY_API_PREVIOUS_SECRET",
    "PROMETHEUS_MULTIPROC_DIR",
)


def demo_environment(environ: Mapping[str, str], own: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The service's environment: ``environ`` without the settings that aim outside the demo, with the
    demo's ``own`` settings over it; and the names left out that were set."""
    dropped = [name for name in NOT_FOR_THE_DEMO if environ.get(name)]
    env = {name: value for name, value in environ.items() if name not in NOT_FOR_THE_DEMO}
    return {**env, **own}, dropped


def run_demo(bind: str, sandbox_bind: str, *, exit_after_setup: bool = False) -> int:
    api = f"http://{bind}"
    _refuse_if_taken(bind, "--bind")
    _refuse_if_taken(sandbox_bind, "--sandbox-bind")
    folder = Path(tempfile.mkdtemp(prefix="community-api-demo-"))
    database = folder / "demo.sqlite3"
    print(f"demo: starting the stand-in platform on https://{sandbox_bind} and the service on {api} …", flush=True)
    end = StopOnFirstSignal()
    signal.signal(signal.SIGTERM, end)
    signal.signal(signal.SIGHUP, end)  # its terminal closed: the children, in groups of their own, would stay
    # "Press Ctrl-C to stop" holds even when started with SIGINT ignored (from a script's `&`, nohup, some CI
    # runners): Python then leaves it ignored, and the demo and its children would outlive every Ctrl-C.
    signal.signal(signal.SIGINT, end)
    # Started inside the ``try``, so that a signal at any moment after the handlers are set stops them.
    sandbox: subprocess.Popen[bytes] | None = None
    service: subprocess.Popen[bytes] | None = None
    try:
        sandbox = _start([sys.executable, "-m", "scripts.sandbox", "--bind", sandbox_bind], folder / "sandbox.log")
        # The stand-in speaks HTTPS with a certificate made at its start: the service's browser is told to
        # trust exactly that certificate's key.
        platform, certificate, spki = _wait_for_sandbox(folder / "sandbox.log", sandbox)
        own = {
            "COMMUNITY_API_MODE": "demo",
            "COMMUNITY_API_DB": str(database),
            "COMMUNITY_API_PLATFORM_URL": platform,
            "COMMUNITY_API_PLATFORM_API_URL": platform + "/api2",
            "COMMUNITY_API_BROWSER_TRUSTED_SPKI": spki,
        }
        env, dropped = demo_environment(os.environ, own)
        if dropped:
            print(
                f"demo: not passing on {', '.join(dropped)} from this shell: the demo serves on loopback, with "
                "its own browsers, storage and metrics",
                flush=True,
            )
        env.setdefault("COMMUNITY_API_SECRET", "demo-secret-" + os.urandom(16).hex())
        serve = [sys.executable, "-m", "adapters.cli", "serve", "--bind", bind, "--workers", "2"]
        service = _start(serve, folder / "service.log", env)
        _wait(api + "/v1/openapi.json", service, "service", folder / "service.log")
        web = requests.Session()
        web.post(f"{api}/v1/accounts", json={"email": DEMO_EMAIL, "password": DEMO_PASSWORD}, timeout=10)
        signed = web.post(f"{api}/v1/session", json={"email": DEMO_EMAIL, "password": DEMO_PASSWORD}, timeout=10)
        signed.raise_for_status()
        web.headers["X-CSRF-Token"] = signed.json()["csrfToken"]
        print("demo: linking alice@sandbox.test through the headless browser …", flush=True)
        linked = web.post(
            f"{api}/v1/connections", json={"email": "alice@sandbox.test", "password": "sandbox"}, timeout=120
        )
        if linked.status_code != 201:
            raise SystemExit(f"demo: linking alice failed: {linked.status_code} {linked.text}")
        scopes = list(ALL_SCOPES)
        minted = web.post(f"{api}/v1/keys", json={"name": "demo key", "scopes": scopes}, timeout=10)
        minted.raise_for_status()
        key = minted.json()["secret"]
        auth = {"Authorization": f"Bearer {key}"}
        group = "builders-club"
        feed = requests.get(f"{api}/v1/groups/{group}/posts", headers=auth, timeout=120).json()
        post_id = next(p["id"] for p in feed["posts"] if p["commentCount"]) if feed.get("posts") else "POST_ID"
        inbox = requests.get(f"{api}/v1/dms", headers=auth, timeout=120).json().get("conversations", [])
        bob = next((c for c in inbox if (c.get("with") or {}).get("handle") == "bob"), None)
        conversation_id = bob["id"] if bob else "CONVERSATION_ID"
        bob_id = bob["with"]["id"] if bob else "BOB_ID"
        print()
        print(
            f"The service: {api}   the stand-in platform: {platform} (log in there as alice@sandbox.test / sandbox;"
            f" its certificate is self-signed: {certificate})"
        )
        print(f"The dashboard: {api}/login (sign in as {DEMO_EMAIL} / {DEMO_PASSWORD})   logs: {folder}")
        print(f"\nYour key (every scope, acting as alice):\n  {key}\n")
        print("Try:")
        for line in curl_lines(api, key, group, post_id, conversation_id, bob_id):
            print("  " + line)
        mcp = {"mcpServers": {"community": {"type": "http", "url": f"{api}/v1/mcp", "headers": auth}}}
        print("\nMCP client configuration:\n" + json.dumps(mcp, indent=2))
        print(f"\nOpenAPI: curl -s {shlex.quote(api + '/v1/openapi.json')}\nPress Ctrl-C to stop.", flush=True)
        if exit_after_setup:
            return 0
        while sandbox.poll() is None and service.poll() is None:
            time.sleep(1)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            # A stop that began without a signal (a child ended, linking failed): none may cut it short.
            signal.signal(signum, signal.SIG_IGN)
        if service is not None:
            _stop(service)
        if sandbox is not None:
            _stop(sandbox)
        # The pace's mapped file beside the database (``Settings.throttle_uri``: 8 MiB, allocated) is worth
        # nothing once the service has stopped: left, every demo run kept it in /tmp. The logs and the
        # database (a few hundred KiB) stay, to be read.
        database.with_suffix(".throttle.mmap").unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # its terminal gone (SIGHUP), nothing can be said
            print(f"demo: stopped; its logs and database stay in {folder}", flush=True)
