"""A fresh browser from ``local_browser``: real Chromium, no platform needed."""

from __future__ import annotations

import contextlib
import http.server
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from adapters.platform.browser import Browser, driver_environment, local_browser
from tests.short_temp import short_temp_folder

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_a_new_browser_visits_nothing_but_about_blank() -> None:
    """Left to itself, Chromium's first tab loads the new-tab page, which fetches the default search
    engine's start page from the internet: a request to a third party at every start, and a ~5 s wait
    where that host does not resolve. The first tab must open about:blank and nothing else."""
    browser = local_browser(timeout=30)
    try:
        history = browser.driver.execute_cdp_cmd("Page.getNavigationHistory", {})
        visited = [entry["url"] for entry in history["entries"]]
        assert visited and set(visited) == {"about:blank"}, visited
        assert len(browser.driver.window_handles) == 1
    finally:
        browser.quit()


@pytest.fixture
def system_temp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temporary folder of this test's own (``TMPDIR``), short as ``/tmp`` is: what any process puts
    there is seen, whatever other tests' browsers do meanwhile."""
    with short_temp_folder() as folder:
        monkeypatch.setenv("TMPDIR", str(folder))
        monkeypatch.setattr(tempfile, "tempdir", str(folder))
        yield folder


@pytest.mark.parametrize("polite", [True, False], ids=["asked to quit", "ended by signal"])
def test_a_closed_browser_leaves_nothing_in_the_temporary_folder(system_temp: Path, polite: bool) -> None:
    """Ended by signal (a browser that failed or hung), chromedriver and Chromium used to leave two folders
    each in ``/tmp`` (``org.chromium.Chromium.scoped_dir.*`` and the single-instance socket's), for ever."""
    browser = local_browser(timeout=30)
    try:
        assert len(list(system_temp.iterdir())) == 1  # the profile: what they make is in it
    finally:
        browser.quit(polite=polite)
    assert list(system_temp.iterdir()) == []


def test_the_temporary_folder_is_the_profile_only_where_chromiums_socket_path_fits() -> None:
    short = "/tmp/cda-chromium-w4242-abcdefgh"  # noqa: S108
    env = driver_environment(short)
    assert env is not None and env["TMPDIR"] == short and env.get("PATH") == os.environ.get("PATH")
    # Chromium aborts when .../org.chromium.Chromium.XXXXXX/SingletonSocket exceeds a socket address.
    assert driver_environment("/" + "x" * 62) is None
    assert driver_environment("/" + "x" * 61) is not None


def test_ready_starts_a_browser_when_none_runs_and_says_why_one_cannot_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from adapters.platform import memory_room, selenium_platform_gateway
    from adapters.platform.selenium_platform_gateway import SeleniumPlatformGateway

    starts = str(tmp_path / "starts")
    monkeypatch.setattr(memory_room, "default_folder", lambda: starts)  # this test's own reservations
    counted: list[int] = []

    def counted_browser(timeout: float, trusted_spki: tuple[str, ...]) -> Browser:
        counted.append(memory_room.MemoryRoom(starts).pending())
        return local_browser(timeout, trusted_spki)

    monkeypatch.setattr(selenium_platform_gateway, "local_browser", counted_browser)
    gateway = SeleniumPlatformGateway("https://127.0.0.1:9", "https://127.0.0.1:9/api2", pool_size=1, timeout=30)
    try:
        assert gateway.ready() is None  # started one, closed it again
        assert gateway.live_browsers() == 0
        assert counted == [1]  # other workers' starts counted it while it started
        assert memory_room.MemoryRoom(starts).pending() == 0  # and no longer
    finally:
        gateway.close()

    def no_chromium() -> WebDriver:
        raise FileNotFoundError("/usr/bin/chromium")

    broken = SeleniumPlatformGateway(
        "https://127.0.0.1:9", "https://127.0.0.1:9/api2", pool_size=1, timeout=5, driver_factory=no_chromium
    )
    assert broken.ready() == "no browser could be started (FileNotFoundError)"


@contextlib.contextmanager
def grid_status(body: bytes) -> Iterator[str]:
    """A Selenium Grid's URL whose ``GET /status`` answers ``body``; any other path 404 with no body."""

    class Status(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            found = self.path == "/status"
            self.send_response(200 if found else 404)
            self.end_headers()
            if found:
                self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Status)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"value": {"ready": true, "message": "Selenium Grid ready."}}', None),
        (b'{"value": {"ready": false, "message": "no nodes"}}', "the Selenium Grid answers but has no node ready"),
        (b"<html>proxy error</html>", "the Selenium Grid does not answer (JSONDecodeError)"),
    ],
)
def test_ready_on_a_grid_asks_its_status(body: bytes, expected: str | None) -> None:
    from adapters.platform.selenium_platform_gateway import grid_ready

    with grid_status(body) as url:
        assert grid_ready(url + "/", 5) == expected
    assert grid_ready("http://127.0.0.1:9", 1) == "the Selenium Grid does not answer (ConnectionError)"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # Only ``true`` is ready: a proxy's or an older Grid's look-alike is not.
        (b'{"value": {"ready": "false"}}', "the Selenium Grid answers but has no node ready"),
        (b'{"value": {"ready": 1}}', "the Selenium Grid answers but has no node ready"),
        (b'{"value": {}}', "the Selenium Grid answers but has no node ready"),
        # JSON of another shape: not a Grid's answer.
        (b'{"value": "up"}', "the Selenium Grid does not answer (AttributeError)"),
        (b"[]", "the Selenium Grid does not answer (AttributeError)"),
    ],
)
def test_only_a_grids_own_ready_true_is_ready(body: bytes, expected: str) -> None:
    from adapters.platform.selenium_platform_gateway import grid_ready

    with grid_status(body) as url:
        assert grid_ready(url, 5) == expected


def test_a_grid_url_written_with_a_slash_is_asked_at_its_status() -> None:
    from adapters.platform.selenium_platform_gateway import grid_ready

    with grid_status(b'{"value": {"ready": true}}') as url:
        assert grid_ready(url + "/", 5) is None
        assert grid_ready(url, 5) is None
