"""How ``PageRunner`` runs requests in a ready page, with the fake driver of ``test_page_fetch.py``: requests
as the page sends them, answers read whatever the page gave, a firewall block or a stale build's page data
run again after a fresh page, and each request counted once for every time it reached the platform."""

from __future__ import annotations

import json
from typing import cast

import pytest
from prometheus_client import REGISTRY
from selenium.common.exceptions import WebDriverException

from adapters.platform import page_fetch
from adapters.platform.browser import BrowserFailure
from adapters.platform.page_fetch import Req
from community_api.errors import PlatformError
from community_api.platform_meter import metered
from fakes.clock import FakeClock
from fakes.platform_pace import FakePlatformPace
from tests.unit.test_page_fetch import (
    ACCOUNT,
    API,
    BLOCK_PAGE,
    HTML_404,
    WWW,
    FakeDriver,
    answer,
    ready_browser,
    runner,
)


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


@pytest.mark.parametrize(
    ("segments", "path"),
    [
        (["g", "a/b"], "/g/a%2Fb.json?p=1"),
        (["g", "x?p=9#"], "/g/x%3Fp%3D9%23.json?p=1"),  # the query stays the one given
        (["g", "%2e%2e"], "/g/%252e%252e.json?p=1"),
        (["g/h", "x"], "/g%2Fh/x.json?p=1"),
    ],
    ids=["a slash", "a query and a fragment", "escaped dots", "a slash in the first segment"],
)
def test_every_segment_of_a_page_data_path_is_one_segment_the_last_one_too(segments: list[str], path: str) -> None:
    """The last segment is encoded before ``.json`` is added: a ``?`` or ``/`` in it cannot end the path early."""
    page = runner()
    driver = FakeDriver(fetches=[[answer()]])
    page.fetch(ready_browser(driver, page), [Req.data(segments, {"p": 1})])
    assert driver.payloads[0][0]["url"] == WWW + "/_next/data/build-1" + path


@pytest.mark.parametrize("last", ["", ".", ".."])
def test_a_page_data_path_ending_in_a_dot_segment_is_refused(last: str) -> None:
    with pytest.raises(PlatformError):
        Req.data(["g", last], {})


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
