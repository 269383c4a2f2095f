"""A small browser over ``falcon.testing`` for the dashboard and OAuth tests: a cookie jar, forms read from
the HTML and submitted as a browser would (hidden fields, ticked boxes, selected options, the button
pressed), and the headers a browser sends with a same-site form (``Origin``, ``Sec-Fetch-Site``)."""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import attrs
import falcon.testing

from tests.unit.world_support import PASSWORD, World

HOST = "127.0.0.1:8000"  # one the MCP endpoint's DNS-rebinding protection allows
ORIGIN = f"http://{HOST}"
Fill = Mapping[str, str | Sequence[str] | None]


@attrs.define
class Field:
    name: str
    value: str
    kind: str  # input type, "select", "textarea" or "button"
    checked: bool = False


@attrs.define
class Form:
    action: str
    fields: list[Field] = attrs.field(factory=list)

    def defaults(self) -> list[tuple[str, str]]:
        """What the browser sends before anything is changed (no button)."""
        pairs = []
        for f in self.fields:
            if f.kind in ("checkbox", "radio") and not f.checked or f.kind in ("button", "submit"):
                continue
            pairs.append((f.name, f.value))
        return pairs


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.forms: list[Form] = []
        self._select: Field | None = None
        self._select_first = True
        self._textarea: Field | None = None

    def handle_starttag(self, tag: str, attrs_: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs_}
        if tag == "form":
            self.forms.append(Form(a.get("action", "")))
        elif not self.forms or "name" not in a and tag != "option":
            return
        elif tag == "input":
            kind = a.get("type", "text")
            self.forms[-1].fields.append(Field(a["name"], a.get("value", "on"), kind, "checked" in a))
        elif tag == "button":
            self.forms[-1].fields.append(Field(a["name"], a.get("value", ""), "button"))
        elif tag == "select":
            self._select, self._select_first = Field(a["name"], "", "select"), True
            self.forms[-1].fields.append(self._select)
        elif tag == "option" and self._select is not None:
            if self._select_first or "selected" in a:
                self._select.value = a.get("value", "")
            self._select_first = False
        elif tag == "textarea":
            self._textarea = Field(a["name"], "", "textarea")
            self.forms[-1].fields.append(self._textarea)

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self._textarea.value += data


def forms(html: str) -> list[Form]:
    parser = _Parser()
    parser.feed(html)
    return parser.forms


def form(html: str, action: str, index: int = 0) -> Form:
    """The ``index``-th form of the page that posts to ``action``."""
    found = [f for f in forms(html) if f.action == action]
    assert len(found) > index, f"no form number {index} posting to {action} in the page"
    return found[index]


class WebBrowser:
    """One browser: its cookies and the pages it saw."""

    def __init__(self, world: World, address: str = "127.0.0.1") -> None:
        self.world = world
        self.cookies: dict[str, str] = {}
        self.address = address  # the client address its requests come from (Falcon's own by default)

    @property
    def client(self) -> falcon.testing.TestClient:
        return self.world.client

    def _absorb(self, result: falcon.testing.Result) -> falcon.testing.Result:
        for name, cookie in result.cookies.items():
            if cookie.value and (cookie.max_age is None or cookie.max_age > 0):
                self.cookies[name] = cookie.value
            else:
                self.cookies.pop(name, None)
        return result

    def headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        headers = {"Host": HOST}
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        return {**headers, **(extra or {})}

    def get(self, path: str, **headers: str) -> falcon.testing.Result:
        return self._absorb(self.client.simulate_get(path, headers=self.headers(headers), remote_addr=self.address))

    def post(
        self,
        path: str,
        pairs: Sequence[tuple[str, str]],
        *,
        same_site: bool = True,
        headers: Mapping[str, str] | None = None,
    ) -> falcon.testing.Result:
        sent = {"Content-Type": "application/x-www-form-urlencoded"}
        if same_site:
            sent |= {"Origin": ORIGIN, "Sec-Fetch-Site": "same-origin"}
        sent |= dict(headers or {})
        body = urlencode(list(pairs))
        return self._absorb(
            self.client.simulate_post(path, headers=self.headers(sent), body=body, remote_addr=self.address)
        )

    def submit(
        self,
        page: falcon.testing.Result,
        action: str,
        fill: Fill | None = None,
        button: tuple[str, str] | None = None,
        index: int = 0,
        **options: Any,
    ) -> falcon.testing.Result:
        """Fill in and send the (``index``-th) form of ``page`` that posts to ``action``."""
        target = form(page.text, action, index)
        pairs = target.defaults()
        for name, value in (fill or {}).items():
            pairs = [p for p in pairs if p[0] != name]
            if value is None:
                continue
            pairs += [(name, v) for v in ([value] if isinstance(value, str) else value)]
        if button is not None:
            pairs.append(button)
        return self.post(action, pairs, **options)

    def follow(self, result: falcon.testing.Result) -> falcon.testing.Result:
        assert result.status_code == 303, f"{result.status_code}: {result.text[:500]}"
        location = result.headers["location"]
        parts = urlsplit(location)
        assert not parts.netloc or parts.netloc == HOST, f"a redirect away from the service: {location}"
        return self.get(parts.path + (f"?{parts.query}" if parts.query else ""))

    def csrf(self) -> str:
        """The session's CSRF token, as the pages carry it (for the JSON management routes too)."""
        return dict(form(self.get("/keys").text, "/keys").defaults())["csrf_token"]

    # --- the account --------------------------------------------------------------------------------

    def sign_up(self, email: str = "owner@example.com", password: str = PASSWORD) -> falcon.testing.Result:
        page = self.get("/signup")
        done = self.submit(page, "/signup", {"email": email, "password": password, "password_again": password})
        assert done.status_code == 303, done.text
        return done

    def sign_in(self, email: str = "owner@example.com", password: str = PASSWORD) -> falcon.testing.Result:
        page = self.get("/login")
        return self.submit(page, "/login", {"email": email, "password": password})

    def link(self, handle: str = "alice", **fill: str) -> falcon.testing.Result:
        page = self.get("/connections")
        values = {"email": f"{handle}@sandbox.test", "password": "sandbox", **fill}
        done = self.submit(page, "/connections", values)
        assert done.status_code == 303, done.text
        return done

    def mint(self, fill: Fill | None = None) -> str:
        """Mint a key through the form; answers its secret, read from the page."""
        done = self.submit(self.get("/keys"), "/keys", {"name": "web key", **(fill or {})})
        assert done.status_code == 201, done.text
        return secret_on(done.text)


def account_id(world: World, email: str = "owner@example.com") -> str:
    found = world.store.find_account_by_email(email)
    assert found is not None
    return found[0].id


def key_id_of(world: World, secret: str) -> str:
    """The id of the key with this value (found by its display prefix, as the service does)."""
    return world.store.find_keys_by_prefix(secret[4:12])[0][0].id


def secret_on(html: str) -> str:
    found = re.search(r'id="secret"[^>]*value="(cda_[0-9A-Za-z]+)"', html)
    assert found, "no key value on the page"
    return found.group(1)


def query_of(location: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


def activity_rows(page_html: str) -> list[tuple[str, str]]:
    """The Account page's activity table, newest first: (when, what), the text unescaped."""
    table = page_html.split('id="activity"', 1)[1].split("</table>", 1)[0]
    cells = re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td></tr>", table)
    return [(when, html.unescape(re.sub(r"<[^>]+>", "", what))) for when, what in cells]
