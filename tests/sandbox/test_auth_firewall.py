"""Login, the firewall, and the difference between an expired session and a group one is not in."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from falcon import testing

from scripts.sandbox.app import create_app
from scripts.sandbox.state import Sandbox
from tests.sandbox.conftest import BIG, Browser, Clock, group_id


def next_data(html: str) -> dict:
    match = re.search(r'<script id="__NEXT_DATA__" type="application/json">(.*?)</script>', html, re.S)
    assert match
    return json.loads(match.group(1))


def test_login_page_has_the_form_and_the_firewall_script(browser: Callable[..., Browser]) -> None:
    page = browser().get("/login?next=/builders-club")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for needle in (
        'id="email"',
        'id="password"',
        'button type="submit"',
        "/api2/auth/login",
        "/__fw/challenge",
        "window.__fwReady = true",
        "__fwReadyPromise",
        '"/builders-club"',
    ):
        assert needle in page.text


def test_login_sets_http_only_session_and_client_id(
    client: testing.TestClient, browser: Callable[..., Browser]
) -> None:
    b = browser()
    b.pass_firewall()
    r = b.post("/api2/auth/login", json={"email": "alice@sandbox.test", "password": "sandbox"})
    assert r.status_code == 200
    assert r.cookies["auth_token"].http_only and r.cookies["auth_token"].path == "/"
    assert r.cookies["auth_token"].value.count(".") == 2  # JWT-shaped
    assert "client_id" in r.cookies
    assert b.get("/api2/self").json["name"] == "alice"


def test_wrong_password_is_401_invalid_credentials(browser: Callable[..., Browser]) -> None:
    r = browser().login("bob", password="nope")
    assert r.status_code == 401 and r.json == {"message": "invalid credentials"}
    assert "auth_token" not in r.cookies
    for password in (None, 123, ["sandbox"]):  # not text: refused alike, never a 500
        b = browser()
        b.pass_firewall()
        r = b.post("/api2/auth/login", json={"email": "bob@sandbox.test", "password": password})
        assert r.status_code == 401 and r.json == {"message": "invalid credentials"}


def test_signing_in_again_keeps_the_browsers_client_id(browser: Callable[..., Browser]) -> None:
    b = browser()
    first = b.login("bob").cookies["client_id"].value
    assert b.login("bob").cookies["client_id"].value == first
    assert browser().login("bob").cookies["client_id"].value != first  # another browser, another id


def test_a_user_made_to_meet_a_captcha_gets_one_and_no_cookie(
    client: testing.TestClient, browser: Callable[..., Browser]
) -> None:
    assert client.simulate_post("/__sandbox/captcha", json={"user": "carol"}).status_code == 200
    r = browser().login("carol")
    assert r.status_code == 200 and r.json == {"requiresCaptcha": True}
    assert "auth_token" not in r.cookies
    assert 'widget.className = "h-captcha"' in browser().get("/login").text
    assert client.simulate_post("/__sandbox/captcha", json={"user": "nobody"}).status_code == 404
    client.simulate_post("/__sandbox/captcha", json={"user": "carol", "enabled": False})
    assert "auth_token" in browser().login("carol").cookies


def test_two_factor_user_gets_a_prompt_and_no_cookie(browser: Callable[..., Browser]) -> None:
    r = browser().login("mallory")
    assert r.status_code == 200 and r.json == {"requires2fa": True}
    assert "auth_token" not in r.cookies
    assert 'box.id = "two-factor"' in browser().get("/login").text


def test_json_routes_without_firewall_cookie_are_blocked_with_html(alice: Browser) -> None:
    del alice.cookies["aws-waf-token"]
    for path in ("/api2/self", f"/_next/data/x/{BIG}.json"):
        r = alice.get(path)
        assert r.status_code == 403
        assert r.headers["content-type"].startswith("text/html") and "Request blocked" in r.text
    r = alice.post("/api2/auth/login", json={"email": "alice@sandbox.test", "password": "sandbox"})
    assert r.status_code == 403 and "Request blocked" in r.text


def test_non_browser_user_agents_are_blocked_even_with_cookies(alice: Browser) -> None:
    for agent in ("python-requests/2.32.3", "curl/8.5.0"):
        alice.user_agent = agent
        r = alice.get("/api2/self")
        assert r.status_code == 403 and "Request blocked" in r.text
        assert alice.get("/__fw/challenge").status_code == 403
    assert alice.get("/login").status_code == 200  # pages are served, only JSON is blocked


def test_forged_or_expired_firewall_tokens_are_blocked(
    client: testing.TestClient, alice: Browser, clock: Clock
) -> None:
    token = alice.cookies["aws-waf-token"]
    alice.cookies["aws-waf-token"] = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    assert alice.get("/api2/self").status_code == 403
    alice.cookies["aws-waf-token"] = token
    assert alice.get("/api2/self").status_code == 200
    client.simulate_post("/__sandbox/expire-firewall")
    assert alice.get("/api2/self").status_code == 403
    alice.pass_firewall()
    assert alice.get("/api2/self").status_code == 200
    clock.advance(86400 + 1)  # default lifetime: one day
    assert alice.get("/api2/self").status_code == 403


def test_firewall_ttl_is_configurable_and_a_token_ends_at_its_expiry_to_the_second(
    client: testing.TestClient, alice: Browser, clock: Clock
) -> None:
    client.simulate_post("/__sandbox/ttl", json={"firewallSeconds": 60})
    clock.t = float(int(clock.t))  # a whole second, so that the expiry (whole seconds) is exactly 60 s away
    alice.pass_firewall()
    clock.advance(59)
    assert alice.get("/api2/self").status_code == 200
    clock.advance(1)
    assert alice.get("/api2/self").status_code == 403


def test_pages_are_served_without_firewall_cookie(client: testing.TestClient, browser: Callable[..., Browser]) -> None:
    b = browser("alice")
    del b.cookies["aws-waf-token"]
    page = b.get(f"/{BIG}")
    assert page.status_code == 200
    assert "/__fw/challenge" in page.text
    assert next_data(page.text)["props"]["pageProps"]["self"]["name"] == "alice"


def test_forged_session_is_no_session(alice: Browser) -> None:
    header, payload, sig = alice.cookies["auth_token"].split(".")
    alice.cookies["auth_token"] = f"{header}.{payload}.{'A' * len(sig)}"
    r = alice.get("/api2/self")
    assert r.status_code == 200 and r.content == b""


def test_expired_session_self_is_empty_200_others_401(client: testing.TestClient, alice: Browser) -> None:
    gid = group_id(client)
    assert alice.get(f"/api2/groups/{gid}").status_code == 200
    client.simulate_post("/__sandbox/expire-session", json={"user": "alice"})
    r = alice.get("/api2/self")
    assert r.status_code == 200 and r.content == b""
    r = alice.get(f"/api2/groups/{gid}")
    assert r.status_code == 401 and r.json == {"message": "unauthorized"}
    assert alice.login("alice").status_code == 200  # a fresh login works again
    assert alice.get(f"/api2/groups/{gid}").status_code == 200


def test_session_exp_is_honoured(alice: Browser, clock: Clock) -> None:
    clock.advance(366 * 86400)
    alice.pass_firewall()
    assert alice.get("/api2/self").content == b""
    assert alice.get("/api2/self/chat-channels").json == {"message": "unauthorized"}


def test_not_a_member_is_action_not_permitted_not_unauthorized(
    client: testing.TestClient, browser: Callable[..., Browser]
) -> None:
    dave: Browser = browser("dave")
    quiet = group_id(client, "quiet-garden")
    for path in (f"/api2/groups/{quiet}", f"/api2/groups/{quiet}/labels"):
        r = dave.get(path)
        assert r.status_code == 401 and r.json == {"message": "action not permitted"}
    assert dave.get("/api2/self").json["name"] == "dave"  # the session itself is fine


def test_expired_session_feed_data_is_the_about_page(client: testing.TestClient, alice: Browser) -> None:
    client.simulate_post("/__sandbox/expire-session", json={"user": "alice"})
    r = alice.data(f"/{BIG}")
    assert r.status_code == 200
    props = r.json["pageProps"]
    assert "postTrees" not in props and "self" not in props and props["currentGroup"]["name"] == BIG


def test_non_browser_user_agents_are_blocked_whatever_their_case(alice: Browser) -> None:
    for agent in ("Python-Requests/2.32.3", "CURL/8.5.0", "Wget/1.21"):
        alice.user_agent = agent
        assert alice.get("/api2/self").status_code == 403
        assert alice.get("/__fw/challenge").status_code == 403


def test_the_challenge_is_not_cached_and_never_gives_a_negative_lifetime(
    client: testing.TestClient, browser: Callable[..., Browser]
) -> None:
    """A cached challenge would hand every browser behind a cache one token; a negative ``max-age`` would
    be a cookie deleted as it is set."""
    b = browser()
    fresh = b.get("/__fw/challenge")
    assert fresh.headers["cache-control"] == "no-store" and 86399 <= fresh.json["maxAge"] <= 86400
    client.simulate_post("/__sandbox/ttl", json={"firewallSeconds": -30})
    assert b.get("/__fw/challenge").json["maxAge"] == 0


def test_a_session_ends_at_its_exp_to_the_second(client: testing.TestClient, alice: Browser, clock: Clock) -> None:
    client.simulate_post("/__sandbox/ttl", json={"sessionSeconds": 60})
    assert alice.login("alice").status_code == 200
    clock.t = float(int(clock.t))  # a whole second, so that exp (whole seconds) is exactly 60 s away
    assert alice.login("alice").status_code == 200
    clock.advance(59)
    assert alice.get("/api2/self").json["name"] == "alice"
    clock.advance(1)
    assert alice.get("/api2/self").content == b""


def test_the_request_log_keeps_the_raw_path_without_its_query(client: testing.TestClient, alice: Browser) -> None:
    """Under gunicorn ``RAW_URI`` holds the query too: the log's ``rawPath`` is the path as sent, the query
    apart."""
    client.simulate_post("/__sandbox/reset")
    alice.get(
        "/api2/posts/a%2Fb/comments", query_string="limit=25", extras={"RAW_URI": "/api2/posts/a%2Fb/comments?limit=25"}
    )
    seen = client.simulate_get("/__sandbox/requests").json["requests"]
    assert seen[-1] == {
        "method": "GET",
        "path": "/api2/posts/a/b/comments",
        "rawPath": "/api2/posts/a%2Fb/comments",
        "query": "limit=25",
    }


def test_a_session_made_right_after_an_expiry_is_good(
    client: testing.TestClient, browser: Callable[..., Browser]
) -> None:
    """Sessions made before "expire every session of alice" end; the very next one made after it does not, even
    when no other token was issued in between (the firewall token here was obtained before)."""
    b = browser()
    b.pass_firewall()
    client.simulate_post("/__sandbox/expire-session", json={"user": "alice"})
    assert b.post("/api2/auth/login", json={"email": "alice@sandbox.test", "password": "sandbox"}).status_code == 200
    assert b.get("/api2/self").json["name"] == "alice"


def test_tokens_of_another_stand_in_process_are_not_accepted(alice: Browser, clock: Clock) -> None:
    """Each process signs with a key of its own: a restart (or a second stand-in) does not honour old cookies."""
    other = Browser(testing.TestClient(create_app(sandbox=Sandbox(1, clock=clock))))
    other.cookies = dict(alice.cookies)
    assert alice.get("/api2/self").json["name"] == "alice"
    assert other.get("/api2/self").status_code == 403  # the firewall token is not one of its own either
    other.pass_firewall()
    assert other.get("/api2/self").content == b""  # and the session is no session there
