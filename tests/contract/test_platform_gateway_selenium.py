"""The ``PlatformGateway`` contract (``gateway_cases``) run against ``SeleniumPlatformGateway`` driving
headless Chromium in front of the stand-in platform (a process of its own).

One sandbox and one gateway serve the whole module; the sandbox is reset before each case, so read-outs
start empty and read state is the seed's. ``login(handle)`` signs in through the gateway's login form
once per user and reuses that session until the case expires it: a browser login costs seconds, and
the cases only need a live session of that user (the login itself is covered by ``TestSessions``).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from adapters.platform.selenium_platform_gateway import SeleniumPlatformGateway
from community_api.model import LinkedAccount, PlatformSession
from tests.contract.gateway_cases import (
    PASSWORD,
    TestDirectMessages,
    TestFeed,
    TestGroups,
    TestPosts,
    TestReportedVariants,
    TestSessions,
    email,
)
from tests.sandbox_support import SandboxProcess, running_sandbox

__all__ = ["TestDirectMessages", "TestFeed", "TestGroups", "TestPosts", "TestReportedVariants", "TestSessions"]

pytestmark = [pytest.mark.browser, pytest.mark.slow]


class SeleniumHarness:
    def __init__(self, gateway: SeleniumPlatformGateway, sandbox: SandboxProcess) -> None:
        self.gateway = gateway
        self.sandbox = sandbox
        self._sessions: dict[str, PlatformSession] = {}

    def login(self, handle: str) -> PlatformSession:
        if handle not in self._sessions:
            linked = self.gateway.login(email(handle), PASSWORD)
            self._sessions[handle] = PlatformSession(connection_id=f"con-{handle}", token=linked.session_token)
        return self._sessions[handle]

    def now(self) -> datetime:
        return datetime.now(UTC)  # the sandbox runs on this machine's clock

    def expire_sessions(self, handle: str) -> None:
        self.sandbox.control("expire-session", {"user": handle})
        self._sessions.pop(handle, None)

    def login_lasting(self, handle: str, seconds: float) -> LinkedAccount:
        usual = self.sandbox.control("ttl", {})["sessionSeconds"]
        self.sandbox.control("ttl", {"sessionSeconds": seconds})
        try:
            return self.gateway.login(email(handle), PASSWORD)
        finally:
            self.sandbox.control("ttl", {"sessionSeconds": usual})

    def readout_posts(self) -> list[str]:
        return [str(record["id"]) for record in self.sandbox.control("created")["created"]]

    def readout_messages(self) -> list[tuple[str, str]]:
        return [(str(r["channelId"]), str(r["content"])) for r in self.sandbox.control("sent")["sent"]]


@pytest.fixture(scope="module")
def harness() -> Iterator[SeleniumHarness]:
    with running_sandbox() as sandbox:
        # Room for every user's browser plus the cases' own connection: no eviction churn.
        gateway = SeleniumPlatformGateway(
            sandbox.url, sandbox.api_url, pool_size=6, timeout=10.0, trusted_spki=sandbox.trusted_spki
        )
        try:
            yield SeleniumHarness(gateway, sandbox)
        finally:
            gateway.close()


@pytest.fixture
def platform(harness: SeleniumHarness) -> SeleniumHarness:
    harness.sandbox.reset()
    return harness
