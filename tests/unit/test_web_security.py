"""The dashboard's defences: CSRF tokens on every form, cross-site posts refused, security headers on
every page and OAuth answer, cookies HttpOnly/SameSite (Secure over HTTPS), output escaped."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import falcon.testing
import pytest

from adapters.settings import Settings, load_settings
from adapters.web import pages
from adapters.web.pages import STATIC, static_url
from adapters.wiring import app_for
from tests.unit.web_support import HOST, WebBrowser, account_id, form, key_id_of
from tests.unit.world_support import World, build_world


@pytest.fixture
def owner(world: World) -> WebBrowser:
    browser = WebBrowser(world)
    browser.sign_up()
    browser.link("alice")
    return browser


def csrf_of(page: falcon.testing.Result, action: str = "/keys") -> str:
    return dict(form(page.text, action).defaults())["csrf_token"]


def assert_secure_headers(result: falcon.testing.Result, *, cache: bool = False) -> None:
    csp = result.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp and "default-src 'none'" in csp and "script-src 'self'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert result.headers["x-content-type-options"] == "nosniff"
    assert result.headers["referrer-policy"] == "same-origin"
    assert result.headers["x-frame-options"] == "DENY"
    # A page this one opens (a client's redirect URI, a link) cannot reach back into it through window.opener.
    assert result.headers["cross-origin-opener-policy"] == "same-origin"
    assert ("no-store" in result.headers["cache-control"]) is not cache


def test_every_kind_of_answer_carries_the_security_headers(world: World, owner: WebBrowser) -> None:
    answers = {
        "page": owner.get("/keys"),
        "signed-out page": WebBrowser(world).get("/login"),
        "redirect": WebBrowser(world).get("/usage"),
        "refusal": owner.post("/keys", [("name", "x")]),
        "resource metadata": owner.get("/.well-known/oauth-protected-resource"),
        "server metadata": owner.get("/.well-known/oauth-authorization-server"),
        "token endpoint": owner.post("/oauth/token", [("grant_type", "password")], same_site=False),
        "bad authorization request": owner.get("/oauth/authorize?client_id=nope"),
    }
    for name, result in answers.items():
        assert result.status_code < 500, name
        assert_secure_headers(result)
    assert_secure_headers(owner.get("/static/dashboard.css"), cache=True)
    assert owner.get("/static/copy.js").headers["content-type"].startswith("text/javascript")
    assert owner.get("/static/../pages.py").status_code == 404
    for name in ("pages.py", "dashboard.css.map", "%2e%2e%2fpages.py", "DASHBOARD.CSS"):  # only the two files
        missing = owner.get(f"/static/{name}")
        assert missing.status_code == 404 and missing.json["error"]["code"] == "not_found", name
        if "%2f" not in name:  # decoded, a slash leaves the route: "no route GET /static/../pages.py"
            # Said as it is (the route exists, the file does not), and the name is not echoed.
            assert missing.json["error"]["message"] == "the dashboard has no such file", name


def test_no_page_has_an_inline_script(world: World, owner: WebBrowser) -> None:
    secret_page = owner.submit(owner.get("/keys"), "/keys")
    for page in (owner.get("/keys"), owner.get("/connections"), owner.get("/usage"), secret_page):
        scripts = re.findall(r"<script[^>]*>", page.text)
        assert scripts == [f'<script src="{static_url("copy.js")}" defer>']
        assert not re.search(r"<[^>]+\son[a-z]+=", page.text)  # no inline event handlers either


def test_pages_link_the_static_files_by_their_content(
    world: World, owner: WebBrowser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A browser keeps a linked file for a year, and a release that changes the file links a new URL: no
    browser runs the last release's script or styles against this release's pages (a plain URL, kept an
    hour, did)."""
    links = re.findall(r'(?:href|src)="(/static/[^"]+)"', owner.get("/keys").text)
    assert sorted(link.partition("?")[0] for link in links) == ["/static/copy.js", "/static/dashboard.css"]
    for link in links:
        name, _, query = link.removeprefix("/static/").partition("?")
        data = (STATIC / name).read_bytes()
        assert query == f"v={hashlib.sha256(data).hexdigest()[:16]}"
        linked = owner.get(link)
        assert linked.content == data and linked.headers["cache-control"] == "public, max-age=31536000, immutable"
        for other in (f"/static/{name}", f"/static/{name}?v=0123456789abcdef"):  # an old page's, a typed one
            answer = owner.get(other)
            assert answer.content == data and answer.headers["cache-control"] == "public, max-age=300", other
    # The next release's stylesheet: another URL.
    release = tmp_path / "static"
    release.mkdir()
    for name in ("dashboard.css", "copy.js"):
        (release / name).write_bytes((STATIC / name).read_bytes())
    (release / "dashboard.css").write_bytes(b"body { margin: 1px; }\n")
    before = {name: static_url(name) for name in ("dashboard.css", "copy.js")}
    monkeypatch.setattr(pages, "STATIC", release)
    pages._static_file.cache_clear()
    try:
        assert static_url("dashboard.css") != before["dashboard.css"]
        assert static_url("copy.js") == before["copy.js"]
        assert static_url("dashboard.css") in owner.get("/keys").text
    finally:
        monkeypatch.undo()
        pages._static_file.cache_clear()


@pytest.mark.parametrize("token", [None, "", "wrong-token"])
def test_a_form_without_the_right_csrf_token_is_refused(world: World, owner: WebBrowser, token: str | None) -> None:
    pairs = [("name", "sneaky"), ("scope", "posts:write")] + ([("csrf_token", token)] if token is not None else [])
    refused = owner.post("/keys", pairs)
    assert refused.status_code == 403 and "reload the page" in refused.text
    assert world.store.list_keys(account_id(world)) == []


def test_a_cross_site_post_is_refused_even_with_the_cookie_and_token(world: World, owner: WebBrowser) -> None:
    secret = owner.mint()
    key_id = key_id_of(world, secret)
    page = owner.get(f"/keys/{key_id}/revoke")
    pairs = [("csrf_token", csrf_of(page, f"/keys/{key_id}/revoke"))]
    for headers in (
        {"Origin": "https://evil.example"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "Cross-Site"},  # the header's value read without regard to case
        {"Origin": "null"},
    ):
        refused = owner.post(f"/keys/{key_id}/revoke", pairs, same_site=False, headers=headers)
        assert refused.status_code == 403 and "only from this site" in refused.text
    assert world.get("/v1/whoami", secret).status_code == 200  # still live


def test_a_post_without_the_session_cookie_is_refused(world: World, owner: WebBrowser) -> None:
    # What a cross-site form post looks like once SameSite=Lax has kept the cookie back.
    csrf = csrf_of(owner.get("/keys"))
    stranger = WebBrowser(world)
    refused = stranger.post("/keys", [("csrf_token", csrf), ("name", "x")], same_site=False)
    assert refused.status_code == 403 and "Sign in again" in refused.text
    logout = stranger.post("/logout", [("csrf_token", csrf)])
    assert logout.status_code == 403


def test_the_sign_in_form_has_its_own_csrf_token(world: World, owner: WebBrowser) -> None:
    # Login CSRF: another site must not sign a browser in to an account of its choosing.
    stranger = WebBrowser(world)
    pairs = [("email", "owner@example.com"), ("password", "correct horse battery")]
    assert stranger.post("/login", [*pairs, ("csrf_token", "made-up")]).status_code == 403
    stranger.get("/login")
    assert stranger.post("/login", [*pairs, ("csrf_token", "made-up")]).status_code == 403
    token = stranger.cookies["cda_form"]
    assert (
        stranger.post(
            "/login", [*pairs, ("csrf_token", token)], headers={"Origin": "https://evil.example"}, same_site=False
        ).status_code
        == 403
    )
    assert stranger.post("/login", [*pairs, ("csrf_token", token)]).status_code == 303


def test_the_sign_up_form_has_its_own_csrf_token(world: World) -> None:
    """Sign-up CSRF: another site must not make a browser create, and be signed in to, an account of its
    choosing (the first account of a new service, or any when sign-up is open)."""
    stranger = WebBrowser(world)
    pairs = [("email", "planted@example.com"), ("password", "correct horse battery")]
    pairs.append(("password_again", "correct horse battery"))
    assert stranger.post("/signup", [*pairs, ("csrf_token", "made-up")]).status_code == 403
    stranger.get("/signup")
    assert stranger.post("/signup", [*pairs, ("csrf_token", "made-up")]).status_code == 403
    assert world.store.count_accounts() == 0 and "cda_session" not in stranger.cookies
    assert stranger.post("/signup", [*pairs, ("csrf_token", stranger.cookies["cda_form"])]).status_code == 303


def test_a_planted_form_cookie_signs_nobody_in(world: World, owner: WebBrowser) -> None:
    """Login CSRF by a planted cookie: a sibling site sets ``cda_form=X`` in the victim's browser, then makes
    it post the sign-in form with ``csrf_token=X`` for the attacker's account. The service made no ``X``."""
    victim = WebBrowser(world)
    pairs = [("email", "owner@example.com"), ("password", "correct horse battery")]
    for planted in ("X" * 43, "planted-by-a-sibling-subdomain-0123456789", "A" * 43 + ".forged"):
        victim.cookies["cda_form"] = planted
        assert victim.post("/login", [*pairs, ("csrf_token", planted)]).status_code == 403
        assert "cda_session" not in victim.cookies
    victim.get("/login")  # the page replaces a cookie it did not make with one it did
    made = victim.cookies["cda_form"]
    assert made not in ("X" * 43,) and victim.post("/login", [*pairs, ("csrf_token", made)]).status_code == 303


def test_cookies_are_httponly_and_lax_and_not_secure_over_http(world: World) -> None:
    browser = WebBrowser(world)
    page = browser.get("/signup")
    form_cookie = page.cookies["cda_form"]
    assert form_cookie.http_only and str(form_cookie.same_site).lower() == "lax" and not form_cookie.secure
    assert form_cookie.max_age == 24 * 3600  # a sign-in page left open for the day still signs in
    done = browser.submit(page, "/signup", {"email": "o@example.com", "password": "x" * 12, "password_again": "x" * 12})
    session = done.cookies["cda_session"]
    assert session.http_only and str(session.same_site).lower() == "lax" and not session.secure
    assert "strict-transport-security" not in done.headers


@pytest.mark.parametrize("how", ["public url", "request scheme"])
def test_cookies_are_secure_over_https(how: str) -> None:
    settings = Settings(mode="test", usage_flush_seconds=0, public_url="https://api.example")
    world = build_world()
    if how == "public url":
        world.client = falcon.testing.TestClient(app_for(world.deps, settings))
        page = world.client.simulate_get("/login", headers={"Host": HOST})
    else:
        page = world.client.simulate_get("/login", headers={"Host": HOST}, protocol="https")
    assert page.cookies["cda_form"].secure
    assert page.headers["strict-transport-security"].startswith("max-age=")
    if how == "public url":  # the dashboard's own "no page" and refusal pages too, behind the TLS proxy
        html = {"Host": HOST, "Accept": "text/html"}
        missing = world.client.simulate_get("/no-such-page", headers=html)
        form_headers = {**html, "Content-Type": "application/x-www-form-urlencoded"}
        refused = world.client.simulate_post("/logout", headers=form_headers, body="csrf_token=x")
        for answer, status in ((missing, 404), (refused, 403)):
            assert answer.status_code == status and answer.headers["content-type"].startswith("text/html")
            assert answer.headers["strict-transport-security"].startswith("max-age=")


def test_a_public_url_written_in_capitals_is_the_origin_browsers_send() -> None:
    """A browser writes its Origin in lower case: read as written, ``HTTPS://Dash.Example.ORG`` refused every
    form of the dashboard as cross-site, and set no cookie Secure."""
    settings = load_settings({"COMMUNITY_API_MODE": "test", "COMMUNITY_API_PUBLIC_URL": "HTTPS://Dash.Example.ORG"})
    world = build_world()
    world.client = falcon.testing.TestClient(app_for(world.deps, settings))
    browser = WebBrowser(world)
    origin = {"Origin": "https://dash.example.org", "Sec-Fetch-Site": "same-origin"}
    page = browser.get("/signup")
    assert page.cookies["cda_form"].secure
    fill = {"email": "owner@example.com", "password": "a long password", "password_again": "a long password"}
    done = browser.submit(page, "/signup", fill, headers=origin)
    assert done.status_code == 303, done.text
    issuer = world.client.simulate_get("/.well-known/oauth-authorization-server", headers={"Host": HOST}).json
    assert issuer["issuer"] == "https://dash.example.org"


@pytest.mark.parametrize("host", ["[::1", "[api.example", "a]:1"])
def test_a_host_header_that_is_no_url_part_is_no_server_error_behind_a_public_url(host: str) -> None:
    """With a public URL the Host check steps aside, so a form posted with any Host reaches the origin check,
    which parsed the request's own URL: ``Host: [::1`` made urlsplit raise, a 500 for every form."""
    settings = Settings(mode="test", usage_flush_seconds=0, public_url="https://api.example")
    world = build_world()
    world.client = falcon.testing.TestClient(app_for(world.deps, settings))
    answer = world.client.simulate_post(
        "/login",
        headers={
            "Host": host,
            "Origin": "https://attacker.example",
            "Content-Type": "application/x-www-form-urlencoded",
        },
        body="email=a%40example.com&password=x",
    )
    assert answer.status_code == 403 and "accepted only from this site" in answer.text


def test_untrusted_text_is_escaped(world: World, owner: WebBrowser) -> None:
    owner.submit(owner.get("/keys"), "/keys", {"name": "<script>alert(1)</script>"})
    page = owner.get("/keys")
    assert "<script>alert(1)" not in page.text and "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text


def test_notices_are_fixed_texts_never_echoed(owner: WebBrowser) -> None:
    page = owner.get("/keys?notice=%3Cb%3Ehi")
    assert "<b>hi" not in page.text and "&lt;b&gt;" not in page.text
