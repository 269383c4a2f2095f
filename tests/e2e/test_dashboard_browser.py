"""The dashboard in real headless Chromium against gunicorn and the stand-in platform: sign up, sign out
and in, link alice, mint a key and use it with ``requests``, rotate it (the old key still works), revoke
it (it stops at once), and see the usage change. Each page is saved under ``build/screenshots/``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
import requests
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from tests.e2e.dashboard_support import (
    PASSWORD,
    SECRET,
    chromium,
    fill,
    heading,
    press,
    running_service,
    screenshot,
)
from tests.sandbox_support import SandboxProcess, running_sandbox

pytestmark = [pytest.mark.browser, pytest.mark.slow]
EMAIL = "person@example.com"


@attrs.define
class Site:
    url: str
    driver: WebDriver
    log: Path

    def open(self, path: str) -> None:
        self.driver.get(self.url + path)

    def whoami(self, key: str) -> requests.Response:
        return requests.get(self.url + "/v1/whoami", headers={"Authorization": f"Bearer {key}"}, timeout=120)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder = tmp_path_factory.mktemp("dashboard")
    sandbox: SandboxProcess
    with running_sandbox() as sandbox, running_service(folder, sandbox) as url, chromium() as driver:
        yield Site(url, driver, folder / "service.log")


def today_of(site: Site, prefix: str) -> int:
    row = site.driver.find_element(By.XPATH, f"//tr[.//code[contains(., 'cda_{prefix}')]]")
    return int(row.find_element(By.CSS_SELECTOR, "td.today").text)


def test_a_person_manages_keys_in_the_browser(site: Site) -> None:
    driver = site.driver
    site.open("/")
    assert driver.current_url == site.url + "/signup" and heading(driver) == "Create an account"
    screenshot(driver, "signup")
    fill(driver, "email", EMAIL)
    fill(driver, "password", PASSWORD)
    fill(driver, "password_again", PASSWORD)
    press(driver, "form[action='/signup'] button[type=submit]")
    assert driver.current_url == site.url + "/connections"
    assert EMAIL in driver.find_element(By.CLASS_NAME, "who").text

    # Sign out, then in again.
    press(driver, "form.sign-out button")
    assert driver.current_url == site.url + "/login"
    screenshot(driver, "login")
    fill(driver, "email", EMAIL)
    fill(driver, "password", PASSWORD)
    press(driver, "form[action='/login'] button[type=submit]")
    assert driver.current_url == site.url + "/connections"  # "/" sends an account without links there

    # Link alice through the platform's own login (the service drives its own browser for that).
    fill(driver, "platform-email", "alice@sandbox.test")
    fill(driver, "platform-password", "sandbox")
    press(driver, "form[action='/connections'] button[type=submit]")
    assert "The platform account is linked." in driver.find_element(By.CLASS_NAME, "notice").text
    assert "@alice" in driver.page_source and "Active connection" in driver.page_source
    screenshot(driver, "connections")

    # Mint a key with the default scopes; the value is shown once, with a copy button (our one script).
    site.open("/keys")
    screenshot(driver, "keys-empty")
    boxes = {b.get_attribute("value"): b.is_selected() for b in driver.find_elements(By.NAME, "scope")}
    assert boxes == {
        "groups:read": True,
        "posts:read": True,
        "comments:read": True,
        "dms:read": False,
        "posts:write": False,
        "comments:write": False,
        "dms:write": False,
    }
    fill(driver, "key-name", "laptop")
    press(driver, "form[action='/keys'] button[type=submit]")
    first = str(driver.find_element(By.ID, "secret").get_attribute("value"))
    assert re.fullmatch(r"cda_[0-9A-Za-z]{49}", first)
    assert driver.find_element(By.CSS_SELECTOR, "button[data-copy]").is_displayed()  # the script ran under CSP
    assert "shown only this once" in driver.page_source
    focus_on(driver, "secret")  # a keyboard user copies it at once; a screen reader reads the warning with it
    assert driver.switch_to.active_element.get_attribute("aria-describedby") == "secret-warning"
    screenshot(driver, "key-created")
    answer = site.whoami(first)
    assert answer.status_code == 200 and answer.json()["handle"] == "alice"

    site.open("/usage")
    assert today_of(site, first[4:12]) == 1
    screenshot(driver, "usage-one-request")

    # Rotate: the new value once more, and the old key's remaining grace.
    site.open("/keys")
    assert first not in driver.page_source
    press(driver, "td.actions a[href$='/rotate']")
    assert heading(driver) == "Rotate “laptop”"
    screenshot(driver, "rotate")
    press(driver, "form[action$='/rotate'] button[type=submit]")
    second = str(driver.find_element(By.ID, "secret").get_attribute("value"))
    grace = driver.find_element(By.ID, "old-key-grace").text
    assert second != first and re.search(r"keeps working until .* \((23 h 59|24 h 0) min left\)", grace)
    screenshot(driver, "key-rotated")
    assert site.whoami(first).status_code == 200  # still in its grace window
    assert site.whoami(second).status_code == 200
    site.open("/keys")
    assert re.search(r"in grace: (23 h 59|24 h 0) min left", driver.page_source)
    screenshot(driver, "keys")

    # Revoke the new key, after the confirmation page: it (and its predecessor in grace) stop at once.
    driver.find_element(
        By.XPATH, "//tr[.//span[contains(@class, 'status-live')]]//a[contains(@href, '/revoke')]"
    ).click()
    assert heading(driver) == "Revoke “laptop”?" and "cannot be undone" in driver.page_source
    screenshot(driver, "revoke")
    press(driver, "form[action$='/revoke'] button[type=submit]")
    assert driver.current_url == site.url + "/keys?notice=revoked"
    assert site.whoami(second).status_code == 401
    assert site.whoami(first).status_code == 401
    screenshot(driver, "keys-after-revoke")

    # Usage: the requests served, per key and in all (the refused ones are not counted).
    site.open("/usage")
    assert today_of(site, first[4:12]) == 2 and today_of(site, second[4:12]) == 1
    assert driver.find_element(By.ID, "total-today").text == "3"
    assert "0 of 20" in driver.page_source  # no DM sent: the whole hourly quota, next send now
    screenshot(driver, "usage")


def test_the_dashboard_refuses_a_form_posted_from_another_site(site: Site) -> None:
    # The browser is signed in (previous test); a page elsewhere posts to the keys form.
    site.driver.get(
        "data:text/html,<form method=post action='" + site.url + "/keys'><input name=name value=x></form>"
        "<script>document.forms[0].submit()</script>"
    )
    WebDriverWait(site.driver, 10).until(lambda d: "Request refused" in d.title)
    assert "only from this site" in site.driver.page_source or "Sign in again" in site.driver.page_source


def test_an_account_whose_email_domain_is_outside_ascii_signs_in_from_the_browser(site: Site) -> None:
    """Chromium submits an email field's domain in its IDNA form (``max@xn--bcher-kva.example`` for what
    the person typed, ``max@bücher.example``): an account the operator made with the command line, as
    typed, answered "wrong email or password" to its owner's every sign-in."""
    from adapters.store.sqlite_key_store import SqliteKeyStore
    from community_api.accounts import create_account_unchecked
    from community_api.clock import SystemClock

    store = SqliteKeyStore(str(site.log.parent / "service.sqlite3"), SECRET)
    try:
        create_account_unchecked(store, SystemClock(), "max@bücher.example", PASSWORD)
    finally:
        store.close()
    driver = site.driver
    driver.delete_all_cookies()  # signed out
    site.open("/login")
    fill(driver, "email", "max@bücher.example")
    assert driver.execute_script("return document.getElementById('email').value") == "max@xn--bcher-kva.example"
    fill(driver, "password", PASSWORD)
    press(driver, "form[action='/login'] button[type=submit]")
    assert driver.current_url == site.url + "/connections", driver.page_source[:2000]
    assert "max@bücher.example" in driver.find_element(By.CLASS_NAME, "who").text


def focus_on(driver: WebDriver, element_id: str) -> None:
    """Wait (5 s at most) until the element ``element_id`` has the focus."""
    WebDriverWait(driver, 5).until(lambda d: d.switch_to.active_element.get_attribute("id") == element_id)


def test_a_refused_form_puts_the_focus_on_what_went_wrong(site: Site) -> None:
    """By keyboard or with a screen reader: the page of a refused form had the focus at its top, the error
    read out (``role="alert"``) but a keyboard user tabbing through the skip link and the header to reach the
    form again. The error now takes the focus, above the form refused: the next Tab is that form's field."""
    from selenium.webdriver.common.keys import Keys

    driver = site.driver
    driver.delete_all_cookies()  # signed out
    site.open("/login")
    fill(driver, "email", "nobody@example.com")
    fill(driver, "password", "not the password")
    press(driver, "form[action='/login'] button[type=submit]")
    assert driver.current_url == site.url + "/login"
    focus_on(driver, "form-error")  # (a browser moves the focus to an autofocus element after the load)
    focused = driver.switch_to.active_element
    assert focused.get_attribute("role") == "alert"
    focused.send_keys(Keys.TAB)
    assert driver.switch_to.active_element.get_attribute("id") == "email"
    assert driver.find_element(By.ID, "email").get_attribute("value") == "nobody@example.com"
    # A page of several forms shows the error once, beside the form refused, and focuses it there: the next
    # Tab is that form's field, not the page's first form.
    fill(driver, "email", EMAIL)
    fill(driver, "password", PASSWORD)
    press(driver, "form[action='/login'] button[type=submit]")
    site.open("/account")
    fill(driver, "delete_password", "not the password")
    press(driver, "form[action='/account/delete'] button[type=submit]")
    assert len(driver.find_elements(By.CSS_SELECTOR, "[role=alert]")) == 1
    focus_on(driver, "delete-error")
    driver.switch_to.active_element.send_keys(Keys.TAB)
    assert driver.switch_to.active_element.get_attribute("id") == "delete_password"
