"""The service built with fakes (cosmicpython's bootstrap), driven through falcon.testing like a client:
``World`` (``build_world``) and ``Ready`` (a world with an account, alice linked and a key). The fixtures
that hand them to tests are in ``conftest.py``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs
import falcon.testing

from adapters.settings import Settings
from adapters.wiring import app_for, bootstrap
from community_api.accounts import create_account_unchecked
from community_api.deps import Deps
from community_api.model import Account
from community_api.ports import Clock
from fakes.clock import FakeClock
from fakes.key_store import FakeKeyStore
from fakes.platform import FakePlatformGateway
from fakes.platform_pace import FakePlatformPace
from fakes.throttle import FakeThrottle

DM_GAP = 37.0
PASSWORD = "correct horse battery"


@attrs.define
class Browser:
    """A signed-in web session: its cookie and CSRF token."""

    cookie: str
    csrf: str
    account: dict[str, Any]

    def headers(self) -> dict[str, str]:
        return {"Cookie": f"cda_session={self.cookie}", "X-CSRF-Token": self.csrf}


@attrs.define
class World:
    clock: Any  # a FakeClock, or the system clock under freezegun
    store: FakeKeyStore
    gateway: FakePlatformGateway
    throttle: FakeThrottle
    pace: FakePlatformPace
    client: falcon.testing.TestClient
    deps: Deps

    def sign_up(self, email: str = "owner@example.com", password: str = PASSWORD) -> Browser:
        self.client.simulate_post("/v1/accounts", json={"email": email, "password": password})
        return self.sign_in(email, password)

    def sign_in(self, email: str, password: str = PASSWORD) -> Browser:
        result = self.client.simulate_post("/v1/session", json={"email": email, "password": password})
        assert result.status_code == 200, result.text
        return Browser(result.cookies["cda_session"].value, result.json["csrfToken"], result.json["account"])

    def add_account(self, email: str, password: str = PASSWORD) -> Account:
        """An account made as the command line makes one (sign-up open or closed), its password hashed by the
        service's own hasher: a hash of argon2's default cost would cost each later sign-in 0.2 s."""
        return create_account_unchecked(self.store, self.clock, email, password, hasher=self.deps.password_hasher)

    def link(self, browser: Browser, handle: str = "alice", **extra: Any) -> dict[str, Any]:
        body = {"email": f"{handle}@sandbox.test", "password": "sandbox", **extra}
        result = self.client.simulate_post("/v1/connections", json=body, headers=browser.headers())
        assert result.status_code == 201, result.text
        return dict(result.json)

    def mint(
        self, browser: Browser, scopes: Iterable[str] | None = None, connection_id: str | None = None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"name": "test key"}
        if scopes is not None:
            body["scopes"] = list(scopes)
        if connection_id is not None:
            body["connectionId"] = connection_id
        result = self.client.simulate_post("/v1/keys", json=body, headers=browser.headers())
        assert result.status_code == 201, result.text
        return dict(result.json)

    def get(self, path: str, key: str, **kwargs: Any) -> falcon.testing.Result:
        headers = {"Authorization": f"Bearer {key}", **kwargs.pop("headers", {})}
        return self.client.simulate_get(path, headers=headers, **kwargs)

    def post(self, path: str, key: str, body: Any = None, **kwargs: Any) -> falcon.testing.Result:
        headers = {"Authorization": f"Bearer {key}", **kwargs.pop("headers", {})}
        return self.client.simulate_post(path, headers=headers, json=body, **kwargs)

    def delete(self, path: str, key: str, **kwargs: Any) -> falcon.testing.Result:
        headers = {"Authorization": f"Bearer {key}", **kwargs.pop("headers", {})}
        return self.client.simulate_delete(path, headers=headers, **kwargs)


def build_world(clock: Clock | None = None, reads_per_minute: int = 10_000, signup: bool = False) -> World:
    """The service on fakes. The read pace is generous by default (tests read the feed many times within
    one frozen minute); the pace's own tests pass a real figure."""
    clock = clock or FakeClock()
    store = FakeKeyStore()
    gateway = FakePlatformGateway(clock=clock, seed=1)
    throttle = FakeThrottle(clock, draw_gap=lambda connection_id, last_send: DM_GAP)
    pace = FakePlatformPace(clock, reads_per_minute=reads_per_minute)
    # falconframework.org: the host Falcon's test client names when a test names none.
    settings = Settings(mode="test", usage_flush_seconds=0, signup=signup, allowed_hosts=("falconframework.org",))
    deps = bootstrap(key_store=store, gateway=gateway, throttle=throttle, pace=pace, clock=clock, settings=settings)
    return World(clock, store, gateway, throttle, pace, falcon.testing.TestClient(app_for(deps, settings)), deps)


@attrs.define
class Ready:
    """A world with an account, alice linked, and a key with every scope."""

    world: World
    browser: Browser
    connection: dict[str, Any]
    key: str
