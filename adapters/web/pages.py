"""What every dashboard page and OAuth endpoint shares: templates, security headers, forms, the web
session, and the defences against cross-site requests.

Rules:
- Every answer carries a Content-Security-Policy without inline script (the one script, the copy button,
  is a file of our own), ``frame-ancestors 'none'``, ``X-Content-Type-Options: nosniff``,
  ``Referrer-Policy: same-origin`` (no page URL leaves the site, consent URLs carry OAuth parameters; not
  ``no-referrer``, under which browsers send ``Origin: null`` with our own forms) and ``Cache-Control: no-store``
  (pages show secrets and CSRF tokens); HSTS when served over HTTPS.
- Every form POST is refused (403) when the browser says it came from another site (``Sec-Fetch-Site:
  cross-site``, or an ``Origin`` that is not ours), and when it lacks the CSRF token: the web session's
  token for signed-in forms, a double-submit cookie for the sign-in and sign-up forms (login CSRF).
- Cookies are HttpOnly and SameSite=Lax, and Secure when the service is served over HTTPS
  (``settings.public_url`` is https, or the request came over https).
- A page that needs a session sends a signed-out browser to the sign-in page, and back afterwards; a
  ``next`` target is only ever a path on this site.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import secrets
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import falcon
import jinja2

from adapters.http.auth import SESSION_COOKIE, public_base
from adapters.http.body import UnsupportedMediaType, read_raw
from adapters.http.client_address import client_address, trusted_networks
from adapters.settings import Settings
from community_api import accounts, connections
from community_api.deps import Deps
from community_api.errors import InvalidRequest, ServiceError, Unauthorized
from community_api.model import Account, WebSession

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"
FORM_COOKIE = "cda_form"  # double-submit CSRF token of the forms shown before a session exists
HTML = "text/html; charset=utf-8"
FORM_MEDIA = "application/x-www-form-urlencoded"
MAX_FORM_FIELDS = 100
_SELF_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'none'; "
    "form-action {form_action}; frame-ancestors 'none'; base-uri 'none'"
)


SESSION_ENDED = "Your session has ended, or this form was sent from another site. Sign in again."


class PageRefused(Exception):
    """A request a page answers with an HTML refusal (rendered by ``render_refusal``)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _when(moment: datetime | None) -> str:
    return "never" if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _duration(delta: timedelta | None) -> str:
    if delta is None:
        return ""
    minutes = max(0, int(delta.total_seconds()) // 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if hours else f"{minutes} min"


ENVIRONMENT = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES),
    autoescape=True,  # every template is HTML: client names, handles and key names are untrusted text
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
ENVIRONMENT.filters["when"] = _when
ENVIRONMENT.filters["duration"] = _duration
ENVIRONMENT.filters["count"] = "{:,}".format  # 65,536 reads a minute, 1,204,377 requests: as the README writes them

_STATIC_TYPES = {"dashboard.css": "text/css; charset=utf-8", "copy.js": "text/javascript; charset=utf-8"}


@functools.cache  # the files are part of the release: read once per process
def _static_file(name: str) -> tuple[str, bytes, str] | None:
    """A static file's media type, bytes and digest (16 hex of its SHA-256), or None if it is not one."""
    media = _STATIC_TYPES.get(name)
    if media is None:
        return None
    data = (STATIC / name).read_bytes()
    return media, data, hashlib.sha256(data).hexdigest()[:16]


def static_url(name: str) -> str:
    """The URL a page links a static file by: it changes whenever the file's content does."""
    found = _static_file(name)
    if found is None:
        raise KeyError(name)
    return f"/static/{name}?v={found[2]}"


ENVIRONMENT.globals["static_url"] = static_url


class Form:
    """A url-encoded form body: every field may hold several values (check-boxes)."""

    def __init__(self, fields: dict[str, list[str]]) -> None:
        self.fields = fields

    def get(self, name: str) -> str | None:
        values = self.fields.get(name)
        return values[0] if values else None

    def getall(self, name: str) -> list[str]:
        return list(self.fields.get(name, []))

    def one(self, name: str) -> str | None:
        """The value of a field that may appear at most once (OAuth parameters, RFC 6749 §3.1)."""
        values = self.fields.get(name, [])
        if len(values) > 1:
            raise InvalidRequest(f"{name} may be given once")
        return values[0] if values else None


def read_form(req: falcon.Request) -> Form:
    media = (req.content_type or "").split(";")[0].strip().lower()
    if media != FORM_MEDIA:
        raise UnsupportedMediaType(f"send the form as {FORM_MEDIA}")
    try:
        text = read_raw(req).decode("utf-8")
        # Strict, as for the body itself: parse_qs would put U+FFFD for an escape that is not UTF-8
        # (``name=%FF``), storing a name the browser never sent and making two passwords one.
        fields = parse_qs(text, keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS, errors="strict")
        return Form(fields)
    except (UnicodeDecodeError, ValueError):
        raise InvalidRequest("the form could not be read") from None


_URI_DELIMITERS = ":/?#[]@!$&'()*+,;=%"  # RFC 3986's reserved characters, and the escapes' %


def security_headers(resp: falcon.Response, *, https: bool, form_targets: Iterable[str] = ()) -> None:
    """The headers of every answer of the web side. ``form_targets`` are origins (or schemes) a form may
    lead to besides this site: Chromium applies ``form-action`` to the redirect after a POST too, and the
    consent form's answer redirects to the client's redirect URI."""
    form_action = " ".join(["'self'", *form_targets])
    resp.set_header("Content-Security-Policy", _SELF_CSP.format(form_action=form_action))
    resp.set_header("X-Content-Type-Options", "nosniff")
    resp.set_header("Referrer-Policy", "same-origin")
    resp.set_header("X-Frame-Options", "DENY")
    resp.set_header("Cross-Origin-Opener-Policy", "same-origin")
    if resp.get_header("Cache-Control") is None:
        resp.set_header("Cache-Control", "no-store")
    if https:
        resp.set_header("Strict-Transport-Security", "max-age=31536000")


def form_target(uri: str) -> str:
    """The CSP source that allows a form to lead to ``uri``: its origin, or its scheme for a native app."""
    parts = urlsplit(uri)
    if parts.scheme in ("http", "https"):
        return f"{parts.scheme}://{parts.netloc}"
    return f"{parts.scheme}:"


def safe_next(target: str | None) -> str:
    """A path on this site to go to after signing in; anything else (another site, ``//host``) is ``/``. No
    backslash anywhere: browsers read one as a slash (``/\\host`` is ``//host``)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


class WebResource:
    """Base of the web side's resources: the collaborators, and the helpers every page uses."""

    def __init__(self, deps: Deps, settings: Settings) -> None:
        self.deps = deps
        self.settings = settings
        self._proxies = trusted_networks(settings.trusted_proxies)

    def client(self, req: falcon.Request) -> str:
        """The client's address for counting (``adapters.http.client_address``)."""
        return client_address(req, self._proxies)

    # --- answers ---------------------------------------------------------------------------------

    def https(self, req: falcon.Request) -> bool:
        return self.settings.public_url.startswith("https://") or req.scheme == "https"

    def base(self, req: falcon.Request) -> str:
        return public_base(self.settings, req)

    def render(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        template: str,
        *,
        status: int = 200,
        form_targets: Iterable[str] = (),
        **context: Any,
    ) -> None:
        signed_in = getattr(req.context, "web", None)
        values: dict[str, Any] = {
            "account": signed_in[0] if signed_in else None,
            "csrf_token": signed_in[1].csrf_token if signed_in else getattr(req.context, "form_token", ""),
            "notice": None,
            "error": None,
            "section": "",
            "to_link_again": 0,
            **context,
        }
        if signed_in and values["section"] != "connections":  # that page says it on each row
            # Every page says when linked accounts need linking again: their keys stop when the session ends.
            linked = connections.list_connections(self.deps, signed_in[0].id)
            values["to_link_again"] = connections.count_to_link_again(linked, self.deps.clock.now())
        resp.status = status
        resp.content_type = HTML
        resp.text = ENVIRONMENT.get_template(template).render(values)
        security_headers(resp, https=self.https(req), form_targets=form_targets)

    def redirect(self, req: falcon.Request, resp: falcon.Response, location: str) -> None:
        resp.status = falcon.HTTP_303
        # Not through ``resp.location``: Falcon percent-encodes a value that holds a character outside ASCII
        # whole, its escapes too, so the answer to a client whose redirect URI holds one
        # (``https://app.example/é/cb``) carried its ``state``, ``iss`` and error text encoded twice. Here
        # only what a URI may not hold is encoded (``é`` as ``%C3%A9``); escapes and delimiters are kept.
        resp.set_header("Location", quote(location, safe=_URI_DELIMITERS))
        security_headers(resp, https=self.https(req))

    def set_cookie(self, req: falcon.Request, resp: falcon.Response, name: str, value: str, max_age: int) -> None:
        resp.set_cookie(
            name,
            value,
            max_age=max_age,
            path="/",
            http_only=True,
            secure=self.https(req),
            same_site="Lax",
        )

    # --- the web session -------------------------------------------------------------------------

    def signed_in(self, req: falcon.Request) -> tuple[Account, WebSession] | None:
        cookies = req.get_cookie_values(SESSION_COOKIE) or []
        try:
            found = accounts.session_account(self.deps.store, self.deps.clock, cookies[0] if cookies else None)
        except Unauthorized:
            return None
        req.context.web = found
        return found

    def page_session(self, req: falcon.Request, resp: falcon.Response) -> tuple[Account, WebSession] | None:
        """The session of a page (GET); None after sending a signed-out browser to sign in."""
        found = self.signed_in(req)
        if found is None:
            self.redirect(req, resp, "/login?next=" + quote(req.relative_uri, safe=""))
        return found

    def form_session(self, req: falcon.Request) -> tuple[Account, WebSession, Form]:
        """The session and form of a signed-in POST, after the cross-site and CSRF checks."""
        form = self.same_site_form(req)
        found = self.signed_in(req)
        if found is None:
            raise PageRefused(403, SESSION_ENDED)
        try:
            accounts.check_csrf(found[1], form.get("csrf_token"))
        except ServiceError:
            raise PageRefused(403, "This form has expired or did not come from this site: reload the page.") from None
        return found[0], found[1], form

    def same_site_form(self, req: falcon.Request) -> Form:
        """The form of a POST that the browser says came from this site."""
        if (req.get_header("Sec-Fetch-Site") or "").lower() == "cross-site":
            raise PageRefused(403, "Forms of this dashboard are accepted only from this site.")
        origin = req.get_header("Origin")
        if origin is not None and origin not in self._own_origins(req):
            raise PageRefused(403, "Forms of this dashboard are accepted only from this site.")
        try:
            return read_form(req)
        except ServiceError as error:
            raise PageRefused(400, error.message) from None

    def _own_origins(self, req: falcon.Request) -> set[str]:
        # The request's own origin, as the Host header wrote it: not parsed, since a Host header is any text
        # when the service has a public URL (``[::1`` made urlsplit raise: a 500 on every form).
        origins = {f"{req.scheme}://{req.netloc}"}
        if self.settings.public_url:
            origins.add(form_target(self.settings.public_url))
        return origins

    # --- the forms shown before a session exists (sign in, sign up) ------------------------------

    # The forms shown before a session exists (sign-in, sign-up) carry a double-submit token, signed
    # (OWASP's signed double-submit cookie): ``<random>.<HMAC of it>``, with a key derived from the service
    # secret. A cookie planted by a sibling site (``cda_form=X``, then a form posted with ``csrf_token=X``)
    # is refused, since the service did not make it.

    def _form_mac(self, nonce: str) -> str:
        key = hmac.new(self.settings.secret.encode(), b"community-api form token v1", hashlib.sha256).digest()
        digest = hmac.new(key, nonce.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def _made_here(self, token: str) -> bool:
        nonce, _, mac = token.partition(".")
        if not 20 <= len(nonce) <= 64 or not mac:
            return False
        return hmac.compare_digest(mac.encode(), self._form_mac(nonce).encode())

    def issue_form_token(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Keep (or set) the double-submit cookie, and put its value in the form to render."""
        existing = (req.get_cookie_values(FORM_COOKIE) or [""])[0]
        if self._made_here(existing):
            token = existing
        else:
            nonce = secrets.token_urlsafe(32)
            token = f"{nonce}.{self._form_mac(nonce)}"
            self.set_cookie(req, resp, FORM_COOKIE, token, max_age=24 * 3600)
        req.context.form_token = token

    def check_form_token(self, req: falcon.Request, form: Form) -> None:
        cookie = (req.get_cookie_values(FORM_COOKIE) or [""])[0]
        sent = form.get("csrf_token") or ""
        if not self._made_here(cookie) or not hmac.compare_digest(cookie.encode(), sent.encode()):
            raise PageRefused(403, "This form has expired or did not come from this site: reload the page.")
        req.context.form_token = cookie


def _notice_page(
    req: falcon.Request, resp: falcon.Response, settings: Settings, status: int, title: str, message: str
) -> None:
    """A small page of the dashboard with one message and the usual headers, outside any signed-in page."""
    resp.status = status
    resp.content_type = HTML
    resp.text = ENVIRONMENT.get_template("refused.html").render(
        {
            "title": title,
            "message": message,
            "account": None,
            "csrf_token": "",
            "notice": None,
            "error": None,
            "section": "",
        }
    )
    security_headers(resp, https=settings.public_url.startswith("https://") or req.scheme == "https")


def failure_page(settings: Settings) -> Callable[[falcon.Request, falcon.Response, int, str], None]:
    """A failure of the service (a bug, or storage that cannot write), or an address with no page, as a
    page for a person's browser: the dashboard's own look and message, not the API's JSON
    (``adapters/http/errors.install``)."""

    def render_failure(req: falcon.Request, resp: falcon.Response, status: int, message: str) -> None:
        title = {503: "Service unavailable", 404: "Page not found"}.get(status, "Something went wrong")
        _notice_page(req, resp, settings, status, title, message[:1].upper() + message[1:] + ".")

    return render_failure


def refusal_handler(settings: Settings) -> Any:
    """The app's handler of ``PageRefused``: a small HTML page with the reason, and the usual headers."""

    def render_refusal(req: falcon.Request, resp: falcon.Response, error: PageRefused, params: Any) -> None:
        _notice_page(req, resp, settings, error.status, "Request refused", error.message)

    return render_refusal


class StaticResource:
    """The dashboard's CSS and its one script, from files of this package (nothing else is served).

    Pages link each file with its content's digest in the query (``static_url``): a browser may keep that
    URL for a year, and a release that changes the file links a new URL, so no browser runs last release's
    script or styles against this release's page (with a plain URL kept for an hour, it did until then).
    A URL without the current digest (an old page, a hand-typed one) is kept for a few minutes only."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        found = _static_file(name)
        if found is None:
            raise falcon.HTTPNotFound(description="the dashboard has no such file")  # never echoes the name
        media, data, digest = found
        resp.content_type = media
        resp.data = data
        current = req.params.get("v") == digest
        resp.set_header("Cache-Control", "public, max-age=31536000, immutable" if current else "public, max-age=300")
        security_headers(resp, https=req.scheme == "https")
