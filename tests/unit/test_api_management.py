"""Accounts, the web session with its CSRF token, connections, keys and usage."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import falcon.testing
import pytest

from adapters.settings import Settings
from adapters.wire import rfc3339
from adapters.wiring import app_for
from community_api.account_lifecycle import account_summaries
from community_api.accounts import new_session
from community_api.errors import Conflict
from community_api.model import CONNECTION_EXPIRED
from fakes.platform_sessions import SESSION_LIFETIME
from tests.unit.world_support import PASSWORD, World


def test_first_account_then_signup_closed(world: World) -> None:
    first = world.client.simulate_post("/v1/accounts", json={"email": "Owner@Example.com", "password": PASSWORD})
    assert first.status_code == 201
    assert first.json["account"]["email"] == "owner@example.com"
    assert "password" not in first.text
    second = world.client.simulate_post("/v1/accounts", json={"email": "b@example.com", "password": PASSWORD})
    assert second.status_code == 403


@pytest.mark.parametrize(
    "body",
    [
        {"email": "not-an-email", "password": PASSWORD},
        {"email": "a@example.com", "password": "short"},
        {"email": "a@example.com"},
        {"password": PASSWORD},
        {"email": "a@example.com", "password": PASSWORD, "admin": True},
        {"email": ["a@example.com"], "password": PASSWORD},
    ],
)
def test_account_validation(world: World, body: dict) -> None:
    assert world.client.simulate_post("/v1/accounts", json=body).status_code == 400


@pytest.mark.parametrize(
    ("signed_up", "signs_in"),
    [
        ("max@bücher.example", "max@xn--bcher-kva.example"),  # the form a browser's email field sends
        ("max@xn--bcher-kva.example", "Max@Bücher.Example"),
        ("max@straße.example", "max@xn--strae-oqa.example"),  # ß kept, as browsers map it (UTS #46)
    ],
)
def test_an_email_domain_outside_ascii_is_one_account_however_it_is_written(
    world: World, signed_up: str, signs_in: str
) -> None:
    """A browser submits an email field's domain in its IDNA form: an account made with the other form
    (the command line, this API) answered "wrong email or password" to every sign-in from the dashboard."""
    created = world.client.simulate_post("/v1/accounts", json={"email": signed_up, "password": PASSWORD})
    assert created.status_code == 201 and created.json["account"]["email"] == signed_up.lower()
    signed_in = world.client.simulate_post("/v1/session", json={"email": signs_in, "password": PASSWORD})
    assert signed_in.status_code == 200, signed_in.text
    assert signed_in.json["account"]["id"] == created.json["account"]["id"]
    with pytest.raises(Conflict):  # as the command line makes one: never a second account for one address
        world.add_account(signs_in)


@pytest.mark.parametrize(
    ("signed_up", "signs_in"),
    [
        ("jos\u00e9@example.com", "jose\u0301@example.com"),  # é as one character, then as e and an accent
        ("jose\u0301@caf\u00e9.example", "JOS\u00c9@xn--caf-dma.example"),
    ],
)
def test_a_local_part_outside_ascii_is_one_account_however_its_letters_are_written(
    world: World, signed_up: str, signs_in: str
) -> None:
    """Keyboards write é as one character or as e and a combining accent: an account made on one answered
    "wrong email or password" to a sign-in typed on the other. Compared in NFC (RFC 6532 §3.1)."""
    created = world.client.simulate_post("/v1/accounts", json={"email": signed_up, "password": PASSWORD})
    assert created.status_code == 201
    signed_in = world.client.simulate_post("/v1/session", json={"email": signs_in, "password": PASSWORD})
    assert signed_in.status_code == 200, signed_in.text
    assert signed_in.json["account"]["id"] == created.json["account"]["id"]
    with pytest.raises(Conflict):
        world.add_account(signs_in)


def test_a_full_width_local_part_is_another_address(world: World) -> None:
    """NFC, not NFKC: ｊｏｓｅ is another mailbox than jose, not another way of writing it."""
    world.add_account("jose@example.com")
    world.add_account("\uff4a\uff4f\uff53\uff45@example.com")
    assert world.store.count_accounts() == 2


@pytest.mark.parametrize(
    "email",
    ["max@bücher..example", "max@bücher-.example", "max@bü\u200dcher.example", "max@" + "ü" * 70 + ".example"],
)
def test_a_domain_outside_ascii_without_an_idna_form_is_not_an_address(world: World, email: str) -> None:
    refused = world.client.simulate_post("/v1/accounts", json={"email": email, "password": PASSWORD})
    assert refused.status_code == 400 and refused.json["error"]["details"]["field"] == "email"


_LABELS = ".".join(["b" * 63] * 3)  # three labels of the most DNS allows each


@pytest.mark.parametrize(
    ("email", "password", "refusal"),
    [
        ("a" * 64 + f"@{_LABELS}." + "c" * 63, PASSWORD, None),  # 320 characters: the most
        ("a" * 63 + f"@{_LABELS}.{'b' * 63}.c", PASSWORD, "email is longer than 320 characters"),
        ("a" * 65 + "@example.com", PASSWORD, "email is not a valid address"),  # a local part holds 64 at most
        ("owner@localhost", PASSWORD, "email is not a valid address"),  # no dot in the domain
        ("owner@example." + "c" * 64, PASSWORD, "email is not a valid address"),
        ("owner@example.com", "p" * 1024, None),
        ("owner@example.com", "p" * 1025, "password is longer than 1024 characters"),
    ],
    ids=["320", "321", "local-65", "no-dot", "label-64", "password-1024", "password-1025"],
)
def test_sign_up_takes_an_email_and_a_password_up_to_their_limits(
    world: World, email: str, password: str, refusal: str | None
) -> None:
    answer = world.client.simulate_post("/v1/accounts", json={"email": email, "password": password})
    if refusal is None:
        assert answer.status_code == 201, answer.text
        assert world.client.simulate_post("/v1/session", json={"email": email, "password": password}).status_code == 200
        return
    assert answer.status_code == 400 and answer.json["error"]["message"] == refusal, answer.text
    assert world.store.count_accounts() == 0


def test_session_cookie_is_httponly_and_lax(world: World) -> None:
    world.client.simulate_post("/v1/accounts", json={"email": "o@example.com", "password": PASSWORD})
    result = world.client.simulate_post("/v1/session", json={"email": "o@example.com", "password": PASSWORD})
    cookie = result.cookies["cda_session"]
    assert cookie.http_only and (cookie.same_site or "").lower() == "lax" and not cookie.secure
    assert result.json["csrfToken"]
    # The session lasts 14 days, the device cookie (proof of an earlier sign-in) 180.
    assert cookie.max_age == 14 * 86400 and result.cookies["cda_device"].max_age == 180 * 86400
    assert cookie.path == result.cookies["cda_device"].path == "/"


def test_session_cookies_are_secure_on_a_request_made_over_https(world: World) -> None:
    world.client.simulate_post("/v1/accounts", json={"email": "o@example.com", "password": PASSWORD})
    result = world.client.simulate_post(
        "/v1/session", json={"email": "o@example.com", "password": PASSWORD}, protocol="https"
    )
    assert result.status_code == 200
    assert all(cookie.secure for cookie in result.cookies.values())


def test_session_cookies_are_secure_under_an_https_public_url_whatever_the_hop_before(world: World) -> None:
    """Behind a proxy that ends TLS and is not among the trusted ones, a request arrives as plain HTTP: the
    public URL still says browsers reach the service over HTTPS, so the cookies of a JSON sign-in are
    Secure, as the dashboard's are."""
    settings = Settings(mode="test", usage_flush_seconds=0, public_url="https://api.example")
    world.client = falcon.testing.TestClient(app_for(world.deps, settings))
    world.client.simulate_post("/v1/accounts", json={"email": "o@example.com", "password": PASSWORD})
    result = world.client.simulate_post("/v1/session", json={"email": "o@example.com", "password": PASSWORD})
    assert result.status_code == 200
    assert {"cda_session", "cda_device"} <= set(result.cookies)
    assert all(cookie.secure and cookie.http_only for cookie in result.cookies.values())


def test_wrong_password_and_unknown_email_answer_alike_and_are_throttled(world: World) -> None:
    world.sign_up("o@example.com")
    wrong = world.client.simulate_post("/v1/session", json={"email": "o@example.com", "password": "x" * 12})
    unknown = world.client.simulate_post("/v1/session", json={"email": "n@example.com", "password": "x" * 12})
    assert wrong.status_code == unknown.status_code == 401
    assert wrong.json == unknown.json
    assert "WWW-Authenticate" not in wrong.headers
    for _ in range(4):
        world.client.simulate_post("/v1/session", json={"email": "o@example.com", "password": "x" * 12})
    limited = world.client.simulate_post("/v1/session", json={"email": "o@example.com", "password": PASSWORD})
    assert limited.status_code == 429 and int(limited.headers["Retry-After"]) > 0
    world.clock.advance(minutes=16)
    assert (
        world.client.simulate_post("/v1/session", json={"email": "o@example.com", "password": PASSWORD}).status_code
        == 200
    )


def test_management_needs_the_session_and_csrf(world: World) -> None:
    browser = world.sign_up()
    assert world.client.simulate_get("/v1/me").status_code == 401
    no_csrf = world.client.simulate_post("/v1/keys", json={}, headers={"Cookie": f"cda_session={browser.cookie}"})
    assert no_csrf.status_code == 403 and "CSRF" in no_csrf.json["error"]["message"]
    wrong_csrf = world.client.simulate_post(
        "/v1/keys", json={}, headers={"Cookie": f"cda_session={browser.cookie}", "X-CSRF-Token": "nope"}
    )
    assert wrong_csrf.status_code == 403
    assert world.client.simulate_post("/v1/keys", json={}, headers=browser.headers()).status_code == 201
    # Sent twice, it reaches the service joined by a comma: said so (400), rather than "wrong" (403).
    twice = {**browser.headers(), "X-CSRF-Token": f"{browser.csrf},{browser.csrf}"}
    refused = world.client.simulate_post("/v1/keys", json={}, headers=twice)
    assert refused.status_code == 400 and "was it sent twice" in refused.json["error"]["message"]
    assert browser.csrf not in refused.text


def test_safe_methods_need_no_csrf_token(world: World) -> None:
    """A GET or HEAD changes nothing, so a signed-in browser reads without its CSRF token."""
    browser = world.sign_up()
    cookie_only = {"Cookie": f"cda_session={browser.cookie}"}
    for method in ("GET", "HEAD"):
        assert world.client.simulate_request(method, "/v1/me", headers=cookie_only).status_code == 200, method


def test_a_session_cookie_sent_twice_counts_as_its_first(world: World) -> None:
    """As everywhere in the service (and the platform): the first of a cookie sent twice."""
    browser = world.sign_up()
    first = {"Cookie": f"cda_session={browser.cookie}; cda_session=stale"}
    assert world.client.simulate_get("/v1/me", headers=first).status_code == 200


def test_api_key_is_not_accepted_on_management_and_cookie_not_on_data(world: World) -> None:
    browser = world.sign_up()
    world.link(browser)
    key = world.mint(browser)["secret"]
    assert world.get("/v1/me", key).status_code == 401
    assert world.client.simulate_get("/v1/whoami", headers=browser.headers()).status_code == 401


def test_sign_out_ends_the_session(world: World) -> None:
    browser = world.sign_up()
    signed_out = world.client.simulate_delete("/v1/session", headers=browser.headers())
    assert signed_out.status_code == 204 and signed_out.cookies["cda_session"].value == ""  # the cookie cleared
    assert world.client.simulate_get("/v1/me", headers=browser.headers()).status_code == 401


def test_session_expires_after_14_days(world: World) -> None:
    browser = world.sign_up()
    world.clock.advance(days=14, seconds=1)
    assert world.client.simulate_get("/v1/me", headers=browser.headers()).status_code == 401


def test_a_session_ends_at_the_very_instant_of_its_14_days(world: World) -> None:
    """The cookie's Max-Age and the stored end are the same instant: the browser drops the cookie then, and
    a copy of it sent at that instant is refused too."""
    browser = world.sign_up()
    world.clock.advance(days=14, microseconds=-1)
    assert world.client.simulate_get("/v1/me", headers=browser.headers()).status_code == 200
    world.clock.advance(microseconds=1)
    assert world.client.simulate_get("/v1/me", headers=browser.headers()).status_code == 401


def test_a_session_whose_account_is_gone_is_no_session(world: World) -> None:
    """What a deletion racing a request leaves the request to read: a session found, its account not."""
    cookie, session = new_session("acc_gone", world.clock.now())
    world.store.add_web_session(session)
    answer = world.client.simulate_get("/v1/me", headers={"Cookie": f"cda_session={cookie}"})
    assert answer.status_code == 401 and answer.json["error"]["code"] == "unauthorized"


def test_linking_connections(world: World) -> None:
    browser = world.sign_up()
    alice = world.link(browser)
    assert set(alice) == {"id", "platformUserId", "handle", "name", "active", "status", "createdAt", "sessionExpiresAt"}
    assert alice["active"] is True and alice["status"] == "active" and alice["handle"] == "alice"
    # The platform's session lives a year; its end is said in whole seconds, as the token has it.
    assert alice["sessionExpiresAt"] == rfc3339((world.clock.now() + SESSION_LIFETIME).replace(microsecond=0))
    bob = world.link(browser, "bob")
    assert bob["active"] is False
    carol = world.link(browser, "carol", active=True)
    listed = world.client.simulate_get("/v1/connections", headers=browser.headers()).json["connections"]
    assert [c["handle"] for c in listed] == ["alice", "bob", "carol"]
    assert [c["active"] for c in listed] == [False, False, True]
    again = world.link(browser)  # the same platform user: refreshed in place
    assert again["id"] == alice["id"]
    assert len(world.client.simulate_get("/v1/connections", headers=browser.headers()).json["connections"]) == 3
    assert carol["id"] != bob["id"]


def test_a_connection_is_made_the_active_one_over_json(world: World) -> None:
    """The dashboard's Connections page could do it; over JSON, only a new link could (``active``), the
    platform password asked again (session 44)."""
    browser = world.sign_up()
    alice, bob = world.link(browser), world.link(browser, "bob")
    key = world.mint(browser)["secret"]  # unbound: acts as the active connection
    assert world.get("/v1/whoami", key).json["handle"] == "alice"
    activated = world.client.simulate_post(f"/v1/connections/{bob['id']}/activate", headers=browser.headers())
    assert activated.status_code == 200, activated.text
    assert activated.json == {**bob, "active": True}
    assert world.get("/v1/whoami", key).json["handle"] == "bob"
    listed = world.client.simulate_get("/v1/connections", headers=browser.headers()).json["connections"]
    assert [(c["handle"], c["active"]) for c in listed] == [("alice", False), ("bob", True)]
    # Again: the same answer, nothing else changes.
    again = world.client.simulate_post(f"/v1/connections/{bob['id']}/activate", headers=browser.headers())
    assert again.json == activated.json
    assert world.client.simulate_post(f"/v1/connections/{alice['id']}/activate", headers=browser.headers()).json[
        "active"
    ]
    assert world.get("/v1/whoami", key).json["handle"] == "alice"


def test_activating_refuses_what_is_not_the_accounts_and_changes_nothing(world: World) -> None:
    owner = world.sign_up()
    alice, bob = world.link(owner), world.link(owner, "bob")
    world.add_account("two@example.com")
    stranger = world.sign_in("two@example.com")
    for connection_id in (bob["id"], "con_0000000000000000", "../keys", "x" * 300):
        refused = world.client.simulate_post(f"/v1/connections/{connection_id}/activate", headers=stranger.headers())
        assert refused.status_code == 404, (connection_id, refused.text)
        assert refused.json["error"]["code"] == "not_found"
    assert world.client.simulate_post(f"/v1/connections/{bob['id']}/activate").status_code == 401  # no session
    no_csrf = world.client.simulate_post(
        f"/v1/connections/{bob['id']}/activate", headers={"Cookie": owner.headers()["Cookie"]}
    )
    assert no_csrf.status_code == 403
    with_body = world.client.simulate_post(
        f"/v1/connections/{bob['id']}/activate", json={"active": False}, headers=owner.headers()
    )
    assert with_body.status_code == 400
    listed = world.client.simulate_get("/v1/connections", headers=owner.headers()).json["connections"]
    assert [(c["id"], c["active"]) for c in listed] == [(alice["id"], True), (bob["id"], False)]


@pytest.mark.parametrize(
    "body",
    [
        {"email": "alice@sandbox.test", "password": "wrong"},
        {"email": "alice@sandbox.test"},
        {},
        {"sessionToken": "forged"},
        {"sessionToken": "x", "email": "alice@sandbox.test", "password": "sandbox"},
        {"email": "alice@sandbox.test", "password": "sandbox", "active": "yes"},
        {"email": "alice@sandbox.test", "password": "sandbox", "remember": True},
    ],
)
def test_linking_refusals(world: World, body: dict) -> None:
    browser = world.sign_up()
    result = world.client.simulate_post("/v1/connections", json=body, headers=browser.headers())
    assert result.status_code == 400
    assert "sandbox" not in result.json["error"]["message"]


@pytest.mark.parametrize(
    "token",
    [
        "auth_token=eyJhbGciOi.eyJ1c2VyX2lkIjoi.c2ln; client_id=abc",  # a pasted Cookie header
        "auth_token=eyJhbGciOi.eyJ1c2VyX2lkIjoi.c2ln",  # the cookie with its name, as devtools show it
        "eyJhbGciOi eyJ1c2Vy",
        '"eyJhbGciOi"',
        "eyJhbGciOi,x",
        "eyJhbGciOi;x",  # a semicolon alone: it would end the cookie
        "eyJhbGciOi\\x",
        "eyJhbGciOié",
        "eyJhbGciOi\n",
        "eyJhbGciOi\x00",
        "e" * 4087,  # with the cookie's name, one byte more than a browser keeps
    ],
)
def test_a_session_token_that_cannot_be_a_cookie_value_is_refused_naming_the_field(world: World, token: str) -> None:
    """Refused before the platform is asked (it could never be sent as the cookie), with the rule said,
    and the same rule published in the request body's schema."""
    from adapters.http.openapi import document
    from community_api.connections import COOKIE_VALUE_PROBLEM, MAX_SESSION_TOKEN

    browser = world.sign_up()
    asked = world.gateway.calls.copy()
    result = world.client.simulate_post("/v1/connections", json={"sessionToken": token}, headers=browser.headers())
    assert result.status_code == 400, result.text
    error = result.json["error"]
    assert error["details"]["field"] == "sessionToken"
    too_long = f"sessionToken is longer than {MAX_SESSION_TOKEN} characters"
    assert error["message"] == (too_long if len(token) > MAX_SESSION_TOKEN else f"sessionToken {COOKIE_VALUE_PROBLEM}")
    assert world.gateway.calls == asked
    body = document()["paths"]["/v1/connections"]["post"]["requestBody"]["content"]["application/json"]
    # The document refuses the token too, by its length or its pattern (which admits white space alone: a
    # token not given, as in the core).
    published = body["schema"]["properties"]["sessionToken"]
    assert len(token) > published["maxLength"] or not re.fullmatch(published["pattern"], token)


def test_the_operators_list_counts_the_connections_to_link_again(world: World) -> None:
    """Expired by the platform, or ending within a month by their tokens: counted; a year away: not."""
    owner = world.sign_up()
    world.add_account("other@example.com", PASSWORD)
    other = world.sign_in("other@example.com")
    world.link(owner)  # alice: a year
    for handle, days in (("bob", 10), ("carol", 31)):
        token = world.gateway.token_for(handle, timedelta(days=days))
        linked = world.client.simulate_post("/v1/connections", json={"sessionToken": token}, headers=owner.headers())
        assert linked.status_code == 201
    world.link(other, "dave")

    def to_link_again() -> dict[str, tuple[int, int]]:
        return {s.account.email: (s.connections, s.to_link_again) for s in account_summaries(world.store, world.clock)}

    assert to_link_again() == {"owner@example.com": (3, 1), "other@example.com": (1, 0)}
    world.clock.advance(days=2)  # carol's session now ends within a month
    assert to_link_again()["owner@example.com"] == (3, 2)
    (dave,) = world.store.list_connections(world.store.find_account_by_email("other@example.com")[0].id)  # type: ignore[index]
    world.store.set_connection_status(dave.id, CONNECTION_EXPIRED)  # the platform said so
    assert to_link_again()["other@example.com"] == (1, 1)


def test_link_by_session_token(world: World) -> None:
    browser = world.sign_up()
    token = world.gateway.token_for("bob", timedelta(days=20))
    result = world.client.simulate_post("/v1/connections", json={"sessionToken": token}, headers=browser.headers())
    assert result.status_code == 201 and result.json["handle"] == "bob"
    assert result.json["sessionExpiresAt"] == rfc3339((world.clock.now() + timedelta(days=20)).replace(microsecond=0))


def test_a_session_token_that_has_ended_is_refused_with_its_date_and_links_nothing(world: World) -> None:
    browser = world.sign_up()
    ended = world.gateway.token_for("bob", timedelta(hours=-1))
    result = world.client.simulate_post("/v1/connections", json={"sessionToken": ended}, headers=browser.headers())
    assert result.status_code == 400, result.text
    error = result.json["error"]
    when = (world.clock.now() - timedelta(hours=1)).strftime("%Y-%m-%d %H:%M")
    assert error["message"].startswith(f"the platform session token ended on {when} UTC: sign in to the platform")
    assert error["details"] == {"field": "sessionToken"}
    assert world.client.simulate_get("/v1/connections", headers=browser.headers()).json["connections"] == []


def test_a_session_token_the_platform_does_not_know_is_refused_naming_the_field(world: World) -> None:
    browser = world.sign_up()
    result = world.client.simulate_post("/v1/connections", json={"sessionToken": "forged"}, headers=browser.headers())
    assert result.status_code == 400, result.text
    assert result.json["error"]["message"] == "the platform session token is not valid (unknown or expired)"
    assert result.json["error"]["details"] == {"field": "sessionToken"}


def test_a_connection_whose_session_reaches_its_end_answers_connection_expired(world: World) -> None:
    """The platform ends the session at the token's end; the gateway reads that from the platform, as any
    ended session (the date alone is never trusted to say the session is still good)."""
    browser = world.sign_up()
    world.link(browser)
    key = world.mint(browser, scopes=["groups:read"])["secret"]
    assert world.get("/v1/whoami", key).status_code == 200
    world.clock.advance(days=365)
    result = world.get("/v1/whoami", key)
    assert result.status_code == 409 and result.json["error"]["code"] == "connection_expired", result.text


ALICE = {"email": "alice@sandbox.test", "password": "sandbox"}
TOKEN = "<a session token of bob's>"
LINK_BODIES = [
    (ALICE, True),
    ({"sessionToken": TOKEN}, True),
    ({**ALICE, "sessionToken": "   "}, True),  # a blank field is one not given
    ({"sessionToken": TOKEN, "email": "", "password": " \t"}, True),
    ({"email": "", "password": "sandbox", "sessionToken": "  "}, False),  # no form given (schemathesis)
    ({"sessionToken": TOKEN, "email": "alice@sandbox.test"}, False),  # a bit of both
    ({"sessionToken": TOKEN, "password": "sandbox"}, False),
    ({**ALICE, "sessionToken": TOKEN}, False),
    ({"email": "alice@sandbox.test", "password": "  "}, False),
    ({"password": "sandbox"}, False),
    ({"sessionToken": "\t"}, False),
    ({"active": True}, False),
    ({}, False),
]


@pytest.mark.parametrize(("body", "taken"), LINK_BODIES)
def test_the_document_says_which_link_bodies_are_taken(world: World, body: dict[str, Any], taken: bool) -> None:
    """Email and password, or a session token, not both, a blank field being one not given: the published
    body schema says it (``oneOf``), so a client that checks its body against the document (or a fuzzer
    generating from it) sends no body the service refuses for its shape, and holds back none it takes."""
    import jsonschema

    from adapters.http.openapi import document

    browser = world.sign_up()
    token = world.gateway.login("bob@sandbox.test", "sandbox").session_token
    body = {name: token if value == TOKEN else value for name, value in body.items()}
    content = document()["paths"]["/v1/connections"]["post"]["requestBody"]["content"]["application/json"]
    assert jsonschema.Draft202012Validator(content["schema"]).is_valid(body) is taken
    result = world.client.simulate_post("/v1/connections", json=body, headers=browser.headers())
    if taken:
        assert result.status_code == 201, result.text
    else:
        assert result.status_code == 400, result.text
        assert result.json["error"]["message"] in (
            "give the platform account's email and password, or a sessionToken",
            "give either email and password, or sessionToken, not both",
        )
        assert result.json["error"]["details"] == {"fields": ["email", "password", "sessionToken"]}


def test_platform_password_is_never_kept(world: World) -> None:
    browser = world.sign_up()
    world.link(browser)
    everything = repr(world.store.__dict__)
    assert "'sandbox'" not in everything


def test_bind_key_to_another_accounts_connection_is_404(world: World) -> None:
    browser = world.sign_up()
    world.add_account("two@example.com", "another long password")
    other = world.sign_in("two@example.com", "another long password")
    theirs = world.link(other, "bob")
    result = world.client.simulate_post("/v1/keys", json={"connectionId": theirs["id"]}, headers=browser.headers())
    assert result.status_code == 404


@pytest.mark.parametrize(
    "body", [{"scopes": "posts:read"}, {"scopes": [1]}, {"scopes": []}, {"name": 5}, {"expires": "never"}]
)
def test_mint_validation(world: World, body: dict) -> None:
    browser = world.sign_up()
    assert world.client.simulate_post("/v1/keys", json=body, headers=browser.headers()).status_code == 400


def test_me_counts_requests_per_key(world: World) -> None:
    browser = world.sign_up()
    world.link(browser)
    one = world.mint(browser)
    two = world.mint(browser)
    for _ in range(3):
        world.get("/v1/whoami", one["secret"])
    world.get("/v1/groups", two["secret"])
    me = world.client.simulate_get("/v1/me", headers=browser.headers()).json
    assert me["account"]["email"] == "owner@example.com"
    assert me["whoami"]["handle"] == "alice"
    assert [c["handle"] for c in me["connections"]] == ["alice"]
    counts = {k["id"]: (k["requestsToday"], k["requestsTotal"]) for k in me["keys"]}
    assert counts == {one["id"]: (3, 3), two["id"]: (1, 1)}
    assert me["usage"]["requestsToday"] == 4 and me["usage"]["requestsThisMonth"] == 4
    world.clock.advance(days=1)
    me = world.client.simulate_get("/v1/me", headers=browser.headers()).json
    assert me["usage"]["requestsToday"] == 0
    assert {k["id"]: k["requestsTotal"] for k in me["keys"]} == {one["id"]: 3, two["id"]: 1}
    assert {k["id"]: k["requestsToday"] for k in me["keys"]} == {one["id"]: 0, two["id"]: 0}
    world.clock.advance(days=40)  # another month, whatever day the clock began on (the session ended too)
    me = world.client.simulate_get("/v1/me", headers=world.sign_in("owner@example.com").headers()).json
    assert me["usage"]["requestsThisMonth"] == 0
    assert {k["id"]: k["requestsTotal"] for k in me["keys"]} == {one["id"]: 3, two["id"]: 1}


def test_a_key_is_shown_with_its_own_fields_and_nothing_kept_inside(world: World) -> None:
    """The owning account is whoever asks, the lineage is bookkeeping: neither is part of a key's answer."""
    browser = world.sign_up()
    world.link(browser)
    fields = {
        "id",
        "name",
        "prefix",
        "kind",
        "scopes",
        "connectionId",
        "createdAt",
        "lastUsedAt",
        "expiresAt",
        "revokedAt",
    }
    assert set(world.mint(browser)) == fields | {"secret"}
    [listed] = world.client.simulate_get("/v1/me", headers=browser.headers()).json["keys"]
    assert set(listed) == fields | {"requestsToday", "requestsTotal"}


def test_me_speaks_for_the_active_connection_whichever_was_linked_first(world: World) -> None:
    """``whoami`` and the quotas in ``GET /v1/me`` are the active connection's, not the first one linked."""
    browser = world.sign_up()
    world.link(browser)
    bob = world.link(browser, "bob")
    world.client.simulate_post(f"/v1/connections/{bob['id']}/activate", headers=browser.headers())
    me = world.client.simulate_get("/v1/me", headers=browser.headers()).json
    assert [(c["handle"], c["active"]) for c in me["connections"]] == [("alice", False), ("bob", True)]
    assert me["whoami"]["handle"] == "bob"


def test_every_management_answer_is_kept_by_no_cache(world: World) -> None:
    browser = world.sign_up()
    signed = world.client.simulate_post("/v1/session", json={"email": "owner@example.com", "password": PASSWORD})
    key = world.client.simulate_post("/v1/keys", json={}, headers=browser.headers())
    answers = [
        signed,  # the CSRF token
        key,  # the key's secret, shown once
        world.client.simulate_post(f"/v1/keys/{key.json['id']}/rotate", headers=browser.headers()),
        world.client.simulate_get("/v1/me", headers=browser.headers()),
        world.client.simulate_get("/v1/connections", headers=browser.headers()),
        world.client.simulate_post(f"/v1/connections/{world.link(browser)['id']}/activate", headers=browser.headers()),
        world.client.simulate_get("/v1/me"),  # an error answer of a management route
        world.client.simulate_post("/v1/accounts", json={"email": "x@example.com", "password": PASSWORD}),
    ]
    for answer in answers:
        assert answer.headers.get("Cache-Control") == "no-store", (answer.status_code, answer.text)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/keys?scopes=posts:write", {"name": "asked for writes"}),
        ("/v1/connections?active=true", {"email": "bob@sandbox.test", "password": "sandbox"}),
        ("/v1/session?remember=1", {"email": "owner@example.com", "password": PASSWORD}),
        ("/v1/accounts?x=1", {"email": "new@example.com", "password": PASSWORD}),
    ],
)
def test_a_management_post_refuses_a_query_and_does_nothing(world: World, path: str, body: dict[str, Any]) -> None:
    """Before session 44 these routes never looked at their query: ``POST /v1/keys?scopes=posts:write``
    minted a key with the read scopes alone, and the client believed it could write."""
    browser = world.sign_up()
    world.link(browser)
    before = world.client.simulate_get("/v1/me", headers=browser.headers()).json
    refused = world.client.simulate_post(path, json=body, headers=browser.headers())
    assert refused.status_code == 400, refused.text
    name = path.split("?")[1].split("=")[0]
    assert refused.json["error"] == {
        "code": "invalid_request",
        "message": f"unknown query parameter: {name}",
        "details": {"unknown": [name], "allowed": []},
    }
    assert "Set-Cookie" not in refused.headers
    after = world.client.simulate_get("/v1/me", headers=browser.headers()).json
    assert (after["keys"], after["connections"]) == (before["keys"], before["connections"])
    assert world.store.find_account_by_email("new@example.com") is None


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/keys", {"name": "minted once, I hoped"}),
        ("/v1/keys/{key}/rotate", None),
        ("/v1/connections", {"email": "bob@sandbox.test", "password": "sandbox"}),
        ("/v1/connections/{connection}/activate", None),
        ("/v1/me/password", {"currentPassword": PASSWORD, "newPassword": "another long password"}),
        ("/v1/session", {"email": "owner@example.com", "password": PASSWORD}),
        ("/v1/accounts", {"email": "new@example.com", "password": PASSWORD}),
    ],
)
def test_a_management_post_refuses_an_idempotency_key_and_does_nothing(
    world: World, path: str, body: dict[str, Any] | None
) -> None:
    """Only the creating data routes keep an Idempotency-Key; the management POSTs ignored one, so a client
    that minted a key under one and retried, having seen no answer, held two live keys, one of whose
    secret it never saw (session 44)."""
    browser = world.sign_up()
    alice = world.link(browser)
    key = world.mint(browser)
    before = world.client.simulate_get("/v1/me", headers=browser.headers()).json
    for sent in ("", "retry-1"):  # (an empty one too: the client sent the header)
        refused = world.client.simulate_post(
            path.format(key=key["id"], connection=alice["id"]),
            json=body,
            headers={**browser.headers(), "Idempotency-Key": sent},
        )
        assert refused.status_code == 400, refused.text
        assert refused.json["error"]["message"].startswith("this route keeps no Idempotency-Key")
    assert "Set-Cookie" not in refused.headers
    after = world.client.simulate_get("/v1/me", headers=browser.headers()).json
    assert (after["keys"], after["connections"]) == (before["keys"], before["connections"])
    assert world.store.find_account_by_email("new@example.com") is None
    assert world.sign_in("owner@example.com", PASSWORD)  # the password is unchanged


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/session?everywhere=true", None),
        ("/v1/sessions?keep=this", None),
        ("/v1/keys/{key}?after=1h", None),
        ("/v1/connections/{connection}?keepKeys=true", None),
        ("/v1/me?confirm=yes", {"password": PASSWORD}),
    ],
)
def test_a_management_delete_refuses_a_query_and_does_nothing(
    world: World, path: str, body: dict[str, Any] | None
) -> None:
    """A query a DELETE does not know is refused, not dropped: dropped, ``DELETE /v1/session?everywhere=true``
    would sign this browser out alone, and the client would believe every other one was too."""
    browser = world.sign_up()
    alice = world.link(browser)
    key = world.mint(browser)
    before = world.client.simulate_get("/v1/me", headers=browser.headers()).json
    refused = world.client.simulate_delete(
        path.format(key=key["id"], connection=alice["id"]), json=body, headers=browser.headers()
    )
    assert refused.status_code == 400, refused.text
    name = path.split("?")[1].split("=")[0]
    assert refused.json["error"] == {
        "code": "invalid_request",
        "message": f"unknown query parameter: {name}",
        "details": {"unknown": [name], "allowed": []},
    }
    assert "Set-Cookie" not in refused.headers
    after = world.client.simulate_get("/v1/me", headers=browser.headers())
    assert after.status_code == 200, after.text  # still signed in, the account still there
    assert (after.json["keys"], after.json["connections"]) == (before["keys"], before["connections"])
    assert world.get("/v1/whoami", key["secret"]).status_code == 200


def test_minting_refuses_the_connection_header_and_mints_nothing(world: World) -> None:
    """A client that sends X-Community-Connection with its keys' requests sent it to mint too, and got a key
    bound to nothing, acting as whichever connection is active (session 44)."""
    browser = world.sign_up()
    world.link(browser)
    bob = world.link(browser, "bob")
    refused = world.client.simulate_post(
        "/v1/keys", json={"name": "for bob"}, headers={**browser.headers(), "X-Community-Connection": bob["id"]}
    )
    assert refused.status_code == 400
    assert refused.json["error"]["message"] == (
        "X-Community-Connection is for requests made with a key: to bind the new key to a connection, "
        "send connectionId in the body"
    )
    assert world.client.simulate_get("/v1/me", headers=browser.headers()).json["keys"] == []
    bound = world.mint(browser, connection_id=bob["id"])
    assert world.get("/v1/whoami", bound["secret"]).json["handle"] == "bob"
