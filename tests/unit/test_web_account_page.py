"""The dashboard's Account page: recent activity, change the password, sign out everywhere, delete the account."""

from __future__ import annotations

from datetime import timedelta

from adapters.http.auth import DEVICE_COOKIE, SESSION_COOKIE
from community_api.activity import RECENT_LINES
from tests.unit.web_support import WebBrowser, account_id, activity_rows, form, key_id_of
from tests.unit.world_support import PASSWORD, World

NEW = "a brand new passphrase"


def csrf(page_html: str, action: str) -> str:
    return dict(form(page_html, action).defaults())["csrf_token"]


def test_the_account_page_changes_the_password_and_signs_out_other_browsers(world: World) -> None:
    here, elsewhere, copied = WebBrowser(world), WebBrowser(world), WebBrowser(world)
    here.sign_up()
    elsewhere.sign_in()
    copied.cookies = dict(here.cookies)  # this browser's cookie, taken by whoever the password is changed against
    page = here.get("/account")
    assert page.status_code == 200 and 'aria-current="page">Account' in page.text
    token = csrf(page.text, "/account/password")
    wrong = here.post(
        "/account/password",
        [
            ("csrf_token", token),
            ("current_password", "not it at all"),
            ("new_password", NEW),
            ("new_password_again", NEW),
        ],
    )
    assert wrong.status_code == 403 and 'id="password-error"' in wrong.text
    # Once, beside the form refused (it was also at the page's top: two alerts read out), and focused there.
    assert wrong.text.count('role="alert"') == 1 and 'id="password-error" tabindex="-1" autofocus' in wrong.text
    differ = here.post(
        "/account/password",
        [
            ("csrf_token", token),
            ("current_password", PASSWORD),
            ("new_password", NEW),
            ("new_password_again", NEW + "!"),
        ],
    )
    assert differ.status_code == 400 and "differ" in differ.text
    assert 'id="password-error" tabindex="-1" autofocus' in differ.text  # beside the form it refuses
    done = here.post(
        "/account/password",
        [("csrf_token", token), ("current_password", PASSWORD), ("new_password", NEW), ("new_password_again", NEW)],
    )
    assert done.status_code == 303 and done.headers["location"] == "/account?done=password"
    assert 'id="notice"' in here.follow(done).text
    assert elsewhere.get("/keys").status_code == 303  # signed out: sent to sign in
    assert copied.get("/keys").status_code == 303  # this browser goes on under a new cookie; a copy does not
    assert here.get("/keys").status_code == 200 and here.cookies[SESSION_COOKIE] != copied.cookies[SESSION_COOKIE]


def test_sign_out_everywhere_from_the_page(world: World) -> None:
    here, elsewhere = WebBrowser(world), WebBrowser(world)
    here.sign_up()
    elsewhere.sign_in()
    token = csrf(here.get("/account").text, "/account/sessions")
    assert here.post("/account/sessions", [("csrf_token", "forged")]).status_code == 403
    out = here.post("/account/sessions", [("csrf_token", token)])
    assert out.status_code == 303 and out.headers["location"] == "/login"
    assert "cda_session" not in here.cookies  # the browser forgets the ended session's cookie
    assert here.get("/keys").status_code == 303 and elsewhere.get("/keys").status_code == 303


def test_deleting_the_account_from_the_page_asks_for_the_password(world: World) -> None:
    here = WebBrowser(world)
    here.sign_up()
    here.link("alice")
    token = csrf(here.get("/account").text, "/account/delete")
    refused = here.post("/account/delete", [("csrf_token", token), ("password", "not the password")])
    assert refused.status_code == 403 and 'id="delete-error"' in refused.text
    assert refused.text.count('role="alert"') == 1 and 'id="delete-error" tabindex="-1" autofocus' in refused.text
    assert world.store.count_accounts() == 1
    gone = here.post("/account/delete", [("csrf_token", token), ("password", PASSWORD)])
    assert gone.status_code == 303 and gone.headers["location"] == "/signup"
    assert "cda_session" not in here.cookies  # the browser forgets the ended session's cookie
    assert world.store.count_accounts() == 0
    assert here.get("/keys").status_code == 303


def test_the_page_holds_back_a_browser_guessing_the_password_and_says_so(world: World) -> None:
    """Five wrong passwords from one signed-in browser (the change and the deletion forms count together),
    then the forms answer 429 with the wait, and the account's activity shows the guesses."""
    here = WebBrowser(world)
    here.sign_up()
    token = csrf(here.get("/account").text, "/account/delete")
    for guess in range(4):
        refused = here.post("/account/delete", [("csrf_token", token), ("password", f"guess {guess}")])
        assert refused.status_code == 403
    wrong = [("csrf_token", token), ("current_password", "guess 4"), ("new_password", NEW), ("new_password_again", NEW)]
    assert here.post("/account/password", wrong).status_code == 403
    held = here.post("/account/delete", [("csrf_token", token), ("password", PASSWORD)])
    assert held.status_code == 429 and 'id="delete-error"' in held.text
    assert "too many wrong passwords: try again in 15 minutes" in held.text
    assert world.store.count_accounts() == 1
    rows = activity_rows(here.get("/account").text)
    assert rows[0][1].startswith("A wrong password was given to change the password or delete the account (5 times")


def test_the_account_page_shows_what_happened_newest_first_in_words(world: World) -> None:
    owner = WebBrowser(world)
    owner.sign_up()
    assert "Nothing yet." not in owner.get("/account").text  # the sign-up signed in: a line already
    owner.link("alice")
    world.clock.advance(minutes=1)
    old = owner.mint({"name": "nightly script"})
    key_id = key_id_of(world, old)
    prefix = old[4:12]
    world.clock.advance(minutes=1)
    owner.submit(owner.get(f"/keys/{key_id}/rotate"), f"/keys/{key_id}/rotate", {"grace": "0"})
    world.clock.advance(minutes=1)
    assert world.get("/v1/whoami", old).status_code == 401  # the script still sends the old value

    rows = activity_rows(owner.get("/account").text)
    assert [what for _, what in rows] == [
        f"A request with key “nightly script” (cda_{prefix}…) was refused: it was replaced by a rotation",
        f"Key “nightly script” (cda_{prefix}…) rotated; the old value stopped at once",
        f"Key “nightly script” (cda_{prefix}…) created",
        "Signed in from a browser new to this account",
    ]
    assert rows[0][0] == world.clock.now().strftime("%Y-%m-%d %H:%M UTC")


def test_the_activity_names_unlinked_accounts_and_password_changes_and_is_the_accounts_own(world: World) -> None:
    owner, stranger = WebBrowser(world), WebBrowser(world)
    owner.sign_up()
    owner.link("alice")
    connection = world.store.list_connections(account_id(world))[0]
    page = owner.get(f"/connections/{connection.id}/remove")
    owner.submit(page, f"/connections/{connection.id}/remove")
    token = csrf(owner.get("/account").text, "/account/password")
    changed = owner.post(
        "/account/password",
        [("csrf_token", token), ("current_password", PASSWORD), ("new_password", NEW), ("new_password_again", NEW)],
    )
    assert changed.status_code == 303, changed.text
    texts = [what for _, what in activity_rows(owner.get("/account").text)]
    assert texts[:2] == ["Password changed; every other browser was signed out", "Platform account “alice” unlinked"]

    world.add_account("stranger@example.com")
    stranger.sign_in("stranger@example.com")
    assert [what for _, what in activity_rows(stranger.get("/account").text)] == [
        "Signed in from a browser new to this account"
    ]


def test_a_sign_in_from_a_browser_that_signed_in_before_is_told_from_one_from_a_new_browser(world: World) -> None:
    """The browser that signed in before shows its device cookie; one that never did (someone else's, or
    the owner's after clearing its cookies) is said to be new: the owner can tell a sign-in they did not make."""
    owner = WebBrowser(world)
    owner.sign_up()
    owner.submit(owner.get("/account"), "/logout")
    assert SESSION_COOKIE not in owner.cookies and DEVICE_COOKIE in owner.cookies  # signed out; it stays
    world.clock.advance(minutes=1)
    owner.sign_in()
    world.clock.advance(minutes=1)
    WebBrowser(world).sign_in()
    assert [what for _, what in activity_rows(owner.get("/account").text)] == [
        "Signed in from a browser new to this account",
        "Signed in",
        "Signed in from a browser new to this account",
    ]


def test_a_flood_of_one_event_is_one_row_and_hides_nothing_older(world: World) -> None:
    owner = WebBrowser(world)
    owner.sign_up()
    owner.link("alice")
    prefix = owner.mint({"name": "before the flood"})[4:12]
    first = world.clock.now()
    for _ in range(RECENT_LINES + 10):  # a script that signs in on every run
        world.clock.advance(minutes=1)
        WebBrowser(world).sign_in()  # another browser each time: this one is signed in
    rows = activity_rows(owner.get("/account").text)
    since = (first + timedelta(minutes=1)).strftime("%Y-%m-%d %H:%M UTC")
    assert [what for _, what in rows[:2]] == [
        f"Signed in from a browser new to this account ({RECENT_LINES + 10} times since {since})",
        f"Key “before the flood” (cda_{prefix}…) created",
    ]
    assert rows[0][0] == world.clock.now().strftime("%Y-%m-%d %H:%M UTC")


def test_a_password_change_whose_session_ended_meanwhile_says_so_and_shows_nothing(world: World) -> None:
    """ "Sign out everywhere" from another browser lands while the new password is hashed: the page answers
    as to a signed-out browser (no account page, no activity), and the password is unchanged."""
    from argon2 import PasswordHasher

    here, elsewhere = WebBrowser(world), WebBrowser(world)
    here.sign_up()
    elsewhere.sign_in()
    token = csrf(here.get("/account").text, "/account/password")
    out = csrf(elsewhere.get("/account").text, "/account/sessions")

    class SignsOutMeanwhile(PasswordHasher):
        def hash(self, password: str | bytes, *, salt: bytes | None = None) -> str:
            assert elsewhere.post("/account/sessions", [("csrf_token", out)]).status_code == 303
            return super().hash(password, salt=salt)

    world.deps.password_hasher = SignsOutMeanwhile()
    pairs = [("csrf_token", token), ("current_password", PASSWORD), ("new_password", NEW), ("new_password_again", NEW)]
    refused = here.post("/account/password", pairs)
    assert refused.status_code == 403 and "Your session has ended" in refused.text
    assert 'id="activity"' not in refused.text
    assert here.get("/keys").status_code == 303
    WebBrowser(world).sign_in()  # with the old password


def test_signing_out_everywhere_is_on_the_activity(world: World) -> None:
    here = WebBrowser(world)
    here.sign_up()
    token = csrf(here.get("/account").text, "/account/sessions")
    assert here.post("/account/sessions", [("csrf_token", token)]).status_code == 303
    world.clock.advance(minutes=1)
    here.sign_in()
    said = [what for _, what in activity_rows(here.get("/account").text)]
    assert said[:2] == ["Signed in", "Signed out everywhere"]
