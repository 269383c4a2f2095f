"""``SeleniumPlatformGateway.ready`` (the readiness probe's browser check) with drivers that cost nothing to
start: a running browser is proof enough, a browser that started fine vouches for ten minutes, and a
gateway whose browsers come from elsewhere (a driver factory) does not count this machine's memory."""

from __future__ import annotations

from typing import cast

import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from adapters.platform.selenium_platform_gateway import READY_FOR, SeleniumPlatformGateway

WWW = "https://www.example-community.com"
API = "https://api2.example-community.com"


class QuietDriver:
    """Takes every command a new browser is given, and quits."""

    def __init__(self) -> None:
        self.quit_called = False

    def set_page_load_timeout(self, seconds: float) -> None:
        pass

    def set_script_timeout(self, seconds: float) -> None:
        pass

    def get(self, url: str) -> None:
        pass

    def quit(self) -> None:
        self.quit_called = True


class Drivers:
    def __init__(self) -> None:
        self.made: list[QuietDriver] = []

    def __call__(self) -> WebDriver:
        self.made.append(QuietDriver())
        return cast(WebDriver, self.made[-1])


@pytest.fixture
def drivers() -> Drivers:
    return Drivers()


@pytest.fixture
def gateway(drivers: Drivers) -> SeleniumPlatformGateway:
    return SeleniumPlatformGateway(WWW, API, pool_size=1, timeout=5, driver_factory=drivers)


def test_a_running_browser_is_proof_enough(gateway: SeleniumPlatformGateway, drivers: Drivers) -> None:
    with gateway._pool.lease("con_1") as lease:
        lease.browser()
        assert gateway.ready() is None
    assert len(drivers.made) == 1  # no second browser started to check


def test_a_browser_that_started_fine_vouches_for_ten_minutes(
    gateway: SeleniumPlatformGateway, drivers: Drivers
) -> None:
    assert gateway.ready() is None
    assert len(drivers.made) == 1 and drivers.made[0].quit_called  # started, and closed again
    assert gateway._started_fine_at is not None
    gateway._started_fine_at -= READY_FOR - 5  # white-box: as if nearly ten minutes had passed
    assert gateway.ready() is None
    assert len(drivers.made) == 1
    gateway._started_fine_at -= 5
    assert gateway.ready() is None
    assert len(drivers.made) == 2  # its word has run out: another start


def test_browsers_from_a_driver_factory_count_no_memory_here(gateway: SeleniumPlatformGateway) -> None:
    """Such browsers are made elsewhere (a test's drivers, a driver service of the caller's)."""
    assert gateway._room is None and gateway._pool._room is None
