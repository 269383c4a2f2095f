"""``Browser.quit`` on a real local Chromium: a working browser is asked to quit within a bounded wait, a
discarded one is ended by PID without asking, a driver that has already ended is not asked, and a Chromium
that does not end when asked is forced. Each way, chromedriver and every Chromium process are gone after."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest

from adapters.platform import procfs
from adapters.platform.browser import END_SECONDS, QUIT_SECONDS, Browser, local_browser

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture
def browser() -> Iterator[Browser]:
    started = local_browser(timeout=30)
    try:
        yield started
    finally:
        started.quit(polite=False)  # a second quit is harmless; this one ends whatever a failure left


def family(browser: Browser) -> list[int]:
    """chromedriver, Chromium and every process under it."""
    process = browser.driver.service.process  # type: ignore[attr-defined]
    return [process.pid, *procfs.descendants(process.pid)]


def asked_to_quit(browser: Browser) -> list[object]:
    """Records each polite quit the driver is given, with the command time-out then in force."""
    asked: list[object] = []
    polite_quit = browser.driver.quit

    def quit() -> None:
        asked.append(browser.driver.command_executor.client_config.timeout)  # type: ignore[union-attr]
        polite_quit()

    browser.driver.quit = quit  # type: ignore[method-assign]
    return asked


def gone(pids: list[int]) -> bool:
    """Whether every one has ended, allowing the kernel a moment to finish what SIGKILL began (a busy machine
    may take some milliseconds)."""
    deadline = time.monotonic() + 1.0
    while any(procfs.running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not any(procfs.running(pid) for pid in pids)


def test_a_working_browser_is_asked_to_quit_within_a_bounded_wait(browser: Browser) -> None:
    pids = family(browser)
    assert len(pids) >= 3  # chromedriver, Chromium and its helpers
    asked = asked_to_quit(browser)
    browser.quit(polite=True)
    assert asked == [QUIT_SECONDS]  # a driver that stopped answering holds the quit no longer than that
    assert gone(pids)


def test_a_discarded_browser_is_ended_by_pid_without_asking(browser: Browser) -> None:
    pids = family(browser)
    asked = asked_to_quit(browser)
    browser.quit(polite=False)
    assert asked == [] and gone(pids)


def test_a_browser_whose_driver_has_ended_is_not_asked_and_its_chromium_is_ended(browser: Browser) -> None:
    """A stop signal to the whole process group (Ctrl-C, ``systemctl stop``) ends chromedriver as well: every
    request to it would be refused and retried, with a warning each."""
    pids = family(browser)
    process = browser.driver.service.process  # type: ignore[attr-defined]
    process.kill()
    process.wait()
    asked = asked_to_quit(browser)
    browser.quit(polite=True)
    assert asked == [] and gone(pids)


def test_a_chromium_that_does_not_end_when_asked_is_forced(browser: Browser) -> None:
    """Stopped (as a hung one may as well be), Chromium leaves the SIGTERM pending: after ``END_SECONDS`` the
    quit sends SIGKILL, which a stopped process cannot hold off."""
    pids = family(browser)
    mains = browser.pids()
    for pid in mains:
        os.kill(pid, signal.SIGSTOP)
    started = time.monotonic()
    browser.quit(polite=False)
    assert END_SECONDS - 0.5 <= time.monotonic() - started < END_SECONDS + 10
    assert gone(pids)
