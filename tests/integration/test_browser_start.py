"""A fresh browser from ``local_browser``: real Chromium, no platform needed."""

from __future__ import annotations

import pytest

from adapters.platform.browser_pool import local_browser

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
