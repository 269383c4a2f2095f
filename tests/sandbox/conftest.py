"""In-process fixtures for the sandbox: a Falcon test client wrapped as a cookie-keeping "browser"."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from falcon import testing

from scripts.sandbox.app import create_app
from scripts.sandbox.state import Sandbox

CHROME = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0 Safari/537.36"
BIG = "builders-club"


class Clock:
    """A settable clock starting at the real time."""

    def __init__(self) -> None:
        self.t = time.time()

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


class Browser:
    """Keeps cookies across requests and sends a browser's User-Agent, like Chromium would."""

    def __init__(self, client: testing.TestClient, user_agent: str = CHROME) -> None:
        self.client = client
        self.user_agent = user_agent
        self.cookies: dict[str, str] = {}
        self.build_id = "unknown"

    def request(self, method: str, path: str, **kw: Any) -> testing.Result:
        headers = {"User-Agent": self.user_agent, **kw.pop("headers", {})}
        result = self.client.simulate_request(method, path, headers=headers, cookies=dict(self.cookies), **kw)
        for name, c in result.cookies.items():
            self.cookies[name] = c.value
        return result

    def get(self, path: str, **kw: Any) -> testing.Result:
        return self.request("GET", path, **kw)

    def post(self, path: str, **kw: Any) -> testing.Result:
        return self.request("POST", path, **kw)

    def delete(self, path: str, **kw: Any) -> testing.Result:
        return self.request("DELETE", path, **kw)

    def pass_firewall(self) -> None:
        """What the page script does: fetch the challenge and store the token as a cookie."""
        self.cookies["aws-waf-token"] = self.get("/__fw/challenge").json["token"]

    def login(self, handle: str, password: str = "sandbox") -> testing.Result:  # noqa: S107
        self.pass_firewall()
        return self.post("/api2/auth/login", json={"email": f"{handle}@sandbox.test", "password": password})

    def data(self, path: str, **kw: Any) -> testing.Result:
        """Page data of ``path`` (``/slug`` or ``/slug/post``) with the current build id."""
        r = self.get(f"/_next/data/{self.build_id}{path}.json", **kw)
        if r.status_code == 404 and r.headers["content-type"].startswith("text/html"):  # a deploy
            self.build_id = self.client.simulate_get("/__sandbox/state").json["buildId"]
            r = self.get(f"/_next/data/{self.build_id}{path}.json", **kw)
        return r


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def sb(clock: Clock) -> Sandbox:
    return Sandbox(1, clock=clock)


@pytest.fixture
def client(sb: Sandbox) -> testing.TestClient:
    return testing.TestClient(create_app(sandbox=sb))


@pytest.fixture
def browser(client: testing.TestClient) -> Callable[..., Browser]:
    """``browser()`` a fresh browser; ``browser("alice")`` one signed in as alice."""

    def make(handle: str | None = None) -> Browser:
        b = Browser(client)
        if handle:
            assert b.login(handle).status_code == 200
        return b

    return make


@pytest.fixture
def alice(browser: Callable[..., Browser]) -> Browser:
    return browser("alice")


def user_id(client: testing.TestClient, handle: str) -> str:
    return next(u["id"] for u in client.simulate_get("/__sandbox/users").json["users"] if u["name"] == handle)


def group_id(client: testing.TestClient, slug: str = BIG) -> str:
    return client.simulate_get("/__sandbox/state").json["groups"][slug]["id"]


def new_post(b: Browser, gid: str, title: str, labels: str = "") -> dict:
    """A post made through api2 as the site makes one; its answer (``{id, name, …}``)."""
    body = {"post_type": "generic", "group_id": gid, "metadata": {"title": title, "content": "x", "labels": labels}}
    answer = b.post("/api2/posts", json=body)
    assert answer.status_code == 200, answer.text
    return dict(answer.json)


def new_comment(b: Browser, root: str, parent: str, content: str = "c", **extra: str) -> testing.Result:
    """A comment (``parent`` the post) or reply made through api2, answered as it came: refusals are tested."""
    body = {"post_type": "comment", "root_id": root, "parent_id": parent, "metadata": {"content": content}, **extra}
    return b.post("/api2/posts", json=body)
