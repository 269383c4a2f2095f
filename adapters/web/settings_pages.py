"""``/account``: the signed-in person's own account — its recent activity; change the password, sign out
everywhere, delete it.

Each action is a form of this site (CSRF token, same-site check) that calls the same core use case as the
management API (``community_api.account_lifecycle``).
"""

from __future__ import annotations

import falcon

from adapters.commands import structure_body
from adapters.http.auth import SESSION_COOKIE
from adapters.http.errors import STATUS_BY_CODE
from adapters.web.pages import SESSION_ENDED, PageRefused, WebResource
from community_api import account_lifecycle, accounts, activity
from community_api.errors import ServiceError, Unauthorized
from community_api.model import Account

NOTICES = {"password": "Your password is changed. Every other browser signed in to this account is signed out."}


class AccountPage(WebResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        found = self.page_session(req, resp)
        if found is not None:
            self.show(req, resp, found[0], notice=NOTICES.get(req.get_param("done") or ""))

    def show(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        account: Account,
        *,
        notice: str | None = None,
        error: str | None = None,
        error_form: str | None = None,
        status: int = 200,
    ) -> None:
        self.render(
            req,
            resp,
            "account.html",
            status=status,
            title="Account",
            section="account",
            notice=notice,
            error=error,
            error_form=error_form,
            activity=activity.recent_activity(self.deps.store, account.id),
        )


class PasswordChange(AccountPage):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        account, session, form = self.form_session(req)
        body = {"currentPassword": form.get("current_password") or "", "newPassword": form.get("new_password") or ""}
        if body["newPassword"] != (form.get("new_password_again") or ""):
            self.show(req, resp, account, error="The two new passwords differ.", error_form="password", status=400)
            return
        try:
            change = structure_body(body, account_lifecycle.PasswordChange)
            renewed = account_lifecycle.change_password(
                self.deps.store, self.deps.clock, account, session, change, hasher=self.deps.password_hasher
            )
        except Unauthorized:  # the session ended while the change ran: nothing changed, nothing to show
            raise PageRefused(403, SESSION_ENDED) from None
        except ServiceError as error:
            status = STATUS_BY_CODE.get(error.code, 400)
            self.show(req, resp, account, error=error.message, error_form="password", status=status)
            return
        self.set_cookie(req, resp, SESSION_COOKIE, renewed, max_age=int(accounts.SESSION_LIFETIME.total_seconds()))
        self.redirect(req, resp, "/account?done=password")


class SignOutEverywhere(AccountPage):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        account, _, _ = self.form_session(req)
        account_lifecycle.sign_out_everywhere(self.deps.store, self.deps.clock, account)
        resp.unset_cookie(SESSION_COOKIE, path="/")
        self.redirect(req, resp, "/login")


class AccountDeletion(AccountPage):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        account, session, form = self.form_session(req)
        try:
            account_lifecycle.delete_account(
                self.deps.store,
                self.deps.clock,
                account,
                session,
                structure_body({"password": form.get("password") or ""}, account_lifecycle.AccountDeletion),
                hasher=self.deps.password_hasher,
            )
        except ServiceError as error:
            status = STATUS_BY_CODE.get(error.code, 400)
            self.show(req, resp, account, error=error.message, error_form="delete", status=status)
            return
        resp.unset_cookie(SESSION_COOKIE, path="/")
        self.redirect(req, resp, "/signup" if self.deps.store.count_accounts() == 0 else "/login")
