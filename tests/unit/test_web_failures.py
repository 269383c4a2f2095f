"""A failure of the service under a dashboard page (a bug, or storage that cannot write) is shown to the
person as a page of the dashboard, with the same status and message the API would give; a script, and
every ``/v1/`` route, still get the JSON error. Before, the browser showed the API's raw JSON."""

from __future__ import annotations

import errno

import pytest

from tests.unit.web_support import WebBrowser
from tests.unit.world_support import World

BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.fixture
def person(world: World) -> WebBrowser:
    browser = WebBrowser(world)
    browser.sign_up()
    return browser


def break_key_listing(world: World, monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    def failing(account_id: str) -> list[object]:
        raise error

    monkeypatch.setattr(world.store, "list_keys", failing)


def test_a_full_disk_under_a_page_is_a_page_saying_so(
    world: World, person: WebBrowser, monkeypatch: pytest.MonkeyPatch
) -> None:
    break_key_listing(world, monkeypatch, OSError(errno.ENOSPC, "No space left on device"))
    page = person.get("/keys", Accept=BROWSER_ACCEPT)
    assert page.status_code == 503 and page.headers["content-type"].startswith("text/html")
    assert page.headers["retry-after"] == "30"
    assert "Service unavailable" in page.text
    assert "The service cannot use its storage right now (the disk is full); try again later." in page.text
    assert "content-security-policy" in page.headers  # the dashboard's usual headers
    # A script asking for the same page gets the API's error body.
    scripted = person.get("/keys", Accept="application/json")
    assert scripted.status_code == 503 and scripted.json["error"]["code"] == "service_unavailable"


def test_a_bug_under_a_page_is_a_page_without_internals(
    world: World, person: WebBrowser, monkeypatch: pytest.MonkeyPatch
) -> None:
    break_key_listing(world, monkeypatch, RuntimeError("secret internals"))
    page = person.get("/keys", Accept=BROWSER_ACCEPT)
    assert page.status_code == 500 and page.headers["content-type"].startswith("text/html")
    assert "Something went wrong" in page.text and "The service failed to handle this request." in page.text
    assert "secret internals" not in page.text


def test_the_api_answers_json_even_to_a_browser(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    browser = WebBrowser(world)
    browser.sign_up()
    break_key_listing(world, monkeypatch, OSError(errno.ENOSPC, "No space left on device"))
    answer = browser.get("/v1/me", Accept=BROWSER_ACCEPT)  # lists the keys too
    assert answer.status_code == 503 and answer.json["error"]["code"] == "service_unavailable"


@pytest.mark.parametrize(
    "path",
    [
        "/setings",
        "/keys/extra/parts/here",
        "/%3Cscript%3Ealert(1)%3C%2Fscript%3E",
        "/v1beta",  # begins as the API's paths do, but is none of them
    ],
)
def test_an_address_with_no_page_is_a_page_saying_so(world: World, path: str) -> None:
    """A mistyped or stale address of the dashboard, opened in a browser, showed the API's raw JSON."""
    page = WebBrowser(world).get(path, Accept=BROWSER_ACCEPT)
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
    assert "Page not found" in page.text and 'href="/"' in page.text  # leads back to the dashboard
    assert "There is no page at " in page.text and "<script>" not in page.text  # the path shown, escaped
    assert "content-security-policy" in page.headers and page.headers["cache-control"] == "no-store"


@pytest.mark.parametrize(
    ("path", "accept"),
    [
        ("/setings", "application/json"),  # a script
        ("/setings", "*/*"),  # curl
        ("/v1/nothing", BROWSER_ACCEPT),  # the API answers JSON whoever asks
        ("/v1", BROWSER_ACCEPT),
        ("/static/nothing.css", BROWSER_ACCEPT),  # a file the dashboard does not have: its own message
    ],
)
def test_a_missing_address_is_json_for_a_script_and_on_the_api(world: World, path: str, accept: str) -> None:
    answer = world.client.simulate_get(path, headers={"Accept": accept})
    assert answer.status_code == 404 and answer.json["error"]["code"] == "not_found"
