"""How ``PageRunner`` readies a browser, with a fake driver (no Chromium): the platform page loaded once and
again when it is worn, the session cookie set as the platform sets it, a browser that does not answer told
apart from a cookie the browser refuses, and every wait bounded by the call's time left. Running requests in
the page: ``test_page_fetch_requests.py``."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any, cast

import pytest
from selenium.common.exceptions import InvalidCookieDomainException, WebDriverException
from selenium.webdriver.remote.webdriver import WebDriver

from adapters.platform import page_fetch, page_scripts
from adapters.platform.browser import Browser, BrowserFailure
from adapters.platform.deadline import within
from adapters.platform.page_fetch import PageRunner, Req
from community_api.errors import InvalidRequest, PlatformError, PlatformUnavailable

WWW = "https://www.example-community.com"
API = "https://api2.example-community.com"
ACCOUNT = "a" * 32
READY = {"ok": True, "buildId": "build-1"}


def answer(
    status: int = 200, text: str = "{}", content_type: str = "application/json", **extra: object
) -> dict[str, object]:
    return {"status": status, "contentType": content_type, "text": text, "error": None, **extra}


BLOCK_PAGE = answer(403, "<html>Request blocked</html>", "text/html; charset=utf-8")
HTML_404 = answer(404, "<html>404</html>", "text/html")


class FakeDriver:
    """Records the commands it is given. Its page answers ``WAIT_READY`` from ``ready`` (the last one again
    once the list is used up) and each ``FETCH_ALL`` with the next of ``fetches``: a list of answers, a
    function of the payload, or an exception to raise."""

    def __init__(self, ready: list[object] | None = None, fetches: list[object] | None = None) -> None:
        self.ready = list(ready or [READY])
        self.fetches = list(fetches or [])
        self.commands: list[str] = []
        self.loaded: list[str] = []
        self.ready_waits: list[object] = []  # the milliseconds each ``WAIT_READY`` was given
        self.payloads: list[list[dict[str, Any]]] = []
        self.cookies: dict[str, dict[str, Any]] = {}
        self.fail: dict[str, Exception] = {}  # command name -> what it raises
        self.command_executor = SimpleNamespace(client_config=SimpleNamespace(timeout=None))

    def _command(self, name: str) -> None:
        self.commands.append(name)
        if name in self.fail:
            raise self.fail[name]

    def get(self, url: str) -> None:
        self._command("get")
        self.loaded.append(url)

    def execute_script(self, script: str) -> object:
        self._command("execute_script")
        return 1

    def execute_async_script(self, script: str, *args: object) -> object:
        if script == page_scripts.WAIT_READY:
            self._command("wait_ready")
            self.ready_waits.append(args[0])
            return self.ready.pop(0) if len(self.ready) > 1 else self.ready[0]
        assert script == page_scripts.FETCH_ALL
        self._command("fetch_all")
        payload = cast(list[dict[str, Any]], args[0])
        self.payloads.append(payload)
        step = self.fetches.pop(0)
        if isinstance(step, Exception):
            raise step
        return step(payload) if callable(step) else step

    def delete_cookie(self, name: str) -> None:
        self._command("delete_cookie")
        self.cookies.pop(name, None)

    def add_cookie(self, cookie: dict[str, Any]) -> None:
        self._command("add_cookie")
        self.cookies[cookie["name"]] = cookie


def browser_with(driver: FakeDriver) -> Browser:
    return Browser(cast(WebDriver, driver))


def ready_browser(driver: FakeDriver, page: PageRunner, session: str = "t1") -> Browser:
    """A browser on the platform's page with ``session`` set, its commands so far forgotten."""
    browser = browser_with(driver)
    page.prepare(browser, session)
    driver.commands.clear()
    return browser


def runner(www: str = WWW, api: str = API) -> PageRunner:
    return PageRunner(www, api, timeout=5)


# -- readying a browser ------------------------------------------------------------------------------------
def test_a_fresh_browser_loads_the_platforms_page_then_gets_the_session_cookie() -> None:
    driver = FakeDriver()
    browser = browser_with(driver)
    runner(WWW + "/").prepare(browser, "t1")
    assert driver.loaded == [WWW + "/login"]  # the configured slash makes no ``//login``
    assert driver.commands == ["get", "wait_ready", "delete_cookie", "add_cookie"]
    assert (browser.on_origin, browser.build_id, browser.token) == (True, "build-1", "t1")


def test_the_session_cookie_is_set_as_the_platform_sets_it_on_the_hosts_shared_domain() -> None:
    driver = FakeDriver()
    runner().prepare(browser_with(driver), "t1")
    assert driver.cookies == {
        "auth_token": {
            "name": "auth_token",
            "value": "t1",
            "path": "/",
            "httpOnly": True,
            "secure": True,
            "sameSite": "Lax",
            "domain": ".example-community.com",
        }
    }


@pytest.mark.parametrize(
    ("www", "api", "domain"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000/api2", None),  # the stand-in: one host
        ("http://localhost:8000", "http://localhost:8000/api2", None),
        ("https://www.example-community.com", "https://api2.example-community.com", ".example-community.com"),
        ("https://www.community.co.uk", "https://api2.community.co.uk", ".community.co.uk"),
        ("https://www.one.test", "https://api2.other.test", None),  # only the top-level domain shared
        ("http://10.0.0.1:8000", "http://10.1.0.1:8001", None),  # addresses have no parent domain
        ("https://community.example.com", "https://community.example.com/api2", None),  # one host, host-only
    ],
)
def test_the_cookie_reaches_both_hosts_and_nothing_beyond(www: str, api: str, domain: str | None) -> None:
    driver = FakeDriver()
    runner(www, api).prepare(browser_with(driver), "t1")
    cookie = driver.cookies["auth_token"]
    assert cookie.get("domain") == domain
    assert cookie["secure"] is www.startswith("https:")  # an http stand-in's cookie would never be sent


def test_a_ready_browser_is_not_loaded_again_and_a_new_token_replaces_the_cookie() -> None:
    page = runner()
    driver = FakeDriver()
    browser = ready_browser(driver, page, "t1")
    page.prepare(browser, "t1")
    assert driver.commands == []
    page.prepare(browser, "t2")
    assert driver.commands == ["delete_cookie", "add_cookie"]
    assert driver.cookies["auth_token"]["value"] == "t2" and browser.token == "t2"


def test_before_a_write_a_ready_browser_is_asked_to_answer_and_that_counts_as_a_script() -> None:
    page = runner()
    driver = FakeDriver()
    browser = ready_browser(driver, page)
    scripts = browser.scripts
    page.prepare(browser, "t1", check_alive=True)
    assert driver.commands == ["execute_script"] and browser.scripts == scripts + 1


def test_before_a_write_a_browser_that_does_not_answer_fails_there() -> None:
    page = runner()
    driver = FakeDriver()
    browser = ready_browser(driver, page)
    driver.fail["execute_script"] = WebDriverException("chrome not reachable")
    with pytest.raises(BrowserFailure, match="does not answer"):
        page.prepare(browser, "t1", check_alive=True)


def test_a_browser_loading_the_page_is_not_asked_to_answer_as_well() -> None:
    driver = FakeDriver()
    runner().prepare(browser_with(driver), "t1", check_alive=True)
    assert "execute_script" not in driver.commands


@pytest.mark.parametrize(
    ("scripts", "carried", "reloaded"),
    [
        (page_fetch.RELOAD_AFTER_SCRIPTS - 1, page_fetch.RELOAD_AFTER_BYTES - 1, False),
        (page_fetch.RELOAD_AFTER_SCRIPTS, 0, True),
        (0, page_fetch.RELOAD_AFTER_BYTES, True),
    ],
)
def test_a_worn_page_is_loaded_afresh_and_its_counts_start_again(scripts: int, carried: int, reloaded: bool) -> None:
    page = runner()
    driver = FakeDriver()
    browser = ready_browser(driver, page)
    browser.scripts, browser.carried = scripts, carried
    page.prepare(browser, "t1")
    assert ("get" in driver.commands) is reloaded
    if reloaded:
        assert (browser.scripts, browser.carried) == (0, 0)
        assert browser.token == "t1" and "add_cookie" not in driver.commands  # the cookie jar is kept


@pytest.mark.parametrize("state", [{"ok": False, "buildId": "b"}, {"buildId": "b"}, None, "ok", ["ok"]])
def test_a_page_that_does_not_pass_the_firewall_check_is_unavailable(state: object) -> None:
    driver = FakeDriver(ready=[state])
    browser = browser_with(driver)
    with pytest.raises(PlatformUnavailable, match="firewall"):
        runner().prepare(browser, "t1")
    assert not browser.on_origin and browser.token is None


@pytest.mark.parametrize("command", ["get", "wait_ready"])
def test_a_browser_that_fails_to_load_the_page_is_a_browser_failure_and_not_on_the_platform(command: str) -> None:
    page = runner()
    driver = FakeDriver()
    browser = ready_browser(driver, page)
    driver.fail[command] = WebDriverException("tab crashed")
    with pytest.raises(BrowserFailure, match="loading a platform page"):
        page.renew(browser)
    assert not browser.on_origin  # the next call loads it again


@pytest.mark.parametrize("build_id", ["", None, 7, ["b"]])
def test_a_page_naming_no_build_id_leaves_page_data_unreachable(build_id: object) -> None:
    page = runner()
    driver = FakeDriver(ready=[{"ok": True, "buildId": "old"}, {"ok": True, "buildId": build_id}])
    browser = ready_browser(driver, page)
    page.renew(browser)
    assert browser.build_id is None
    with pytest.raises(PlatformError, match="no build id"):
        page.fetch(browser, [Req.data(["builders-club"], {"p": 1})])
    assert "fetch_all" not in driver.commands  # nothing was sent


@pytest.mark.parametrize(
    "message",
    ["invalid cookie domain", "Unable to set Cookie", "INVALID ARGUMENT: invalid 'value'"],
)
def test_a_token_the_browser_refuses_as_a_cookie_is_an_invalid_request(message: str) -> None:
    driver = FakeDriver()
    driver.fail["add_cookie"] = InvalidCookieDomainException(message)
    with pytest.raises(InvalidRequest, match="not a valid cookie value"):
        runner().prepare(browser_with(driver), "t\x01")


@pytest.mark.parametrize(
    "error", [WebDriverException("chrome not reachable"), ConnectionRefusedError(111, "Connection refused")]
)
def test_a_browser_that_fails_while_the_cookie_is_set_is_a_browser_failure(error: Exception) -> None:
    driver = FakeDriver()
    driver.fail["delete_cookie"] = error
    browser = browser_with(driver)
    with pytest.raises(BrowserFailure, match="setting the session cookie"):
        runner().prepare(browser, "t1")
    assert browser.token is None  # set again on the next call


def test_each_driver_command_waits_no_longer_than_the_call_has_left_and_a_little_grace() -> None:
    driver = FakeDriver()
    with within(3.0):
        runner().prepare(browser_with(driver), "t1")
    timeout = driver.command_executor.client_config.timeout
    assert 3.0 < timeout <= 3.0 + page_fetch.COMMAND_GRACE


def test_the_page_is_given_no_longer_to_pass_its_firewall_check_than_the_call_has_left() -> None:
    driver = FakeDriver()
    with within(3.0):
        runner().prepare(browser_with(driver), "t1")
    assert len(driver.ready_waits) == 1 and 2000 < cast(int, driver.ready_waits[0]) <= 3000


@pytest.mark.parametrize("check_alive", [False, True])
def test_a_call_whose_time_is_up_readies_nothing(check_alive: bool) -> None:
    page = runner()
    driver = FakeDriver()
    browser = ready_browser(driver, page)
    with within(0.01):
        time.sleep(0.02)
        with pytest.raises(PlatformUnavailable, match="time allowed"):
            page.prepare(browser, "t2", check_alive=check_alive)
        with pytest.raises(PlatformUnavailable, match="time allowed"):
            page.renew(browser)  # as when a blocked request needs a fresh page
    assert driver.commands == []


def test_a_call_whose_time_is_up_sends_nothing() -> None:
    page = runner()
    driver = FakeDriver(fetches=[[answer()]])
    browser = ready_browser(driver, page)
    with within(0.01):
        time.sleep(0.02)
        with pytest.raises(PlatformUnavailable, match="time allowed"):
            page.fetch(browser, [Req("GET", API + "/self")])
    assert driver.commands == []
