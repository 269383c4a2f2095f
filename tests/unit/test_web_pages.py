"""The dashboard's pages, driven like a browser: each form's happy path and its refusals, and that the
pages act through the same core use cases as the JSON API (a key minted here works there, and so on)."""

from __future__ import annotations

import re
from datetime import timedelta
from urllib.parse import quote

import attrs
import pytest

from community_api.connections import session_ending
from community_api.keys import MAX_LIVE_KEYS, mint_key
from community_api.scopes import DEFAULT_SCOPES
from tests.unit.web_support import ORIGIN, WebBrowser, account_id, form, key_id_of, secret_on
from tests.unit.world_support import PASSWORD, World, build_world


@pytest.fixture
def browser(world: World) -> WebBrowser:
    return WebBrowser(world)


@pytest.fixture
def owner(world: World) -> WebBrowser:
    """Signed up, alice linked."""
    browser = WebBrowser(world)
    browser.sign_up()
    browser.link("alice")
    return browser


def test_a_new_service_leads_to_sign_up_then_to_connections(browser: WebBrowser) -> None:
    first = browser.get("/")
    assert first.status_code == 303 and first.headers["location"] == "/signup"
    signed_up = browser.sign_up("Owner@Example.com")
    assert signed_up.headers["location"] == "/connections"
    page = browser.follow(signed_up)
    assert page.status_code == 200 and "owner@example.com" in page.text
    assert "No platform account is linked yet" in page.text
    assert browser.get("/").headers["location"] == "/connections"


@pytest.mark.parametrize(
    ("fill", "message"),
    [
        ({"password": PASSWORD, "password_again": PASSWORD + "x"}, "The two passwords differ."),
        ({"password": "short", "password_again": "short"}, "at least 10 characters"),
        ({"email": "not-an-email"}, "email is not a valid address"),
    ],
)
def test_sign_up_refusals_are_shown_on_the_form(browser: WebBrowser, fill: dict[str, str], message: str) -> None:
    page = browser.get("/signup")
    values = {"email": "o@example.com", "password": PASSWORD, "password_again": PASSWORD, **fill}
    refused = browser.submit(page, "/signup", values)
    assert refused.status_code == 400 and message in refused.text
    assert 'value="o@example.com"' in refused.text or fill.get("email")  # the email is kept
    assert PASSWORD not in refused.text  # a password never comes back
    assert "cda_session" not in browser.cookies


def test_sign_up_closes_after_the_first_account(world: World, browser: WebBrowser) -> None:
    browser.sign_up()
    other = WebBrowser(world)
    page = other.get("/signup")
    assert "Sign-up is closed" in page.text and 'action="/signup"' not in page.text
    token = other.cookies["cda_form"]
    pairs = [("csrf_token", token), ("email", "b@example.com"), ("password", PASSWORD), ("password_again", PASSWORD)]
    refused = other.post("/signup", pairs)
    assert refused.status_code == 403 and "sign-up is closed" in refused.text
    assert world.store.count_accounts() == 1
    assert 'href="/signup"' not in other.get("/login").text  # nor does the sign-in page offer it


def test_sign_up_stays_open_when_the_operator_opened_it() -> None:
    """``COMMUNITY_API_SIGNUP=true``: the form is offered, and the sign-in page leads to it, after the first
    account as before it."""
    world = build_world(signup=True)
    WebBrowser(world).sign_up()
    other = WebBrowser(world)
    assert 'action="/signup"' in other.get("/signup").text
    assert 'href="/signup"' in other.get("/login").text
    done = other.sign_up("second@example.com")
    assert done.status_code == 303 and world.store.count_accounts() == 2


def test_sign_in_goes_back_to_next_but_never_to_another_site(world: World, browser: WebBrowser) -> None:
    browser.sign_up()
    browser.cookies.clear()
    asked = browser.get("/keys")
    assert asked.status_code == 303 and asked.headers["location"] == "/login?next=%2Fkeys"
    page = browser.follow(asked)
    done = browser.submit(page, "/login", {"email": "owner@example.com", "password": PASSWORD})
    assert done.status_code == 303 and done.headers["location"] == "/keys"
    other = WebBrowser(world)
    page = other.get("/login?next=//evil.example/x")
    done = other.submit(page, "/login", {"email": "owner@example.com", "password": PASSWORD})
    assert done.headers["location"] == "/"


# Where a browser could be sent after signing in, from a crafted link to the sign-in page. Browsers read a
# backslash as a slash (WHATWG URL), so ``/\evil.example`` leads to another site as ``//evil.example`` does.
OFF_SITE = [
    "//evil.example/x",
    "/\\evil.example/x",
    "/\\/evil.example",
    "\\\\evil.example",
    "/keys\\..\\\\evil.example",
    "https://evil.example/",
    "evil.example/keys",
    "",
]


@pytest.mark.parametrize("target", OFF_SITE)
def test_a_next_that_leads_off_the_site_goes_home_instead(world: World, browser: WebBrowser, target: str) -> None:
    browser.sign_up()
    signed_in = browser.get(f"/login?next={quote(target)}")
    assert signed_in.status_code == 303 and signed_in.headers["location"] == "/"  # already signed in
    browser.cookies.pop("cda_session")
    page = browser.get(f"/login?next={quote(target)}")
    done = browser.submit(page, "/login", {"email": "owner@example.com", "password": PASSWORD})
    assert done.status_code == 303 and done.headers["location"] == "/"
    browser.cookies.pop("cda_session")  # the form's own next field changed (an old page, a hand-made form)
    fill = {"email": "owner@example.com", "password": PASSWORD, "next": target}
    done = browser.submit(browser.get("/login"), "/login", fill)
    assert done.status_code == 303 and done.headers["location"] == "/"


def test_a_next_on_the_site_is_kept_with_its_query(world: World, browser: WebBrowser) -> None:
    browser.sign_up()
    target = "/oauth/authorize?client_id=ocl_1&state=a%2Fb"
    assert browser.get(f"/login?next={quote(target)}").headers["location"] == target


def test_sign_in_pages_open_in_two_tabs_both_work(world: World, browser: WebBrowser) -> None:
    """The form token is the browser's, not the page's: a second sign-in tab (or a reload) keeps it, so the
    first tab's form is not refused as expired."""
    browser.sign_up()
    browser.cookies.clear()
    first_tab = browser.get("/login")
    second_tab = browser.get("/login")
    assert second_tab.cookies.get("cda_form") is None  # the cookie set by the first is kept
    done = browser.submit(first_tab, "/login", {"email": "owner@example.com", "password": PASSWORD})
    assert done.status_code == 303, done.text


def test_wrong_password_is_refused_alike_and_throttled(world: World, browser: WebBrowser) -> None:
    browser.sign_up()
    other = WebBrowser(world)
    wrong = other.sign_in(password="x" * 12)
    unknown = other.sign_in(email="nobody@example.com", password="x" * 12)
    assert wrong.status_code == unknown.status_code == 401
    assert "wrong email or password" in wrong.text and "cda_session" not in other.cookies
    assert "community-api accounts set-password" in wrong.text  # what to do when it is forgotten
    for _ in range(4):
        other.sign_in(password="x" * 12)
    limited = other.sign_in()
    # The wait is the bound's window, 15 minutes, as ``POST /v1/session`` says it.
    assert limited.status_code == 429 and limited.headers["retry-after"] == "900"


def test_a_refused_sign_in_keeps_the_email_and_where_it_was_going(world: World, browser: WebBrowser) -> None:
    browser.sign_up()
    other = WebBrowser(world)
    page = other.get("/login?next=/usage")
    refused = other.submit(page, "/login", {"email": "owner@example.com", "password": "x" * 12})
    assert refused.status_code == 401
    kept = dict(form(refused.text, "/login").defaults())
    assert kept["email"] == "owner@example.com" and kept["next"] == "/usage"
    assert "x" * 12 not in refused.text  # a password never comes back
    again = other.submit(refused, "/login", {"password": PASSWORD})  # the form shown again works as it is
    assert again.status_code == 303 and again.headers["location"] == "/usage"


def test_the_sign_in_page_of_a_new_service_leads_to_sign_up(browser: WebBrowser) -> None:
    assert 'href="/signup"' in browser.get("/login").text  # no account yet: the first is made there


def test_a_browser_signed_in_on_the_page_is_known_for_180_days(browser: WebBrowser) -> None:
    """The device cookie (OWASP's, for the failed sign-in bound) outlives the 14-day session, as the JSON
    sign-in sets it: a browser that signed in before is not locked out by a stranger's guesses."""
    browser.sign_up()
    browser.cookies.clear()
    signed = browser.sign_in()
    cookies = {cookie.name: cookie for cookie in signed.cookies.values()}
    assert cookies["cda_session"].max_age == 14 * 24 * 3600
    assert cookies["cda_device"].max_age == 180 * 24 * 3600


def test_sign_up_and_sign_in_pages_lead_a_signed_in_person_home(owner: WebBrowser) -> None:
    for path in ("/signup", "/login"):
        page = owner.get(path)
        assert page.status_code == 303 and page.headers["location"] == "/", path


def test_sign_out_ends_the_session(world: World, owner: WebBrowser) -> None:
    cookie = owner.cookies["cda_session"]
    done = owner.submit(owner.get("/keys"), "/logout")
    assert done.status_code == 303 and done.headers["location"] == "/login"
    assert "cda_session" not in owner.cookies
    owner.cookies["cda_session"] = cookie  # the old cookie is worthless now
    assert owner.get("/keys").status_code == 303


def test_link_by_password_and_by_session_token_and_choose_the_active_one(world: World, owner: WebBrowser) -> None:
    page = owner.get("/connections?notice=linked")
    assert "The platform account is linked." in page.text
    assert "@alice" in page.text and "Active connection" in page.text
    token = world.gateway.login("carol@sandbox.test", "sandbox").session_token
    done = owner.submit(page, "/connections", {"session_token": token}, index=1)  # the session-token form
    assert done.status_code == 303, done.text
    linked = {c.handle: c for c in world.store.list_connections(account_id(world))}
    assert set(linked) == {"alice", "carol"} and linked["alice"].active and not linked["carol"].active
    page = owner.get("/connections")
    activated = owner.submit(page, f"/connections/{linked['carol'].id}/activate")
    assert activated.status_code == 303 and activated.headers["location"] == "/connections?notice=activated"
    assert world.store.get_connection(linked["carol"].id).active  # type: ignore[union-attr]
    assert not world.store.get_connection(linked["alice"].id).active  # type: ignore[union-attr]


def test_a_link_made_with_the_active_box_ticked_is_the_active_connection(world: World, owner: WebBrowser) -> None:
    token = world.gateway.login("bob@sandbox.test", "sandbox").session_token
    page = owner.get("/connections")
    done = owner.submit(page, "/connections", {"session_token": token, "active": "1"}, index=1)
    assert done.status_code == 303, done.text
    assert "The platform account is linked." in owner.follow(done).text
    assert [c.handle for c in world.store.list_connections(account_id(world)) if c.active] == ["bob"]


def test_the_linking_form_holds_back_an_address_after_twenty_refusals_and_only_that_address(world: World) -> None:
    """The form counts refused links by the browser's address, as ``POST /v1/connections`` does: twenty
    from one address over several accounts hold that address back, not another one."""

    def browser_of(email: str, address: str) -> WebBrowser:
        world.add_account(email)
        browser = WebBrowser(world, address)
        assert browser.sign_in(email).status_code == 303
        return browser

    guessers = [browser_of(f"user{i}@example.com", "192.0.2.44") for i in range(3)]
    for n in range(20):  # nine per account at most: the per-account bound (10) is never met
        guesser = guessers[n // 9]
        page = guesser.get("/connections")
        refused = guesser.submit(page, "/connections", {"email": f"g{n}@sandbox.test", "password": "x"})
        assert refused.status_code == 400, refused.text
    late = browser_of("late@example.com", "192.0.2.44")
    held = late.submit(late.get("/connections"), "/connections", {"email": "bob@sandbox.test", "password": "sandbox"})
    assert held.status_code == 429 and held.headers["Retry-After"] == "900"
    elsewhere = browser_of("elsewhere@example.com", "192.0.2.45")
    linked = elsewhere.submit(
        elsewhere.get("/connections"), "/connections", {"email": "bob@sandbox.test", "password": "sandbox"}
    )
    assert linked.status_code == 303, linked.text


@pytest.mark.parametrize(
    ("left", "said"),
    [
        (timedelta(days=30, microseconds=1), None),
        (timedelta(days=30), "ending"),  # a month to the instant: the warning starts
        (timedelta(microseconds=1), "ending"),
        (timedelta(0), "ended"),
        (-timedelta(days=1), "ended"),
    ],
    ids=["past-a-month", "a-month", "a-moment", "now", "a-day-ago"],
)
def test_a_session_warns_from_a_month_before_its_end_and_is_ended_from_that_instant(
    world: World, owner: WebBrowser, left: timedelta, said: str | None
) -> None:
    alice = world.store.list_connections(account_id(world))[0]
    now = world.clock.now()
    assert session_ending(attrs.evolve(alice, session_expires_at=now + left), now) == said


def test_the_connections_page_says_when_each_platform_session_ends_and_warns_a_month_before(
    world: World, owner: WebBrowser
) -> None:
    def row(handle: str) -> str:
        page = owner.get("/connections")
        assert page.status_code == 200
        (found,) = [r for r in page.text.split("<tr>") if f"@{handle} " in r]
        return found

    page = owner.get("/connections")
    for handle, days in (("carol", 10), ("bob", 60)):
        token = world.gateway.token_for(handle, timedelta(days=days))
        assert owner.submit(page, "/connections", {"session_token": token}, index=1).status_code == 303
    ten_days = (world.clock.now() + timedelta(days=10)).strftime("%Y-%m-%d %H:%M UTC")
    assert ten_days in row("carol") and "ends soon: link it again below" in row("carol")
    assert "ends soon" not in row("bob") and "ends soon" not in row("alice")  # a year (password) and 60 days
    world.clock.advance(days=10)
    assert "ended: link it again below" in row("carol") and "ends soon" not in row("carol")
    assert "ended" not in row("bob")
    assert "A linked platform account needs linking again" in owner.get("/keys").text
    # Once a request has met the ended session, the status says it: said once, not twice.
    carol = next(c for c in world.store.list_connections(account_id(world)) if c.handle == "carol")
    world.store.set_connection_status(carol.id, "expired")
    assert row("carol").count("link it again below") == 1
    world.clock.advance(days=40)
    assert owner.sign_in().status_code == 303  # the web session lasts 14 days
    assert "ends soon: link it again below" in row("bob")
    # Every other page of the dashboard says so too, and leads to the connections page.
    for path in ("/keys", "/usage", "/account"):
        page = owner.get(path)
        assert "2 linked platform accounts need linking again" in page.text and 'href="/connections"' in page.text
    assert "need linking again" not in owner.get("/connections").text  # each row says it there
    # A connection linked before the service kept the date says it does not know.
    unknown = world.store.list_connections(account_id(world))[0]
    assert unknown.handle == "alice"
    world.store.save_connection(attrs.evolve(unknown, session_expires_at=None), "a session token")
    assert "not known (its token does not say, or it was linked before the service kept the date)" in row("alice")


def test_linking_with_a_wrong_password_shows_the_platforms_refusal(owner: WebBrowser) -> None:
    page = owner.get("/connections")
    refused = owner.submit(page, "/connections", {"email": "bob@sandbox.test", "password": "wrong"})
    assert refused.status_code == 400 and 'role="alert"' in refused.text
    assert "@bob" not in refused.text


def test_mint_with_the_default_scopes_shows_the_value_once_and_it_works(world: World, owner: WebBrowser) -> None:
    page = owner.get("/keys")
    mint_form = form(page.text, "/keys")
    ticked = {f.value for f in mint_form.fields if f.name == "scope" and f.checked}
    assert ticked == set(DEFAULT_SCOPES)
    assert page.text.count("Acts as the account.") == 3 and "Private: reads the account's inbox." in page.text
    done = owner.submit(page, "/keys", {"name": "reader"})
    assert done.status_code == 201 and "shown only this once" in done.text
    secret = secret_on(done.text)
    assert world.get("/v1/whoami", secret).json["handle"] == "alice"
    assert secret not in owner.get("/keys").text  # never shown again
    assert world.post("/v1/groups/builders-club/posts", secret, {"title": "x"}).status_code == 403


def test_the_mint_form_takes_a_name_of_at_most_100_characters_once_trimmed(world: World, owner: WebBrowser) -> None:
    """The form's own ``maxlength`` is the browser's courtesy; a request built by hand meets the rule itself."""
    refused = owner.submit(owner.get("/keys"), "/keys", {"name": "n" * 101})
    assert refused.status_code == 400 and "name is longer than 100 characters" in refused.text
    assert world.store.list_keys(account_id(world)) == []
    done = owner.submit(owner.get("/keys"), "/keys", {"name": f"  {'n' * 100}  "})
    assert done.status_code == 201, done.text
    assert [key.name for key in world.store.list_keys(account_id(world))] == ["n" * 100]


def test_the_keys_page_says_how_many_live_keys_the_account_holds_and_refuses_past_the_most(
    world: World, owner: WebBrowser
) -> None:
    owner.mint()
    assert "holds 1 of at most 100 live keys." in owner.get("/keys").text
    for _ in range(MAX_LIVE_KEYS - 1):
        mint_key(world.store, world.clock, account_id=account_id(world), name="loop", scopes=None, connection_id=None)
    page = owner.get("/keys")
    assert "holds 100 of at most 100 live keys: revoke one it no longer uses to create another." in page.text
    refused = owner.submit(page, "/keys", {"name": "one more"})
    assert refused.status_code == 409 and "already holds 100 live keys" in refused.text


def test_mint_with_write_scopes_bound_to_a_connection(world: World, owner: WebBrowser) -> None:
    alice = world.store.list_connections(account_id(world))[0]
    secret = owner.mint({"scope": ["posts:read", "posts:write"], "connection_id": alice.id})
    created = world.post("/v1/groups/builders-club/posts", secret, {"title": "from the dashboard"})
    assert created.status_code == 201
    mismatch = world.get("/v1/whoami", secret, headers={"X-Community-Connection": "con_other"})
    assert mismatch.status_code == 403  # bound keys keep their connection


def test_mint_without_any_scope_is_refused_on_the_form(owner: WebBrowser) -> None:
    refused = owner.submit(owner.get("/keys"), "/keys", {"scope": None})
    assert refused.status_code == 400 and "at least one scope" in refused.text


def test_rotate_shows_the_old_keys_grace_and_the_old_key_keeps_working(world: World, owner: WebBrowser) -> None:
    old = owner.mint()
    key_id = key_id_of(world, old)
    confirm = owner.get(f"/keys/{key_id}/rotate")
    assert confirm.status_code == 200 and "Keeps working for 24 hours" in confirm.text
    world.clock.advance(minutes=1)
    done = owner.submit(confirm, f"/keys/{key_id}/rotate")
    assert done.status_code == 201 and "24 h 0 min left" in done.text
    new = secret_on(done.text)
    assert new != old
    assert world.get("/v1/whoami", old).status_code == 200
    assert world.get("/v1/whoami", new).status_code == 200
    listed = owner.get("/keys").text
    assert "in grace: 24 h 0 min left" in listed
    assert f'href="/keys/{key_id}/revoke"' in listed  # among the keys in use, not the ended ones
    assert f'href="/keys/{key_id}/rotate"' not in listed  # rotated: its successor is the one to rotate
    assert f'href="/keys/{key_id_of(world, new)}/rotate"' in listed
    assert f'action="/keys/{key_id}/revoke"' in owner.get(f"/keys/{key_id}/revoke").text  # in grace: it can end now
    world.clock.advance(hours=23, minutes=30)
    assert "in grace: 30 min left" in owner.get("/keys").text  # under an hour: minutes alone
    world.clock.advance(minutes=30)
    assert world.get("/v1/whoami", old).status_code == 401
    assert "has already stopped working" in owner.get(f"/keys/{key_id}/revoke").text


def test_rotate_sent_without_a_grace_keeps_the_old_key_for_the_default_24_hours(
    world: World, owner: WebBrowser
) -> None:
    """As ``POST /v1/keys/{id}/rotate`` with no ``grace``: a form sent without the field (a hand-made one, an
    older page) is the default, never an end at once."""
    old = owner.mint()
    key_id = key_id_of(world, old)
    done = owner.submit(owner.get(f"/keys/{key_id}/rotate"), f"/keys/{key_id}/rotate", {"grace": None})
    assert done.status_code == 201 and "24 h 0 min left" in done.text
    world.clock.advance(hours=23, minutes=59)
    assert world.get("/v1/whoami", old).status_code == 200


def test_rotate_with_no_grace_ends_the_old_key_now(world: World, owner: WebBrowser) -> None:
    old = owner.mint()
    key_id = key_id_of(world, old)
    done = owner.submit(owner.get(f"/keys/{key_id}/rotate"), f"/keys/{key_id}/rotate", {"grace": "0"})
    assert done.status_code == 201 and "has stopped working" in done.text
    assert world.get("/v1/whoami", old).status_code == 401
    again = owner.get(f"/keys/{key_id}/rotate")  # the back button: no form offers what cannot be done
    assert again.status_code == 409 and "This key was already rotated; rotate its successor." in again.text
    assert f'action="/keys/{key_id}/rotate"' not in again.text and 'href="/keys"' in again.text


def test_a_rotation_sent_again_from_a_stale_tab_says_why_and_offers_no_form(world: World, owner: WebBrowser) -> None:
    old = owner.mint()
    key_id = key_id_of(world, old)
    confirm = owner.get(f"/keys/{key_id}/rotate")
    assert owner.submit(confirm, f"/keys/{key_id}/rotate").status_code == 201
    again = owner.submit(confirm, f"/keys/{key_id}/rotate")  # the same form, from another tab
    assert again.status_code == 409 and "This key was already rotated; rotate its successor." in again.text
    assert f'action="/keys/{key_id}/rotate"' not in again.text
    key = world.store.get_key(key_id)
    assert key is not None
    account_id = key.account_id
    assert len(world.store.list_keys(account_id)) == 2  # the key and one successor: nothing issued twice


def test_a_revoked_key_offers_no_rotation(world: World, owner: WebBrowser) -> None:
    secret = owner.mint()
    key_id = key_id_of(world, secret)
    owner.submit(owner.get(f"/keys/{key_id}/revoke"), f"/keys/{key_id}/revoke")
    page = owner.get(f"/keys/{key_id}/rotate")
    assert page.status_code == 409 and "This key is revoked and cannot be rotated." in page.text
    assert f'action="/keys/{key_id}/rotate"' not in page.text


def test_rotate_with_a_made_up_grace_is_refused_on_the_page(world: World, owner: WebBrowser) -> None:
    old = owner.mint()
    key_id = key_id_of(world, old)
    refused = owner.submit(owner.get(f"/keys/{key_id}/rotate"), f"/keys/{key_id}/rotate", {"grace": "forever"})
    assert refused.status_code == 400 and "grace must be 0" in refused.text
    assert world.get("/v1/whoami", old).status_code == 200
    assert "in grace" not in owner.get("/keys").text


def test_revoke_asks_first_then_stops_the_key_at_once(world: World, owner: WebBrowser) -> None:
    secret = owner.mint()
    key_id = key_id_of(world, secret)
    confirm = owner.get(f"/keys/{key_id}/revoke")
    assert confirm.status_code == 200 and "cannot be undone" in confirm.text
    assert world.get("/v1/whoami", secret).status_code == 200  # asking did nothing
    done = owner.submit(confirm, f"/keys/{key_id}/revoke")
    assert done.status_code == 303 and done.headers["location"] == "/keys?notice=revoked"
    again = owner.get(f"/keys/{key_id}/revoke")  # the back button: nothing left to confirm
    assert again.status_code == 200 and "has already stopped working" in again.text
    assert f'action="/keys/{key_id}/revoke"' not in again.text
    assert owner.submit(confirm, f"/keys/{key_id}/revoke").status_code == 303  # sent again: still revoked
    assert world.get("/v1/whoami", secret).status_code == 401
    page = owner.follow(done)
    assert "stopped working at once" in page.text and "Ended keys (1)" in page.text


def test_another_accounts_key_is_not_found(world: World, owner: WebBrowser) -> None:
    other = world.add_account("other@example.com", PASSWORD)
    key = mint_key(world.store, world.clock, account_id=other.id, name="theirs", scopes=None, connection_id=None)
    assert owner.get(f"/keys/{key.key.id}/revoke").status_code == 404
    csrf = dict(form(owner.get("/keys").text, "/keys").defaults())["csrf_token"]
    refused = owner.post(f"/keys/{key.key.id}/revoke", [("csrf_token", csrf)])
    assert refused.status_code == 404
    assert world.store.get_key(key.key.id).revoked_at is None  # type: ignore[union-attr]


def test_usage_shows_requests_per_key_and_the_dm_quota(world: World, owner: WebBrowser) -> None:
    secret = owner.mint({"scope": ["groups:read", "dms:write"]})
    key_id = key_id_of(world, secret)
    before = owner.get("/usage")
    assert re.search(rf'id="usage-{key_id}".*?class="num today">0<', before.text, re.S)
    assert 'class="num">0 of 20<' in before.text and "now" in before.text
    assert 'id="writes-left-1">20 of 20<' in before.text and 'id="reads-left-1">10,000 of 10,000<' in before.text
    for _ in range(3):
        world.get("/v1/whoami", secret)
    bob = world.gateway.login("bob@sandbox.test", "sandbox").user.id
    assert world.post("/v1/dms", secret, {"to": bob, "content": "hello"}).status_code == 201
    after = owner.get("/usage")
    assert re.search(rf'id="usage-{key_id}".*?class="num today">4<.*?class="num month">4<', after.text, re.S)
    assert 'id="total-today">4<' in after.text
    assert 'class="num">1 of 20<' in after.text and 'class="num">1 of 100<' in after.text
    assert 'id="writes-left-1">18 of 20<' in after.text  # the DM opened a chat with bob, then sent
    alice = world.store.list_connections(account_id(world))[0]
    next_send = world.throttle.quota(alice.platform_user_id).next_allowed_at
    assert next_send is not None and next_send.strftime("%Y-%m-%d %H:%M UTC") in after.text


def test_usage_counts_each_day_month_and_connection_apart(world: World, owner: WebBrowser) -> None:
    """A key's row says today, this month and in all, each its own count; each linked account's row says
    its own DM quota and pace, not the first one's."""
    secret = owner.mint({"scope": ["groups:read", "dms:write"]})
    key_id = key_id_of(world, secret)
    for _ in range(3):
        world.get("/v1/whoami", secret)
    world.clock.advance(days=1)  # the clock begins on the 1st: the same month
    row = rf'id="usage-{key_id}".*?class="num today">{{}}<.*?class="num month">{{}}<.*?class="num">{{}}<'
    assert re.search(row.format(0, 3, 3), owner.get("/usage").text, re.S)
    owner.link("bob", active="on")  # the unbound key now acts as bob
    alice = world.gateway.login("alice@sandbox.test", "sandbox").user.id
    assert world.post("/v1/dms", secret, {"to": alice, "content": "hello"}).status_code == 201
    assert world.get("/v1/groups", secret).status_code == 200  # reads, as bob
    page = owner.get("/usage").text
    assert page.index("@alice") < page.index("@bob")  # in the order they were linked
    assert re.search(r"@alice.*?class=\"num\">0 of 20<.*?@bob.*?class=\"num\">1 of 20<", page, re.S)
    assert 'id="writes-left-1">20 of 20<' in page and 'id="writes-left-2">18 of 20<' in page
    assert 'id="reads-left-1">10,000 of 10,000<' in page and 'id="reads-left-2">10,000 of 10,000<' not in page
    world.clock.advance(days=40)  # another month (five requests in all); the web session has ended meanwhile
    owner.sign_in()
    assert re.search(row.format(0, 0, 5), owner.get("/usage").text, re.S)


def test_another_accounts_connection_cannot_be_made_active(world: World, owner: WebBrowser) -> None:
    theirs = world.add_account("other@example.com", PASSWORD)
    stranger = WebBrowser(world)
    stranger.sign_in("other@example.com")
    alice = world.store.list_connections(account_id(world))[0]
    csrf = dict(form(stranger.get("/connections").text, "/connections").defaults())["csrf_token"]
    refused = stranger.post(f"/connections/{alice.id}/activate", [("csrf_token", csrf)])
    unknown = stranger.post("/connections/con_0000000000000000/activate", [("csrf_token", csrf)])
    # Never says it exists: the same page as for an id that names nothing.
    assert refused.status_code == unknown.status_code == 404
    assert refused.text.replace(alice.id, "con_0000000000000000") == unknown.text
    assert world.store.list_connections(theirs.id) == []
    still = world.store.get_connection(alice.id)
    assert still is not None and still.account_id == account_id(world) and still.active


@pytest.mark.parametrize(
    "body",
    [
        b"email=\xff\xfe&password=x",  # not UTF-8
        b"name=%FF%FE&email=%C3&password=x%80",  # escapes of bytes that are not UTF-8 (read as U+FFFD before)
        "&".join(f"f{n}=x" for n in range(101)).encode(),  # past the 100 fields a form may have
    ],
)
def test_a_form_that_cannot_be_read_is_a_400_page(owner: WebBrowser, body: bytes) -> None:
    csrf = dict(form(owner.get("/keys").text, "/keys").defaults())["csrf_token"]
    for path in ("/login", "/keys", "/account/password"):
        result = owner.client.simulate_post(
            path,
            headers=owner.headers(
                {
                    "Content-Type": "application/x-www-form-urlencoded",
                    "Origin": ORIGIN,
                    "Sec-Fetch-Site": "same-origin",
                    "X-CSRF-Token": csrf,
                }
            ),
            body=body,
        )
        assert result.status_code == 400, (path, result.status_code, result.text[:300])
        assert "the form could not be read" in result.text
