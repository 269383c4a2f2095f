"""Linking a platform account logs in to the platform from this server, so refused attempts are bounded:
without it anyone with an account here could guess a platform account's password through us (and get
this server's address blocked for every user). Per platform email (over every account and address) 5
in 15 minutes, per account 10, per client address 20; an attempt that was not refused (linked, or the
platform failed) stops counting."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import falcon.testing
import pytest

from community_api.errors import PlatformUnavailable
from tests.unit.world_support import PASSWORD, Browser, World

ALICE = "alice@sandbox.test"


def link(world: World, browser: Browser, address: str = "198.51.100.7", **body: Any) -> falcon.testing.Result:
    return world.client.simulate_post("/v1/connections", json=body, headers=browser.headers(), remote_addr=address)


def another_account(world: World, email: str) -> Browser:
    world.add_account(email, PASSWORD)
    return world.sign_in(email)


def test_the_sixth_refused_password_for_one_platform_email_is_held_back(world: World) -> None:
    owner = world.sign_up()
    for _ in range(5):
        assert link(world, owner, email=ALICE, password="a guess").status_code == 400
    held = link(world, owner, email=ALICE, password="sandbox")
    assert held.status_code == 429, held.text
    assert held.headers["Retry-After"] == "900" and held.json["error"]["details"]["bound"] == "link-email"
    assert held.json["error"]["message"].endswith(
        "try again in 15 minutes, or link it now with a session token (the platform's session cookie)"
    )
    assert world.gateway.calls["login"] == 5  # the held attempt never reached the platform
    # Nor from another account and address: the platform account is what is guarded.
    stranger = another_account(world, "stranger@example.com")
    assert link(world, stranger, "203.0.113.9", email=ALICE, password="another guess").status_code == 429
    # A session token still links it (it guesses nothing), and the window passes.
    token = world.gateway.login(ALICE, "sandbox").session_token
    assert link(world, owner, sessionToken=token).status_code == 201
    world.clock.advance(minutes=15)
    assert link(world, owner, email=ALICE, password="sandbox").status_code == 201


def test_the_email_bound_counts_an_address_however_it_is_written(world: World) -> None:
    """Before, each spelling had its own count: a guesser alternating the case, or the domain as typed and in
    the IDNA form a browser submits it in (which the platform's login form sends alike), had twice the five."""
    owner = world.sign_up()
    spellings = ["max@b\u00fccher.example", "MAX@xn--bcher-kva.example", " Max@B\u00dcCHER.example "]
    for n in range(5):
        assert link(world, owner, email=spellings[n % 3], password="a guess").status_code == 400
    for spelling in spellings:
        held = link(world, owner, email=spelling, password="a guess")
        assert held.status_code == 429 and held.json["error"]["details"]["bound"] == "link-email"
    assert world.gateway.calls["login"] == 5


def test_an_account_is_held_back_after_ten_refusals_over_any_emails(world: World) -> None:
    owner = world.sign_up()
    for n in range(10):
        assert link(world, owner, email=f"guess{n}@sandbox.test", password="x").status_code == 400
    held = link(world, owner, email="bob@sandbox.test", password="sandbox")
    assert held.status_code == 429 and held.json["error"]["details"]["bound"] == "link-account"


def test_an_address_is_held_back_after_twenty_refusals_over_any_accounts(world: World) -> None:
    for n in range(20):
        account = another_account(world, f"user{n // 9}-{n}@example.com")
        assert link(world, account, "192.0.2.44", email=f"g{n}@sandbox.test", password="x").status_code == 400
    late = another_account(world, "late@example.com")
    held = link(world, late, "192.0.2.44", email="bob@sandbox.test", password="sandbox")
    assert held.status_code == 429 and held.json["error"]["details"]["bound"] == "link-addr"
    assert link(world, late, "192.0.2.45", email="bob@sandbox.test", password="sandbox").status_code == 201


def test_links_that_succeed_or_meet_a_failing_platform_never_count(world: World) -> None:
    owner = world.sign_up()
    for _ in range(12):  # re-linking refreshes the connection in place
        assert link(world, owner, email=ALICE, password="sandbox").status_code == 201
    world.gateway.fail_next("login", PlatformUnavailable("the platform's login did not finish in time"), times=12)
    for _ in range(12):
        assert link(world, owner, email=ALICE, password="sandbox").status_code == 503
    assert link(world, owner, email=ALICE, password="sandbox").status_code == 201


@pytest.mark.parametrize("body", [{}, {"email": ALICE}, {"sessionToken": "t", "email": ALICE, "password": "p"}])
def test_malformed_requests_never_count(world: World, body: dict[str, str]) -> None:
    owner = world.sign_up()
    for _ in range(12):
        assert link(world, owner, **body).status_code == 400
    assert world.gateway.calls["login"] == 0
    assert link(world, owner, email=ALICE, password="sandbox").status_code == 201


def test_the_dashboard_form_is_held_back_too(world: World) -> None:
    from tests.unit.web_support import WebBrowser

    browser = WebBrowser(world)
    browser.sign_up()

    def submit(password: str) -> falcon.testing.Result:
        page = browser.get("/connections")
        return browser.submit(page, "/connections", {"email": ALICE, "password": password})

    for _ in range(5):
        assert submit("a guess").status_code == 400
    page = submit("sandbox")
    assert page.status_code == 429
    assert "too many refused attempts to link a platform account: try again in 15 minutes" in page.text
    assert page.headers["retry-after"] == "900"


def test_one_link_at_a_time_per_account(world: World) -> None:
    """A link signs in with a browser of the pool for up to twice the time-out: an account sending several
    at once would hold every browser of a worker while everyone else's platform calls wait. The second is
    refused at once (429 ``busy``) without reaching the platform or counting as a refused attempt; another
    account links meanwhile, and the account links again once the first is done."""
    owner, other = world.sign_up(), another_account(world, "other@example.com")
    entered, release = threading.Event(), threading.Event()
    login = world.gateway.login

    def slow_login(email: str, password: str) -> Any:
        if email == ALICE:
            entered.set()
            assert release.wait(10)
        return login(email, password)

    world.gateway.login = slow_login  # type: ignore[method-assign]
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(link, world, owner, email=ALICE, password="sandbox")
        assert entered.wait(10)
        second = link(world, owner, email="bob@sandbox.test", password="sandbox")
        assert second.status_code == 429, second.text
        error = second.json["error"]
        assert error["details"]["reason"] == "busy" and second.headers["Retry-After"] == "5"
        assert "already in progress" in error["message"]
        assert link(world, other, email="bob@sandbox.test", password="sandbox").status_code == 201
        release.set()
        assert first.result(10).status_code == 201
    assert link(world, owner, email="bob@sandbox.test", password="sandbox").status_code == 201
    assert world.gateway.calls["login"] == 3  # the refused one never reached the platform


def test_only_the_email_bound_suggests_a_session_token(world: World) -> None:
    """A session token links without a password, so it is the way past a hold on the platform email (which
    strangers can cause); past the account's own bound it would be no answer, and is not offered."""
    owner = world.sign_up()
    for n in range(10):
        assert link(world, owner, email=f"guess{n}@sandbox.test", password="x").status_code == 400
    held = link(world, owner, email="bob@sandbox.test", password="sandbox")
    assert held.status_code == 429
    assert (
        held.json["error"]["message"] == "too many refused attempts to link a platform account: try again in 15 minutes"
    )
