"""Management routes: accounts, the web session, connections, keys and usage (web session, not keys)."""

from __future__ import annotations

from datetime import timedelta

import falcon

from adapters.commands import structure_body, structure_query
from adapters.http.auth import CONNECTION_HEADER, DEVICE_COOKIE, SESSION_COOKIE, device_cookie, web_session
from adapters.http.body import read_json, refuse_body
from adapters.http.client_address import Network, client_address
from adapters.http.operation_resources import query, refuse_idempotency_key, send_json
from adapters.wire import to_wire
from community_api import account_lifecycle, accounts, connections, keys, me
from community_api.deps import Deps
from community_api.errors import InvalidRequest
from community_api.sign_in_guard import DEVICE_COOKIE_LIFETIME


class ManagementResource:
    """A route of the web-session API (accounts, sessions, connections, keys, me)."""

    def __init__(
        self,
        deps: Deps,
        *,
        signup_enabled: bool = False,
        secure_cookies: bool = False,
        trusted_proxies: tuple[Network, ...] = (),
    ) -> None:
        self.deps = deps
        self.signup_enabled = signup_enabled
        self.secure_cookies = secure_cookies
        self.trusted_proxies = trusted_proxies

    def client(self, req: falcon.Request) -> str:
        return client_address(req, self.trusted_proxies)

    def _set_cookie(
        self, req: falcon.Request, resp: falcon.Response, name: str, value: str, lifetime: timedelta
    ) -> None:
        resp.set_cookie(
            name,
            value,
            max_age=int(lifetime.total_seconds()),
            path="/",
            http_only=True,
            secure=self.secure_cookies or req.scheme == "https",
            same_site="Lax",
        )


class AccountsResource(ManagementResource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.web_route = True
        query(req, ())
        refuse_idempotency_key(req)
        body, _ = read_json(req)
        account = accounts.create_account(
            self.deps.store,
            self.deps.clock,
            structure_body(body, accounts.NewAccount),
            signup_enabled=self.signup_enabled,
            client_address=self.client(req),
            hasher=self.deps.password_hasher,
        )
        send_json(resp, {"account": account}, status=201)


class SessionResource(ManagementResource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.web_route = True
        query(req, ())
        refuse_idempotency_key(req)
        body, _ = read_json(req)
        signed_in = accounts.sign_in(
            self.deps.store,
            self.deps.clock,
            structure_body(body, accounts.Credentials),
            self.client(req),
            device_cookies=self.deps.device_cookies,
            device_cookie=device_cookie(req),
            hasher=self.deps.password_hasher,
        )
        self._set_cookie(req, resp, SESSION_COOKIE, signed_in.cookie_value, accounts.SESSION_LIFETIME)
        self._set_cookie(req, resp, DEVICE_COOKIE, signed_in.device_cookie, DEVICE_COOKIE_LIFETIME)
        send_json(resp, {"account": signed_in.account, "csrfToken": signed_in.session.csrf_token})

    def on_delete(self, req: falcon.Request, resp: falcon.Response) -> None:
        web_session(self.deps, req)
        query(req, ())
        refuse_body(req)
        cookie = (req.get_cookie_values(SESSION_COOKIE) or [""])[0]
        accounts.sign_out(self.deps.store, cookie)
        resp.unset_cookie(SESSION_COOKIE, path="/")
        resp.status = falcon.HTTP_204


class ConnectionsResource(ManagementResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        account, _ = web_session(self.deps, req)
        query(req, ())
        refuse_body(req)
        send_json(resp, {"connections": connections.list_connections(self.deps, account.id)})

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        account, _ = web_session(self.deps, req)
        query(req, ())
        refuse_idempotency_key(req)
        body, _ = read_json(req)
        link = structure_body(body, connections.LinkRequest)
        send_json(resp, connections.link_connection(self.deps, account.id, link, self.client(req)), status=201)


class ConnectionResource(ManagementResource):
    def on_delete(self, req: falcon.Request, resp: falcon.Response, connection_id: str) -> None:
        """Unlink: the platform session erased, the keys bound to the connection revoked."""
        account, _ = web_session(self.deps, req)
        query(req, ())
        refuse_body(req)
        connections.remove_connection(self.deps, account.id, connection_id)
        resp.status = falcon.HTTP_204


class ConnectionActivationResource(ManagementResource):
    def on_post(self, req: falcon.Request, resp: falcon.Response, connection_id: str) -> None:
        """Make the connection the active one: what the account's unbound keys act as when a request names
        none (``X-Community-Connection``). The dashboard's Connections page does the same."""
        account, _ = web_session(self.deps, req)
        query(req, ())
        refuse_idempotency_key(req)
        refuse_body(req)
        send_json(resp, connections.activate_connection(self.deps, account.id, connection_id))


class KeysResource(ManagementResource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        account, _ = web_session(self.deps, req)
        query(req, ())
        refuse_idempotency_key(req)
        if req.get_header(CONNECTION_HEADER) is not None:
            # A client used to sending it with its keys' requests would get a key that is not bound, acting
            # as whichever connection is active when a request names none.
            raise InvalidRequest(
                f"{CONNECTION_HEADER} is for requests made with a key: to bind the new key to a connection, "
                "send connectionId in the body"
            )
        body, _ = read_json(req, allow_empty=True)
        new = structure_body(body, keys.NewKey)
        issued = keys.mint_key(
            self.deps.store,
            self.deps.clock,
            account_id=account.id,
            name=new.name,
            scopes=new.scopes,
            connection_id=new.connection_id,
        )
        send_json(resp, {**to_wire(issued.key), "secret": issued.secret}, status=201)


class KeyRotationResource(ManagementResource):
    def on_post(self, req: falcon.Request, resp: falcon.Response, key_id: str) -> None:
        account, _ = web_session(self.deps, req)
        rotation = structure_query(query(req, ("grace",)), keys.KeyRotation, text=True)
        refuse_idempotency_key(req)
        refuse_body(req, ("grace",))
        issued = keys.rotate_key(
            self.deps.store, self.deps.clock, account_id=account.id, key_id=key_id, grace=rotation.keeps_old_key
        )
        send_json(resp, {**to_wire(issued.key), "secret": issued.secret}, status=201)


class KeyResource(ManagementResource):
    def on_delete(self, req: falcon.Request, resp: falcon.Response, key_id: str) -> None:
        account, _ = web_session(self.deps, req)
        query(req, ())
        refuse_body(req)
        keys.revoke_key(self.deps.store, self.deps.clock, account_id=account.id, key_id=key_id)
        resp.status = falcon.HTTP_204


class MeResource(ManagementResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        account, _ = web_session(self.deps, req)
        query(req, ())
        refuse_body(req)
        send_json(resp, me.me(self.deps, account))

    def on_delete(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Delete the account (its password in the body): keys and grants revoked, connections erased."""
        account, session = web_session(self.deps, req)
        query(req, ())
        body, _ = read_json(req)
        deletion = structure_body(body, account_lifecycle.AccountDeletion)
        account_lifecycle.delete_account(
            self.deps.store, self.deps.clock, account, session, deletion, hasher=self.deps.password_hasher
        )
        resp.unset_cookie(SESSION_COOKIE, path="/")
        resp.status = falcon.HTTP_204


class PasswordResource(ManagementResource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Change the password; every other web session of the account ends."""
        account, session = web_session(self.deps, req)
        query(req, ())
        refuse_idempotency_key(req)
        body, _ = read_json(req)
        change = structure_body(body, account_lifecycle.PasswordChange)
        renewed = account_lifecycle.change_password(
            self.deps.store, self.deps.clock, account, session, change, hasher=self.deps.password_hasher
        )
        self._set_cookie(req, resp, SESSION_COOKIE, renewed, accounts.SESSION_LIFETIME)
        resp.status = falcon.HTTP_204


class SessionsResource(ManagementResource):
    def on_delete(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Sign out everywhere: every web session of the account ends, this one included."""
        account, _ = web_session(self.deps, req)
        query(req, ())
        refuse_body(req)
        account_lifecycle.sign_out_everywhere(self.deps.store, self.deps.clock, account)
        resp.unset_cookie(SESSION_COOKIE, path="/")
        resp.status = falcon.HTTP_204
