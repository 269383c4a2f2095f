"""The login page and the firewall script in headless Chromium, as the gateway will drive them."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator

import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from tests.sandbox.server import RunningSandbox, sandbox_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]

FETCH_30 = """
const done = arguments[arguments.length - 1];
window.__fwReadyPromise.then(() => {
  const build = JSON.parse(document.getElementById("__NEXT_DATA__").textContent).buildId;
  return Promise.all(Array.from({length: 30}, (_, i) =>
    fetch(`/_next/data/${build}/builders-club.json?group=builders-club&p=${i + 1}`).then(r => r.json())));
}).then(pages => done(pages.map(p => p.pageProps.postTrees.length)), e => done(String(e)));
"""


@pytest.fixture
def running() -> Iterator[RunningSandbox]:
    with sandbox_server() as sandbox:
        yield sandbox


@pytest.fixture
def driver(running: RunningSandbox) -> Iterator[WebDriver]:
    """Chromium trusting exactly the stand-in's certificate key (never every certificate)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.add_argument(f"--ignore-certificate-errors-spki-list={running.spki}")
    options.binary_location = "/usr/bin/chromium"
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ):
        options.add_argument(flag)
    with tempfile.TemporaryDirectory() as profile:
        options.add_argument(f"--user-data-dir={profile}")
        drv = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
        try:
            yield drv
        finally:
            drv.quit()


def submit_login(driver: WebDriver, base: str, email: str, password: str = "sandbox", query: str = "") -> None:  # noqa: S107
    from selenium.webdriver.common.by import By

    driver.get(f"{base}/login{query}")
    driver.find_element(By.ID, "email").send_keys(email)
    driver.find_element(By.ID, "password").send_keys(password)
    driver.find_element(By.CSS_SELECTOR, 'button[type="submit"]').click()


def test_login_form_firewall_and_concurrent_page_data(driver: WebDriver, running: RunningSandbox) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    base = running.base
    submit_login(driver, base, "alice@sandbox.test", query="?next=/builders-club")
    WebDriverWait(driver, 10).until(lambda d: d.current_url == f"{base}/builders-club")
    counts = driver.execute_async_script(FETCH_30)
    assert counts[0] == 33 and counts[1:] == [30] * 29
    # Over HTTP/2, as on the real hosts (the page's own fetches, as the gateway makes them).
    protocols = driver.execute_script(
        "return [...new Set(performance.getEntriesByType('resource').map(e => e.nextHopProtocol))]"
    )
    assert protocols == ["h2"]
    assert driver.execute_script("return window.__fwReady") is True
    assert "auth_token" not in driver.execute_script("return document.cookie")  # HttpOnly

    driver.delete_all_cookies()
    submit_login(driver, base, "mallory@sandbox.test")
    box = WebDriverWait(driver, 10).until(lambda d: d.find_elements(By.ID, "two-factor"))
    assert "Two-factor" in box[0].text

    submit_login(driver, base, "bob@sandbox.test", password="wrong")
    WebDriverWait(driver, 10).until(lambda d: d.find_element(By.ID, "login-error").text)
    assert driver.find_element(By.ID, "login-error").text == "invalid credentials"
