"""Dashboard pages of a signed-in account: connections, keys (mint, rotate, revoke) and usage.

Thin, like the REST resources: read the form, call the one use case that ``management_resources.py``
calls for the same action (``connections``, ``keys``, ``me`` / ``dashboard``), render. A refusal of the
core is shown on the page it came from, with the HTTP status the JSON API would answer.
"""

from __future__ import annotations

from typing import Any

import falcon

from adapters.commands import structure_body
from adapters.http.errors import STATUS_BY_CODE
from adapters.web.pages import PageRefused, WebResource
from community_api import connections, dashboard, keys, me
from community_api.errors import NotFound, ServiceError
from community_api.model import KEY_CONNECTOR, Account, ApiKey
from community_api.scopes import ALL_SCOPES, DEFAULT_SCOPES, OPT_IN_SCOPES

# What each scope lets a client do, in the words the pages use. ``acts`` marks the opt-in scopes: they
# publish, delete or message as the account, or read its private inbox.
SCOPE_TEXT = {
    "groups:read": "Read the account's groups, their labels, and who the account is",
    "posts:read": "Read feeds and posts with their comments",
    "comments:read": "Read the comments of posts",
    "dms:read": "Read the private DM inbox and threads",
    "posts:write": "Publish and delete posts as the account",
    "comments:write": "Comment and delete comments as the account",
    "dms:write": "Send direct messages as the account",
}
SCOPE_CHOICES = tuple({"name": s, "text": SCOPE_TEXT[s], "acts": s in OPT_IN_SCOPES} for s in ALL_SCOPES)
NOTICES = {
    "linked": "The platform account is linked.",
    "activated": "The active connection has changed.",
    "removed": "The platform account is unlinked: its session is erased and the keys bound to it are revoked.",
    "revoked": "The key is revoked: it stopped working at once.",
}


def notice(req: falcon.Request) -> str | None:
    # Only fixed texts, chosen by a code: nothing from the URL is echoed into the page.
    return NOTICES.get(req.get_param("notice") or "")


def own_key(page: WebResource, account: Account, key_id: str) -> ApiKey:
    key = page.deps.store.get_key(key_id)
    if key is None or key.account_id != account.id:
        raise PageRefused(404, "There is no such key.")
    return key


def status_of(error: ServiceError) -> int:
    return STATUS_BY_CODE.get(error.code, 400)


class ConnectionsPage(WebResource):
    """``/connections``: the linked platform accounts, linking one, choosing the active one."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        found = self.page_session(req, resp)
        if found is not None:
            self._show(req, resp, found[0], notice=notice(req))

    def _show(self, req: falcon.Request, resp: falcon.Response, account: Account, **context: Any) -> None:
        linked = connections.list_connections(self.deps, account.id)
        now = self.deps.clock.now()
        ending = {c.id: connections.session_ending(c, now) for c in linked}
        self.render(
            req,
            resp,
            "connections.html",
            title="Connections",
            section="connections",
            connections=linked,
            ending=ending,
            **context,
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        account, _, form = self.form_session(req)
        body: dict[str, Any]
        if form.get("method") == "token":
            body = {"sessionToken": form.get("session_token") or ""}
        else:
            body = {"email": form.get("email") or "", "password": form.get("password") or ""}
        if form.get("active"):
            body["active"] = True
        try:
            link = structure_body(body, connections.LinkRequest)
            connections.link_connection(self.deps, account.id, link, self.client(req))
        except ServiceError as error:
            if error.code == "rate_limited":
                resp.set_header("Retry-After", str(error.details.get("retryAfter", 60)))
            self._show(req, resp, account, error=error.message, status=status_of(error))
            return
        self.redirect(req, resp, "/connections?notice=linked")


class ConnectionActivation(WebResource):
    """``POST /connections/{id}/activate``: make this connection the active one."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, connection_id: str) -> None:
        account, _, _ = self.form_session(req)
        try:
            connections.activate_connection(self.deps, account.id, connection_id)
        except ServiceError as error:
            raise PageRefused(status_of(error), error.message) from None
        self.redirect(req, resp, "/connections?notice=activated")


class ConnectionRemoval(WebResource):
    """``/connections/{id}/remove``: confirm (naming the keys that will stop), then unlink."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, connection_id: str) -> None:
        found = self.page_session(req, resp)
        if found is None:
            return
        try:
            connection = connections.own_connection(self.deps, found[0].id, connection_id)
        except ServiceError:
            raise PageRefused(404, "There is no such connection.") from None
        bound = connections.live_keys_bound_to(self.deps, found[0].id, connection_id)
        self.render(
            req,
            resp,
            "remove_connection.html",
            title=f"Unlink @{connection.handle}?",
            section="connections",
            connection=connection,
            bound=bound,
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response, connection_id: str) -> None:
        account, _, _ = self.form_session(req)
        try:
            connections.remove_connection(self.deps, account.id, connection_id)
        except NotFound:
            # Most often the same form sent a second time (another tab, the back button): already done.
            raise PageRefused(404, "There is no such connection: it may have been unlinked already.") from None
        except ServiceError as error:
            raise PageRefused(status_of(error), error.message) from None
        self.redirect(req, resp, "/connections?notice=removed")


class KeysPage(WebResource):
    """``/keys``: the account's keys (connector keys of OAuth grants too) and the form to mint one."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        found = self.page_session(req, resp)
        if found is not None:
            self._show(req, resp, found[0], notice=notice(req))

    def _show(self, req: falcon.Request, resp: falcon.Response, account: Account, **context: Any) -> None:
        summary = me.me(self.deps, account)
        now = self.deps.clock.now()
        rows: list[dict[str, Any]] = [
            {"item": i, "state": dashboard.key_state(i.key, now), "rotatable": keys.rotation_refusal(i.key) is None}
            for i in summary.keys
        ]
        current = [r for r in rows if r["state"].state in (dashboard.LIVE, dashboard.IN_GRACE)]
        ended = [r for r in rows if r not in current]
        self.render(
            req,
            resp,
            "keys.html",
            title="API keys",
            section="keys",
            current=current,
            ended=ended,
            connections=summary.connections,
            scopes=SCOPE_CHOICES,
            defaults=DEFAULT_SCOPES,
            connector=KEY_CONNECTOR,
            max_live_keys=keys.MAX_LIVE_KEYS,
            **context,
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        account, _, form = self.form_session(req)
        try:
            issued = keys.mint_key(
                self.deps.store,
                self.deps.clock,
                account_id=account.id,
                name=form.get("name"),
                scopes=form.getall("scope"),
                connection_id=form.get("connection_id") or None,
            )
        except ServiceError as error:
            self._show(req, resp, account, error=error.message, status=status_of(error))
            return
        # Rendered in this answer, never stored for a later page: the value is shown exactly once.
        self.render(
            req,
            resp,
            "key_created.html",
            status=201,
            title="Your new API key",
            section="keys",
            issued=issued,
            base=self.base(req),
            rotated=None,
            old_state=None,
        )


class KeyRotation(WebResource):
    """``/keys/{id}/rotate``: confirm, then issue a successor; the old key keeps a grace window."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, key_id: str) -> None:
        found = self.page_session(req, resp)
        if found is not None:
            self._confirm(req, resp, own_key(self, found[0], key_id))

    def _confirm(self, req: falcon.Request, resp: falcon.Response, key: ApiKey, **context: Any) -> None:
        """The confirmation form; for a key that cannot be rotated (revoked, rotated already: a stale tab
        or the back button), the reason instead, answered 409 as the rotation itself would be."""
        refusal = keys.rotation_refusal(key)
        if refusal is not None:
            context = {"status": 409}
        self.render(
            req, resp, "rotate.html", title=f"Rotate “{key.name}”", section="keys", key=key, refusal=refusal, **context
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response, key_id: str) -> None:
        account, _, form = self.form_session(req)
        own_key(self, account, key_id)  # another account's key is no key: 404 before anything is read
        try:
            rotation = keys.KeyRotation(grace=form.get("grace") or "24h")
            issued = keys.rotate_key(
                self.deps.store,
                self.deps.clock,
                account_id=account.id,
                key_id=key_id,
                grace=rotation.keeps_old_key,
            )
        except ServiceError as error:
            # Read again: another tab may have rotated or revoked it meanwhile, which is then the answer.
            self._confirm(req, resp, own_key(self, account, key_id), error=error.message, status=status_of(error))
            return
        old = own_key(self, account, key_id)
        self.render(
            req,
            resp,
            "key_created.html",
            status=201,
            title="Your rotated API key",
            section="keys",
            issued=issued,
            base=self.base(req),
            rotated=old,
            old_state=dashboard.key_state(old, self.deps.clock.now()),
        )


class KeyRevocation(WebResource):
    """``/keys/{id}/revoke``: confirm, then revoke at once (a connector key drops its OAuth tokens)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, key_id: str) -> None:
        found = self.page_session(req, resp)
        if found is not None:
            key = own_key(self, found[0], key_id)
            self.render(
                req,
                resp,
                "revoke.html",
                title=f"Revoke “{key.name}”?",
                section="keys",
                key=key,
                connector=KEY_CONNECTOR,
                # Revoked or ended already (a stale tab, the back button): said so, with no form to send.
                ended=dashboard.key_state(key, self.deps.clock.now()).state in (dashboard.REVOKED, dashboard.EXPIRED),
            )

    def on_post(self, req: falcon.Request, resp: falcon.Response, key_id: str) -> None:
        account, _, _ = self.form_session(req)
        try:
            keys.revoke_key(self.deps.store, self.deps.clock, account_id=account.id, key_id=key_id)
        except ServiceError as error:
            raise PageRefused(status_of(error), error.message) from None
        self.redirect(req, resp, "/keys?notice=revoked")


class UsagePage(WebResource):
    """``/usage``: requests per key today and this month, and each connection's DM quota."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        found = self.page_session(req, resp)
        if found is not None:
            report = dashboard.usage_report(self.deps, found[0])
            self.render(
                req,
                resp,
                "usage.html",
                title="Usage",
                section="usage",
                report=report,
                connector=KEY_CONNECTOR,
                now=self.deps.clock.now(),
            )
