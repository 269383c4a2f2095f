"""The service with its browsers on a real Selenium Grid, in both layouts (standalone; a hub and a node
as two processes): gunicorn serving ``adapters.wiring:get_app()`` with ``SELENIUM_REMOTE_URL``, the
stand-in platform, and the Grid's own failures — a session ended on the node mid-request, a session the
Grid reaped after its idle time-out, the Grid down and back."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import requests

from community_api.scopes import ALL_SCOPES
from scripts.grid import LAYOUTS, Grid, running_grid
from scripts.processes import free_port, gunicorn_args, serving
from tests.sandbox_support import SandboxProcess

pytestmark = [pytest.mark.grid, pytest.mark.browser, pytest.mark.slow]
SECRET = "grid-test-secret-" + "g" * 40
GROUP = "builders-club"
INBOX = "/api2/self/chat-channels"
IDLE_SECONDS = 10  # the Grid's session time-out here, short so that a test can see a session reaped


@attrs.define
class Stack:
    grid: Grid
    url: str
    key: str
    folder: Path

    def call(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        headers = {"Authorization": f"Bearer {self.key}", **kwargs.pop("headers", {})}
        return requests.request(method, self.url + path, headers=headers, timeout=120, **kwargs)

    def counted(self, name: str) -> float:
        """A counter of ``/metrics`` (the service's browser pool: starts, crashes…)."""
        text = requests.get(self.url + "/metrics", timeout=10).text
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + " "))

    def wait_for_sessions(self, check: Any, timeout: float = 30.0) -> list[str]:
        deadline = time.monotonic() + timeout
        while True:
            ids = self.grid.session_ids()
            if check(ids) or time.monotonic() > deadline:
                return ids
            time.sleep(0.2)


@pytest.fixture(scope="module", params=LAYOUTS)
def stack(
    request: pytest.FixtureRequest, sandbox: SandboxProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    sandbox.reset()
    folder = tmp_path_factory.mktemp(f"grid-{request.param}")
    with running_grid(request.param, folder / "grid", session_timeout=IDLE_SECONDS) as grid:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        env = {
            "COMMUNITY_API_MODE": "test",
            "COMMUNITY_API_DB": str(folder / "service.sqlite3"),
            "COMMUNITY_API_SECRET": SECRET,
            "COMMUNITY_API_PLATFORM_URL": sandbox.url,
            "COMMUNITY_API_PLATFORM_API_URL": sandbox.api_url,
            "COMMUNITY_API_BROWSER_TRUSTED_SPKI": ",".join(sandbox.trusted_spki),
            "COMMUNITY_API_SELENIUM_REMOTE_URL": grid.url,
            "COMMUNITY_API_BROWSER_POOL_SIZE": "2",
            "COMMUNITY_API_PLATFORM_READS_PER_MINUTE": "20000",
            "COMMUNITY_API_PLATFORM_WRITES_PER_MINUTE": "20000",  # and the write pace
        }
        args = gunicorn_args("adapters.wiring:get_app()", port, workers=1, worker_class="gthread")
        with serving(args, url + "/healthz", env=env, log_path=folder / "service.log"):
            web = requests.Session()
            web.post(url + "/v1/accounts", json={"email": "grid@example.com", "password": "grid test pass"})
            signed = web.post(url + "/v1/session", json={"email": "grid@example.com", "password": "grid test pass"})
            web.headers["X-CSRF-Token"] = signed.json()["csrfToken"]
            linked = web.post(
                url + "/v1/connections", json={"email": "alice@sandbox.test", "password": "sandbox"}, timeout=120
            )
            assert linked.status_code == 201, linked.text  # linking a connection: a browser on the Grid
            key = web.post(url + "/v1/keys", json={"scopes": list(ALL_SCOPES)}, timeout=10).json()["secret"]
            yield Stack(grid, url, key, folder)
    sandbox.control("clear-faults", {})


def test_linking_and_whoami_run_on_the_grid(stack: Stack) -> None:
    me = stack.call("GET", "/v1/whoami")
    assert me.status_code == 200 and me.json()["handle"] == "alice"
    assert stack.grid.session_ids(), "the browser should be a session on the Grid"
    assert stack.call("GET", "/readyz").json()["checks"]["browser"] == "ok"


def test_the_feed_with_30_pages(stack: Stack) -> None:
    answer = stack.call("GET", f"/v1/groups/{GROUP}/posts", params={"pages": "30"})
    assert answer.status_code == 200, answer.text
    posts = answer.json()["posts"]
    assert len(posts) > 300 and len({p["id"] for p in posts}) == len(posts)


def test_post_detail(stack: Stack) -> None:
    posts = stack.call("GET", f"/v1/groups/{GROUP}/posts").json()["posts"]
    post = next(p for p in posts if p["commentCount"] >= 2)
    detail = stack.call("GET", f"/v1/posts/{post['id']}")
    assert detail.status_code == 200 and detail.json()["post"]["id"] == post["id"]
    comments = detail.json()["comments"]
    assert sum(c["parentId"] is None for c in comments) == post["commentCount"]  # top-level ones (PLATFORM.md)


def test_create_and_delete_a_post_and_a_comment(stack: Stack, sandbox: SandboxProcess) -> None:
    label = stack.call("GET", f"/v1/groups/{GROUP}").json()["labels"][-1]
    created = stack.call(
        "POST", f"/v1/groups/{GROUP}/posts", json={"title": "Through the Grid", "label": label["name"]}
    )
    assert created.status_code == 201, created.text
    post_id = created.json()["id"]
    comment = stack.call("POST", f"/v1/posts/{post_id}/comments", json={"content": "a comment from the Grid"})
    assert comment.status_code == 201, comment.text
    assert stack.call("DELETE", f"/v1/comments/{comment.json()['id']}").status_code == 204
    assert stack.call("DELETE", f"/v1/posts/{post_id}").status_code == 204
    made = {c["id"]: c for c in sandbox.control("created")["created"]}
    assert made[post_id]["deleted"] is True and made[comment.json()["id"]]["deleted"] is True


def test_a_dm_thread(stack: Stack) -> None:
    inbox = stack.call("GET", "/v1/dms").json()["conversations"]
    bob = next(c for c in inbox if c["with"]["handle"] == "bob")
    thread = stack.call("GET", f"/v1/dms/{bob['id']}")
    assert thread.status_code == 200 and thread.json()["messages"]


def test_a_session_ended_on_the_node_mid_request_is_replaced(stack: Stack, sandbox: SandboxProcess) -> None:
    assert stack.call("GET", "/v1/whoami").status_code == 200
    before = set(stack.grid.session_ids())
    crashes, starts = (
        stack.counted("community_api_browser_crashes_total"),
        stack.counted("community_api_browser_starts_total"),
    )
    sandbox.control("latency", {"route": INBOX, "ms": 3000})
    answers: list[requests.Response] = []
    reading = threading.Thread(target=lambda: answers.append(stack.call("GET", "/v1/dms")))
    try:
        reading.start()
        time.sleep(1.0)  # the read is waiting on the platform in the browser
        # The node's browsers die under the read (the Grid's DELETE would wait for the command to end).
        for pid in stack.grid.browser_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        reading.join(60)
    finally:
        sandbox.control("clear-faults", {})
    assert answers and answers[0].status_code == 200, answers[0].text if answers else "no answer"
    assert answers[0].json()["conversations"]
    # The browser was found dead, and a new one read in its place.
    assert stack.counted("community_api_browser_crashes_total") > crashes
    assert stack.counted("community_api_browser_starts_total") > starts
    # The Grid lets go of the dead session in its own time (at the latest, its idle time-out).
    assert not set(stack.wait_for_sessions(lambda ids: not set(ids) & before, timeout=IDLE_SECONDS * 4)) & before


def test_a_session_the_grid_reaped_when_idle_is_replaced_unnoticed(stack: Stack) -> None:
    assert stack.call("GET", "/v1/whoami").status_code == 200
    before = set(stack.grid.session_ids())
    assert before
    gone = stack.wait_for_sessions(lambda ids: not set(ids) & before, timeout=IDLE_SECONDS * 4)
    assert not set(gone) & before, "the Grid should have ended the idle session"
    answer = stack.call("GET", f"/v1/groups/{GROUP}/posts")
    assert answer.status_code == 200, answer.text


def test_with_the_grid_down_requests_are_503_then_work_when_it_is_back(stack: Stack) -> None:
    assert stack.call("GET", "/v1/whoami").status_code == 200
    stack.grid.stop()
    try:
        started = time.monotonic()
        down = stack.call("GET", "/v1/whoami")
        assert down.status_code == 503, down.text
        assert down.json()["error"]["code"] == "platform_unavailable"
        assert time.monotonic() - started < 30
        ready = stack.call("GET", "/readyz")
        assert ready.status_code == 503 and ready.json()["checks"]["browser"] != "ok"
    finally:
        stack.grid.start()
    back = stack.call("GET", "/v1/whoami")
    assert back.status_code == 200, back.text
    assert stack.call("GET", "/readyz").status_code == 200
