"""What the dashboard's browser tests share: the service under gunicorn (``adapters.wiring:get_app()``, the
real SQLite store and the Selenium gateway) in front of the stand-in platform, a headless Chromium with
the gateway's own flags, and screenshots under ``build/screenshots/``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from adapters.platform.browser import local_browser
from scripts.processes import ROOT, free_port, gunicorn_args, serving
from tests.sandbox_support import SandboxProcess

SCREENSHOTS = ROOT / "build" / "screenshots"
SECRET = "dashboard-e2e-" + "s" * 40
PASSWORD = "dashboard pass 1"


@contextmanager
def running_service(folder: Path, sandbox: SandboxProcess) -> Iterator[str]:
    """gunicorn with two threaded workers; answers the base URL. Usage is written through at once, so
    that a page shows a request served by the other worker."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        "COMMUNITY_API_MODE": "test",
        "COMMUNITY_API_PLATFORM_READS_PER_MINUTE": "20000",  # the read pace has tests of its own
        "COMMUNITY_API_PLATFORM_WRITES_PER_MINUTE": "20000",  # and the write pace
        "COMMUNITY_API_DB": str(folder / "service.sqlite3"),
        "COMMUNITY_API_SECRET": SECRET,
        "COMMUNITY_API_PLATFORM_URL": sandbox.url,
        "COMMUNITY_API_PLATFORM_API_URL": sandbox.api_url,
        "COMMUNITY_API_BROWSER_TRUSTED_SPKI": ",".join(sandbox.trusted_spki),
        "COMMUNITY_API_BROWSER_POOL_SIZE": "1",
        "COMMUNITY_API_USAGE_FLUSH_SECONDS": "0",
    }
    args = gunicorn_args("adapters.wiring:get_app()", port, workers=2, worker_class="gthread")
    with serving(args, url + "/v1/openapi.json", env=env, log_path=folder / "service.log"):
        yield url


@contextmanager
def chromium() -> Iterator[WebDriver]:
    browser = local_browser(timeout=30)
    browser.driver.set_window_size(1280, 1000)
    try:
        yield browser.driver
    finally:
        browser.quit()


def screenshot(driver: WebDriver, name: str) -> Path:
    """Save the whole page (as tall as its content) as ``build/screenshots/<name>.png``."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    height = int(driver.execute_script("return document.documentElement.scrollHeight"))
    driver.set_window_size(1280, max(600, min(height + 200, 4000)))
    path = SCREENSHOTS / f"{name}.png"
    driver.save_screenshot(str(path))
    driver.set_window_size(1280, 1000)
    return path


def fill(driver: WebDriver, field_id: str, value: str) -> None:
    element = driver.find_element(By.ID, field_id)
    element.clear()
    element.send_keys(value)


def press(driver: WebDriver, css: str, timeout: float = 120) -> None:
    """Click and wait for the next page (linking an account drives the platform: allow for it)."""
    old = driver.find_element(By.TAG_NAME, "html")
    driver.find_element(By.CSS_SELECTOR, css).click()
    WebDriverWait(driver, timeout).until(lambda d: _gone(old))


def _gone(element: object) -> bool:
    try:
        _ = element.tag_name  # type: ignore[attr-defined]  # raises once the page has changed
    except Exception:
        return True
    return False


def heading(driver: WebDriver) -> str:
    return str(driver.find_element(By.TAG_NAME, "h1").text)
