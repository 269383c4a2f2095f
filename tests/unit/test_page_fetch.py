"""How ``PageRunner`` readies a browser and runs requests in its page, with a fake driver (no Chromium): the
platform page loaded once and again when it is worn or its firewall token or build id went stale, the
session cookie set as the platform sets it, a browser that does not answer told apart from a cookie the
browser refuses, and each request counted once for every time it is sent."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace
from typing import Any, cast

import pytest
from prometheus_client import REGISTRY
from selenium.common.exceptions import InvalidCookieDomainException, WebDriverException
from selenium.webdriver.remote.webdriver import WebDriver

from adapters.platform import page_fetch, page_scripts
from adapters.platform.browser import Browser, BrowserFailure
from adapters.platform.deadline import within
from adapters.platform.page_fetch import PageRunner, Req
from community_api.errors import InvalidRequest, PlatformError, PlatformUnavailable
from community_api.platform_meter import metered
from fakes.clock import FakeClock
from fakes.platform_pace import FakePlatformPace

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


# -- running requests ------------------------------------------------------------------------------------
def test_requests_go_out_as_the_page_sends_them() -> None:
    page = runner(WWW + "/")
    driver = FakeDriver(fetches=[[answer(), answer(), answer()]])
    browser = ready_browser(driver, page)
    page.fetch(
        browser,
        [
            Req("GET", API + "/self"),
            Req("POST", API + "/posts", body={"title": "é", "n": 0}),
            Req.data(["builders-club"], {"p": 2}),
        ],
    )
    read, write, data = driver.payloads[0]
    assert read == {"url": API + "/self", "method": "GET", "body": None, "headers": {}}
    assert write["method"] == "POST" and json.loads(write["body"]) == {"title": "é", "n": 0}
    assert data["url"] == WWW + "/_next/data/build-1/builders-club.json?p=2"
    assert data["headers"] == {"x-nextjs-data": "1"}  # as Next.js' client router marks page data


def test_a_false_body_is_still_sent() -> None:
    page = runner()
    driver = FakeDriver(fetches=[[answer()]])
    page.fetch(ready_browser(driver, page), [Req("PATCH", API + "/x", body=False)])
    assert driver.payloads[0][0]["body"] == "false"


def test_the_build_id_is_one_segment_of_the_page_data_path() -> None:
    page = runner()
    driver = FakeDriver(ready=[{"ok": True, "buildId": "a/../b?c#d"}], fetches=[[answer()]])
    page.fetch(ready_browser(driver, page), [Req.data(["x"], {})])
    assert driver.payloads[0][0]["url"] == WWW + "/_next/data/a%2F..%2Fb%3Fc%23d/x.json?"


def test_no_request_runs_no_script() -> None:
    page = runner()
    driver = FakeDriver()
    browser = ready_browser(driver, page)
    assert page.fetch(browser, []) == [] and driver.commands == [] and browser.scripts == 0


def test_answers_keep_their_status_type_text_error_and_retry_after() -> None:
    page = runner()
    driver = FakeDriver(
        fetches=[
            [
                answer(429, '{"message": "slow down"}', retryAfter="30"),
                {"status": "500", "contentType": 3, "text": 123, "error": "TypeError: failed", "retryAfter": 30},
            ]
        ]
    )
    first, second = page.fetch(ready_browser(driver, page), [Req("GET", API + "/a"), Req("GET", API + "/b")])
    assert (first.status, first.content_type, first.text, first.error, first.retry_after) == (
        429,
        "application/json",
        '{"message": "slow down"}',
        None,
        "30",
    )
    assert (second.status, second.content_type, second.text, second.error, second.retry_after) == (
        0,
        "",
        "",
        "TypeError: failed",
        None,
    )


@pytest.mark.parametrize("answers", [[], [answer(), answer()], {"x": 1}, "nonsense", None, [7]])
def test_answers_that_do_not_match_the_requests_are_a_browser_failure(answers: object) -> None:
    page = runner()
    driver = FakeDriver(fetches=[answers])
    with pytest.raises(BrowserFailure, match="nonsense"):
        page.fetch(ready_browser(driver, page), [Req("GET", API + "/self")])


def test_a_browser_that_fails_during_the_requests_is_a_browser_failure() -> None:
    page = runner()
    driver = FakeDriver(fetches=[WebDriverException("disconnected")])
    with pytest.raises(BrowserFailure, match="in-page request failed"):
        page.fetch(ready_browser(driver, page), [Req("GET", API + "/self")])


def test_what_comes_out_of_the_page_is_counted_towards_its_reload() -> None:
    page = runner()
    driver = FakeDriver(fetches=[[answer(text="x" * 10), answer(text="y" * 5)], {"packed": "z" * 40}])
    browser = ready_browser(driver, page)
    page.fetch(browser, [Req("GET", API + "/a"), Req("GET", API + "/b")])
    assert (browser.scripts, browser.carried) == (1, 15)
    with pytest.raises(BrowserFailure, match="broken package"):
        page.fetch(browser, [Req("GET", API + "/a")])
    assert (browser.scripts, browser.carried) == (2, 55)  # a broken package stayed in the page all the same


def test_a_request_the_firewall_blocked_is_run_again_after_a_fresh_page_and_counted_once() -> None:
    page = runner()
    driver = FakeDriver(
        ready=[{"ok": True, "buildId": "b1"}],
        fetches=[[answer(text='{"a": 1}'), BLOCK_PAGE], [answer(text='{"b": 2}')]],
    )
    browser = ready_browser(driver, page)
    with metered(FakePlatformPace(FakeClock()), ACCOUNT, reads=0, writes=0) as meter:
        resps = page.fetch(browser, [Req("GET", API + "/a"), Req("POST", API + "/b", body={})])
    assert [r.json() for r in resps] == [{"a": 1}, {"b": 2}]
    assert driver.commands == ["fetch_all", "get", "wait_ready", "fetch_all"]
    assert [p["url"] for p in driver.payloads[1]] == [API + "/b"]
    # The firewall stopped the request before the platform saw it: sending it again is not a second one.
    assert (meter.reads_sent, meter.writes_sent) == (0, 0)


def test_page_data_of_a_stale_build_is_asked_again_of_the_new_one_and_counted_as_one_more_read() -> None:
    page = runner()
    driver = FakeDriver(
        ready=[{"ok": True, "buildId": "old"}, {"ok": True, "buildId": "new"}],
        fetches=[[HTML_404, answer(404, '{"message": "no"}')], [answer(text='{"pageProps": {}}')]],
    )
    browser = ready_browser(driver, page)
    with metered(FakePlatformPace(FakeClock()), ACCOUNT, reads=0, writes=0) as meter:
        resps = page.fetch(browser, [Req.data(["g"], {}), Req("GET", API + "/posts/x")])
    assert resps[0].json() == {"pageProps": {}} and resps[1].status == 404
    assert [p["url"] for p in driver.payloads[1]] == [WWW + "/_next/data/new/g.json?"]
    assert (meter.reads_sent, meter.writes_sent) == (1, 0)  # the stale build's 404 reached the platform


@pytest.mark.parametrize(
    "resp",
    [
        answer(404, "<html>404</html>", "application/json"),  # a JSON 404 is the platform's answer
        answer(403, '{"message": "forbidden"}'),  # the platform's own 403, not the firewall's page
    ],
)
def test_other_refusals_are_answers_and_not_asked_again(resp: dict[str, object]) -> None:
    page = runner()
    driver = FakeDriver(fetches=[[resp]])
    browser = ready_browser(driver, page)
    assert page.fetch(browser, [Req.data(["g"], {})])[0].status == resp["status"]
    assert driver.commands == ["fetch_all"]


def test_an_html_404_of_the_api_is_an_answer_and_not_asked_again() -> None:
    page = runner()
    driver = FakeDriver(fetches=[[HTML_404]])
    browser = ready_browser(driver, page)
    assert page.fetch(browser, [Req("GET", API + "/posts/x")])[0].status == 404
    assert driver.commands == ["fetch_all"]


def requests_counted() -> tuple[float, float]:
    return cast(
        tuple[float, float],
        tuple(
            REGISTRY.get_sample_value("community_api_platform_requests_total", {"kind": kind}) or 0.0
            for kind in ("read", "write")
        ),
    )


def test_spend_counts_gets_as_reads_and_every_other_method_as_a_write() -> None:
    before = requests_counted()
    reqs = [Req("GET", "a"), Req("GET", "b"), Req("POST", "c"), Req("DELETE", "d"), Req("PATCH", "e")]
    with metered(FakePlatformPace(FakeClock()), ACCOUNT, reads=0, writes=0) as meter:
        page_fetch.spend(reqs)
    assert (meter.reads_sent, meter.writes_sent) == (2, 3)
    after = requests_counted()
    assert (after[0] - before[0], after[1] - before[1]) == (2, 3)
