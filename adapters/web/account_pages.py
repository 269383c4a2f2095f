"""Dashboard pages of the account: home, sign up, sign in, sign out. They call the same use cases as
``POST /v1/accounts`` and ``POST``/``DELETE /v1/session`` (``community_api.accounts``) and set the same
session cookie, so a browser signed in here may also call the JSON management routes."""

from __future__ import annotations

import falcon

from adapters.commands import structure_body
from adapters.http.auth import DEVICE_COOKIE, SESSION_COOKIE, device_cookie
from adapters.http.errors import STATUS_BY_CODE
from adapters.web.pages import WebResource, safe_next
from community_api import accounts, connections
from community_api.dashboard import signup_open
from community_api.errors import ServiceError
from community_api.sign_in_guard import DEVICE_COOKIE_LIFETIME


class HomePage(WebResource):
    """``/``: where a browser should be — signed out: sign in (or sign up on a new service); signed in:
    the keys, or the connections while none is linked."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        found = self.signed_in(req)
        if found is None:
            self.redirect(req, resp, "/signup" if self.deps.store.count_accounts() == 0 else "/login")
            return
        linked = connections.list_connections(self.deps, found[0].id)
        self.redirect(req, resp, "/keys" if linked else "/connections")


class SessionStarter(WebResource):
    def start_session(self, req: falcon.Request, resp: falcon.Response, signed: accounts.SignedIn) -> None:
        lifetime = int(accounts.SESSION_LIFETIME.total_seconds())
        self.set_cookie(req, resp, SESSION_COOKIE, signed.cookie_value, max_age=lifetime)
        device_lifetime = int(DEVICE_COOKIE_LIFETIME.total_seconds())
        self.set_cookie(req, resp, DEVICE_COOKIE, signed.device_cookie, max_age=device_lifetime)

    def sign_in(self, req: falcon.Request, form: dict[str, str]) -> accounts.SignedIn:
        deps = self.deps
        return accounts.sign_in(
            deps.store,
            deps.clock,
            structure_body(form, accounts.Credentials),
            self.client(req),
            device_cookies=deps.device_cookies,
            device_cookie=device_cookie(req),
            hasher=deps.password_hasher,
        )


class SignupPage(SessionStarter):
    """``/signup``: the first account of a service, or any account when sign-up is enabled."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        if self.signed_in(req) is not None:
            self.redirect(req, resp, "/")
            return
        self.issue_form_token(req, resp)
        self._show(req, resp, email="")

    def _show(
        self, req: falcon.Request, resp: falcon.Response, *, email: str, error: str | None = None, status: int = 200
    ) -> None:
        is_open = signup_open(self.deps.store, self.settings.signup)
        self.render(
            req, resp, "signup.html", status=status, title="Create an account", open=is_open, email=email, error=error
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        form = self.same_site_form(req)
        self.check_form_token(req, form)
        email, password = form.get("email") or "", form.get("password") or ""
        if password != (form.get("password_again") or ""):
            self._show(req, resp, email=email, error="The two passwords differ.", status=400)
            return
        credentials = {"email": email, "password": password}
        deps = self.deps
        try:
            accounts.create_account(
                deps.store,
                deps.clock,
                structure_body(credentials, accounts.NewAccount),
                signup_enabled=self.settings.signup,
                client_address=self.client(req),
                hasher=deps.password_hasher,
            )
            signed = self.sign_in(req, credentials)
        except ServiceError as error:
            self._show(req, resp, email=email, error=error.message, status=STATUS_BY_CODE.get(error.code, 400))
            return
        self.start_session(req, resp, signed)
        self.redirect(req, resp, "/connections")


class LoginPage(SessionStarter):
    """``/login?next=/path``: sign in, then go back to ``next`` (a path of this site only)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        target = safe_next(req.get_param("next"))
        if self.signed_in(req) is not None:
            self.redirect(req, resp, target)
            return
        self.issue_form_token(req, resp)
        self._show(req, resp, email="", target=target)

    def _show(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        *,
        email: str,
        target: str,
        error: str | None = None,
        status: int = 200,
    ) -> None:
        self.render(
            req,
            resp,
            "login.html",
            status=status,
            title="Sign in",
            email=email,
            next=target,
            signup=signup_open(self.deps.store, self.settings.signup),
            error=error,
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        form = self.same_site_form(req)
        self.check_form_token(req, form)
        email, target = form.get("email") or "", safe_next(form.get("next"))
        try:
            signed = self.sign_in(req, {"email": email, "password": form.get("password") or ""})
        except ServiceError as error:
            if error.code == "rate_limited":
                resp.set_header("Retry-After", str(error.details.get("retryAfter", 60)))
            status = STATUS_BY_CODE.get(error.code, 400)
            self._show(req, resp, email=email, target=target, error=error.message, status=status)
            return
        self.start_session(req, resp, signed)
        self.redirect(req, resp, target)


class LogoutAction(WebResource):
    """``POST /logout``: end the session (this browser's only)."""

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.form_session(req)
        cookie = (req.get_cookie_values(SESSION_COOKIE) or [""])[0]
        accounts.sign_out(self.deps.store, cookie)
        resp.unset_cookie(SESSION_COOKIE, path="/")
        self.redirect(req, resp, "/login")
