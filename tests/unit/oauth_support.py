"""An MCP client's side of OAuth, for the in-process tests: registration, PKCE, the authorization request,
the consent page approved in a ``WebBrowser``, and the token endpoint."""

from __future__ import annotations

import base64
import hashlib
import secrets
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlencode, urlsplit

import attrs
import falcon.testing
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from community_api.errors import Unauthorized
from community_api.oauth import authenticate_bearer
from tests.unit.web_support import HOST, ORIGIN, WebBrowser, query_of
from tests.unit.world_support import World

REDIRECT_URI = "http://127.0.0.1:33418/callback"
RESOURCE = f"{ORIGIN}/v1/mcp"


def pkce(verifier: str | None = None) -> tuple[str, str]:
    """A verifier (``verifier``, or a new one) and its S256 challenge."""
    verifier = verifier or secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


@attrs.define
class Grant:
    code: str
    verifier: str
    state: str


@attrs.define
class Connector:
    world: World
    client_id: str = ""
    redirect_uri: str = REDIRECT_URI

    def register(self, **metadata: Any) -> falcon.testing.Result:
        body = {"client_name": "Test Agent", "redirect_uris": [self.redirect_uri], **metadata}
        result = self.world.client.simulate_post("/oauth/register", json=body, headers={"Host": HOST})
        if result.status_code == 201:
            self.client_id = result.json["client_id"]
        return result

    def authorize_path(self, challenge: str, state: str | None = "st-1", **overrides: str | None) -> str:
        params: dict[str, str | None] = {
            "response_type": "code",
            "client_id": self.client_id,
            "redirect_uri": self.redirect_uri,
            "state": state,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "scope": "groups:read posts:read",
            "resource": RESOURCE,
            **overrides,
        }
        return "/oauth/authorize?" + urlencode({k: v for k, v in params.items() if v is not None})

    def approve(
        self,
        browser: WebBrowser,
        fill: dict[str, Any] | None = None,
        *,
        verifier: str | None = None,
        **overrides: str | None,
    ) -> Grant:
        """Ask for authorization, approve on the consent page, and read the code from the redirect. The PKCE
        verifier is ``verifier``, or a new one."""
        verifier, challenge = pkce(verifier)
        page = browser.get(self.authorize_path(challenge, **overrides))
        assert page.status_code == 200, page.text[:500]
        done = browser.submit(page, "/oauth/authorize", fill, button=("decision", "approve"))
        assert done.status_code == 303, done.text[:500]
        answer = query_of(done.headers["location"])
        assert done.headers["location"].startswith(self.redirect_uri + "?")
        return Grant(answer["code"], verifier, answer["state"])

    def token(
        self, pairs: Sequence[tuple[str, str]], content_type: str = "application/x-www-form-urlencoded"
    ) -> falcon.testing.Result:
        return self.world.client.simulate_post(
            "/oauth/token", headers={"Host": HOST, "Content-Type": content_type}, body=urlencode(list(pairs))
        )

    def redeem(
        self, grant: Grant, *, content_type: str = "application/x-www-form-urlencoded", **overrides: str | None
    ) -> falcon.testing.Result:
        fields: dict[str, str | None] = {
            "grant_type": "authorization_code",
            "code": grant.code,
            "redirect_uri": self.redirect_uri,
            "client_id": self.client_id,
            "code_verifier": grant.verifier,
            "resource": RESOURCE,
            **overrides,
        }
        return self.token([(k, v) for k, v in fields.items() if v is not None], content_type)

    def refresh(self, refresh_token: str, **overrides: str | None) -> falcon.testing.Result:
        fields: dict[str, str | None] = {
            "grant_type": "refresh_token",
            "refresh_token": refresh_token,
            "client_id": self.client_id,
            "resource": RESOURCE,
            **overrides,
        }
        return self.token([(k, v) for k, v in fields.items() if v is not None])


class MemoryStorage:
    """Token storage of the official MCP client's OAuth provider, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def redirect_query(result: falcon.testing.Result) -> dict[str, str]:
    assert result.status_code == 303, result.text[:500]
    location = result.headers["location"]
    assert urlsplit(location).netloc == urlsplit(REDIRECT_URI).netloc
    return query_of(location)


def accepted(world: World, token: str, resource: str = RESOURCE) -> bool:
    """Whether the service takes ``token`` as a Bearer credential for ``resource``."""
    try:
        authenticate_bearer(world.store, world.clock, token, resource, world.deps.refusals)
    except Unauthorized:
        return False
    return True
