"""The dashboard's Account page: change the password, sign out everywhere, delete the account."""

from __future__ import annotations

from tests.unit.web_support import WebBrowser, form
from tests.unit.world_support import PASSWORD, World

NEW = "a brand new passphrase"


def csrf(page_html: str, action: str) -> str:
    return dict(form(page_html, action).defaults())["csrf_token"]


def test_the_account_page_changes_the_password_and_signs_out_other_browsers(world: World) -> None:
    here, elsewhere = WebBrowser(world), WebBrowser(world)
    here.sign_up()
    elsewhere.sign_in()
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
    done = here.post(
        "/account/password",
        [("csrf_token", token), ("current_password", PASSWORD), ("new_password", NEW), ("new_password_again", NEW)],
    )
    assert done.status_code == 303 and done.headers["location"] == "/account?done=password"
    assert 'id="notice"' in here.follow(done).text
    assert elsewhere.get("/keys").status_code == 303  # signed out: sent to sign in
    assert here.get("/keys").status_code == 200


def test_sign_out_everywhere_from_the_page(world: World) -> None:
    here, elsewhere = WebBrowser(world), WebBrowser(world)
    here.sign_up()
    elsewhere.sign_in()
    token = csrf(here.get("/account").text, "/account/sessions")
    assert here.post("/account/sessions", [("csrf_token", "forged")]).status_code == 403
    out = here.post("/account/sessions", [("csrf_token", token)])
    assert out.status_code == 303 and out.headers["location"] == "/login"
    assert here.get("/keys").status_code == 303 and elsewhere.get("/keys").status_code == 303


def test_deleting_the_account_from_the_page_asks_for_the_password(world: World) -> None:
    here = WebBrowser(world)
    here.sign_up()
    here.link("alice")
    token = csrf(here.get("/account").text, "/account/delete")
    refused = here.post("/account/delete", [("csrf_token", token), ("password", "not the password")])
    assert refused.status_code == 403 and 'id="delete-error"' in refused.text
    assert world.store.count_accounts() == 1
    gone = here.post("/account/delete", [("csrf_token", token), ("password", PASSWORD)])
    assert gone.status_code == 303 and gone.headers["location"] == "/signup"
    assert world.store.count_accounts() == 0
    assert here.get("/keys").status_code == 303
