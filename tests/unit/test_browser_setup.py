"""How a new driver is set up before its first call (``browser.ready_driver``, ``limit_commands``) and what a
failed start leaves, with fake drivers (no Chromium): every wait bounded, the first navigation given the
time a start may take, the in-page scripts a little longer than the fetches they run, and a browser that
could not start neither left running nor leaving its profile behind."""

from __future__ import annotations

import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.remote.webdriver import WebDriver

from adapters.platform import browser
from adapters.platform.browser import (
    MIN_COMMAND_SECONDS,
    START_SECONDS,
    limit_commands,
    local_browser,
    ready_driver,
    remote_browser,
)


class SetUpDriver:
    """Records each set-up command with the command time-out in force when it was given."""

    def __init__(self, fail_get: bool = False) -> None:
        self.command_executor = SimpleNamespace(client_config=SimpleNamespace(timeout=None))
        self.log: list[tuple[str, object, object]] = []
        self.fail_get = fail_get
        self.quit_called = False

    def _note(self, name: str, value: object) -> None:
        self.log.append((name, value, self.command_executor.client_config.timeout))

    def set_page_load_timeout(self, seconds: float) -> None:
        self._note("page_load", seconds)

    def set_script_timeout(self, seconds: float) -> None:
        self._note("script", seconds)

    def get(self, url: str) -> None:
        self._note("get", url)
        if self.fail_get:
            raise WebDriverException("chrome not reachable")

    def quit(self) -> None:
        self.quit_called = True


@pytest.mark.parametrize("timeout", [5.0, 20.0, 45.0])
def test_a_new_driver_settles_its_first_page_then_takes_the_calls_time_outs(timeout: float) -> None:
    driver = SetUpDriver()
    ready_driver(cast(WebDriver, driver), timeout)
    bound = START_SECONDS + 5  # every command of the set-up, however long the calls' own time-out
    assert driver.log == [
        ("page_load", max(START_SECONDS, timeout), bound),  # the first navigation may take a start's time
        ("get", "about:blank", bound),
        ("script", timeout + 5, bound),  # a fetch that timed out in the page still reports back
        ("page_load", timeout, bound),
    ]


def test_a_driver_whose_first_page_fails_is_quit_and_the_failure_raised() -> None:
    driver = SetUpDriver(fail_get=True)
    with pytest.raises(WebDriverException):
        ready_driver(cast(WebDriver, driver), 20)
    assert driver.quit_called


@pytest.mark.parametrize(("asked", "given"), [(0.0, MIN_COMMAND_SECONDS), (-3.0, MIN_COMMAND_SECONDS), (7.5, 7.5)])
def test_a_command_is_never_given_less_than_a_second(asked: float, given: float) -> None:
    """A deadline that has just passed would otherwise give the driver no time at all (or a negative one)."""
    driver = SetUpDriver()
    limit_commands(cast(WebDriver, driver), asked)
    assert driver.command_executor.client_config.timeout == given


def test_a_local_browser_that_cannot_start_leaves_no_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its profile would hold the platform session of the first sign-in made in it."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def no_chromium(**kwargs: Any) -> WebDriver:
        raise WebDriverException("cannot find Chrome binary")

    monkeypatch.setattr(browser.webdriver, "Chrome", no_chromium)
    with pytest.raises(WebDriverException):
        local_browser(timeout=5)
    assert list(tmp_path.iterdir()) == []


def test_a_grids_session_is_asked_for_with_a_bounded_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Grid with no free slot queues a new session for minutes: the request waits no longer than a start."""
    asked: dict[str, Any] = {}

    def remote(**kwargs: Any) -> WebDriver:
        asked.update(kwargs)
        return cast(WebDriver, SetUpDriver())

    monkeypatch.setattr(browser.webdriver, "Remote", remote)
    remote_browser("http://grid.test:4444", timeout=20)
    assert asked["command_executor"] == "http://grid.test:4444"
    assert asked["client_config"].timeout == int(START_SECONDS)
