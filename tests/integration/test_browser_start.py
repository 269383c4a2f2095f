"""A fresh browser from ``local_browser``: real Chromium, no platform needed."""

from __future__ import annotations

import pytest

from adapters.platform.browser import local_browser

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_a_new_browser_visits_nothing_but_about_blank() -> None:
    """Left to itself, Chromium's first tab loads the new-tab page, which fetches the default search
    engine's start page from the internet: a request to a third party at every start, and a ~5 s wait
    where that host does not resolve. The first tab must open about:blank and nothing else."""
    browser = local_browser(timeout=30)
    try:
        history = browser.driver.execute_cdp_cmd("Page.getNavigationHistory", {})  # type: ignore[attr-defined]
        visited = [entry["url"] for entry in history["entries"]]
        assert visited and set(visited) == {"about:blank"}, visited
        assert len(browser.driver.window_handles) == 1
    finally:
        browser.quit()


def test_ready_starts_a_browser_when_none_runs_and_says_why_one_cannot_start() -> None:
    from adapters.platform.selenium_platform_gateway import SeleniumPlatformGateway

    gateway = SeleniumPlatformGateway("https://127.0.0.1:9", "https://127.0.0.1:9/api2", pool_size=1, timeout=30)
    try:
        assert gateway.ready() is None  # started one, closed it again
        assert gateway.live_browsers() == 0
    finally:
        gateway.close()

    def no_chromium() -> object:
        raise FileNotFoundError("/usr/bin/chromium")

    broken = SeleniumPlatformGateway(
        "https://127.0.0.1:9", "https://127.0.0.1:9/api2", pool_size=1, timeout=5, driver_factory=no_chromium
    )  # type: ignore[arg-type]
    assert broken.ready() == "no browser could be started (FileNotFoundError)"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"value": {"ready": true, "message": "Selenium Grid ready."}}', None),
        (b'{"value": {"ready": false, "message": "no nodes"}}', "the Selenium Grid answers but has no node ready"),
        (b"<html>proxy error</html>", "the Selenium Grid does not answer (JSONDecodeError)"),
    ],
)
def test_ready_on_a_grid_asks_its_status(body: bytes, expected: str | None) -> None:
    import http.server
    import threading

    from adapters.platform.selenium_platform_gateway import grid_ready

    class Status(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200 if self.path == "/status" else 404)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Status)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert grid_ready(f"http://127.0.0.1:{server.server_address[1]}/", 5) == expected
    finally:
        server.shutdown()
        server.server_close()
    assert grid_ready("http://127.0.0.1:9", 1) == "the Selenium Grid does not answer (ConnectionError)"
