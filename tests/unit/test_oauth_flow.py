"""OAuth for MCP connectors, in process: metadata, registration, the authorization request with PKCE, the
consent page, tokens, refresh rotation, and the grant as a connector key (listed, scoped, revocable)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import falcon.testing
import pytest

from adapters.settings import Settings
from adapters.wiring import app_for
from community_api import oauth_clients
from community_api.keys import hash_secret
from tests.unit.oauth_support import REDIRECT_URI, RESOURCE, Connector, Grant, accepted, pkce, redirect_query
from tests.unit.web_support import HOST, ORIGIN, WebBrowser, account_id, activity_rows, form, query_of
from tests.unit.world_support import PASSWORD, World


@pytest.fixture
def owner(world: World) -> WebBrowser:
    browser = WebBrowser(world)
    browser.sign_up()
    browser.link("alice")
    browser.link("bob")
    return browser


def test_protected_resource_and_authorization_server_metadata(world: World) -> None:
    for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/v1/mcp"):
        prm = world.client.simulate_get(path, headers={"Host": HOST})
        assert prm.status_code == 200 and prm.headers["access-control-allow-origin"] == "*"
        assert prm.json["resource"] == RESOURCE and prm.json["authorization_servers"] == [ORIGIN]
        assert "dms:write" in prm.json["scopes_supported"]
        assert prm.json["bearer_methods_supported"] == ["header"]  # never a query string (DESIGN §2)
    asm = world.client.simulate_get("/.well-known/oauth-authorization-server", headers={"Host": HOST}).json
    assert asm["issuer"] == ORIGIN
    assert asm["authorization_endpoint"] == f"{ORIGIN}/oauth/authorize"
    assert asm["token_endpoint"] == f"{ORIGIN}/oauth/token"
    assert asm["registration_endpoint"] == f"{ORIGIN}/oauth/register"
    assert asm["code_challenge_methods_supported"] == ["S256"]
    assert asm["token_endpoint_auth_methods_supported"] == ["none"]
    assert asm["authorization_response_iss_parameter_supported"] is True
    assert asm["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert asm["response_types_supported"] == ["code"]
    preflight = world.client.simulate_options("/oauth/token", headers={"Host": HOST, "Origin": "https://app.example"})
    assert preflight.status_code == 204 and "POST" in preflight.headers["access-control-allow-methods"]
    # A browser-based client sends its token request with these headers; the answer may be kept 10 minutes.
    allowed = {name.strip().lower() for name in preflight.headers["access-control-allow-headers"].split(",")}
    assert {"content-type", "authorization", "mcp-protocol-version"} <= allowed
    assert preflight.headers["access-control-max-age"] == "600"


def test_metadata_names_the_public_url_when_one_is_set(world: World) -> None:
    settings = Settings(mode="test", usage_flush_seconds=0, public_url="https://api.example")
    prm = (
        falcon.testing.TestClient(app_for(world.deps, settings))
        .simulate_get("/.well-known/oauth-protected-resource")
        .json
    )
    assert prm == {**prm, "resource": "https://api.example/v1/mcp", "authorization_servers": ["https://api.example"]}


def test_registration_answers_a_public_client(world: World) -> None:
    connector = Connector(world)
    result = connector.register(token_endpoint_auth_method="client_secret_post", software_id="x", logo_uri="")
    assert result.status_code == 201
    body = result.json
    assert body["client_id"].startswith("ocl_") and "client_secret" not in body
    assert body["token_endpoint_auth_method"] == "none"  # RFC 7591 §3.2.1: the server may substitute
    assert body["redirect_uris"] == [REDIRECT_URI] and body["client_name"] == "Test Agent"
    assert body["grant_types"] == ["authorization_code", "refresh_token"]
    assert body["client_id_issued_at"] == int(world.clock.now().timestamp())  # RFC 7591 §3.2.1: when, in seconds


@pytest.mark.parametrize(
    "uris",
    [
        [],
        ["http://app.example/cb"],  # plain http only on loopback
        ["http://0.0.0.0:33418/cb"],  # every address of the machine, not its loopback
        ["http://10.0.0.7/cb"],
        ["http://127.0.0.1.app.example/cb"],
        ["https://app.example/cb#frag"],
        ["javascript:alert(1)"],
        ["data:text/html,hi"],
        ["/relative"],
        ["https://app.example;script-src */cb"],  # would end a CSP source
        ["https://user@app.example/cb"],
        ["https://app.example/c b"],
        "https://app.example/cb",
        # Schemes a browser hands to another program or shows as source: it never returns to them.
        ["mailto:agent@example.com"],
        ["view-source:https://app.example/cb"],
        ["tel:+15555550100"],
        ["sms:+15555550100"],
        ["intent://cb#Intent;scheme=app;end"],
        ["webcal://app.example/cb"],
        ["chrome-extension://abcdef/cb"],
        ["file:///home/me/callback.html"],  # read locally
        ["blob:https://app.example/0b9c6d2e-1f4a-4c8e-9d3b-7a6f5e4d3c2b"],
        ["https://app.example/c\u202eb"],  # printable to no one: a bidirectional override
        ["https://app.example/cb\u200b"],
        [""],
        ["https://app.example/" + "a" * 2000],  # over 2,000 characters
        ["com.example.app:"],  # a private-use scheme with nowhere to go
        # Brackets that hold no IPv6 address: urlsplit raises on them, which answered 500.
        ["https://[app.example]/cb"],
        ["http://[::1/cb"],
        ["com.example.app://[x]/cb"],
        # Ports no browser goes to: registered before.
        ["https://app.example:99999/cb"],
        ["http://127.0.0.1:65536/cb"],
        ["https://app.example:0/cb"],
        # A fragment, even an empty one (RFC 6749 §3.1.2: no fragment component; urlsplit reads "" here).
        ["https://app.example/cb#frag"],
        ["https://app.example/cb#"],
    ],
)
def test_registration_refuses_unsafe_redirect_uris(world: World, uris: object) -> None:
    result = Connector(world).register(redirect_uris=uris)
    assert result.status_code == 400 and result.json["error"] == "invalid_redirect_uri"
    assert result.json["error_description"]


@pytest.mark.parametrize(
    ("body", "error", "description"),
    [
        ({"client_name": "A"}, "invalid_redirect_uri", "redirect_uris is required"),
        ({"redirect_uris": None}, "invalid_redirect_uri", "redirect_uris is required"),
        ({"redirect_uris": [5]}, "invalid_redirect_uri", "redirect_uris must be a list of strings"),
        ({"redirect_uris": ["https://a.example/cb"] * 11}, "invalid_redirect_uri", "redirect_uris must list 1 to 10"),
        (
            {"redirect_uris": [REDIRECT_URI], "client_name": 5},
            "invalid_client_metadata",
            "client_name must be a string",
        ),
        (
            {"redirect_uris": [REDIRECT_URI], "grant_types": "authorization_code"},
            "invalid_client_metadata",
            "grant_types must be",
        ),
        (
            {"redirect_uris": [REDIRECT_URI], "grant_types": ["implicit"]},
            "invalid_client_metadata",
            "grant_types must include authorization_code",
        ),
        (
            {"redirect_uris": [REDIRECT_URI], "response_types": ["token"]},
            "invalid_client_metadata",
            "response_types must include code",
        ),
        ([REDIRECT_URI], "invalid_client_metadata", "the request body must be a JSON object"),
    ],
)
def test_registration_refuses_bad_metadata_in_rfc_7591_terms(
    world: World, body: object, error: str, description: str
) -> None:
    result = world.client.simulate_post("/oauth/register", json=body, headers={"Host": HOST})
    assert result.status_code == 400
    assert result.json["error"] == error and result.json["error_description"].startswith(description)


def test_registration_reads_what_it_knows_and_ignores_the_rest(world: World) -> None:
    """RFC 7591 §2: unknown metadata is ignored; a null is a value not given; the name is shown folded."""
    body: dict[str, Any] = {
        "redirect_uris": [REDIRECT_URI, REDIRECT_URI],
        "client_name": None,
        "grant_types": ["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"],
        "scope": "groups:read",
        "jwks": {"keys": []},
    }
    answer = world.client.simulate_post("/oauth/register", json=body, headers={"Host": HOST}).json
    assert answer["client_name"] == "MCP client" and answer["redirect_uris"] == [REDIRECT_URI]
    spaced = Connector(world).register(client_name="  Test    Agent  ").json
    assert spaced["client_name"] == "Test Agent"


def test_registration_takes_a_uri_of_2000_characters_and_shows_a_name_of_100(world: World) -> None:
    longest = "https://app.example/" + "p" * (2000 - len("https://app.example/"))
    assert Connector(world).register(redirect_uris=[longest]).status_code == 201
    refused = Connector(world).register(redirect_uris=[longest + "p"])
    assert refused.status_code == 400 and refused.json["error"] == "invalid_redirect_uri"
    named = Connector(world).register(client_name="N" * 150).json
    assert named["client_name"] == "N" * 100  # what the consent page shows: the first 100 characters


def test_registration_accepts_loopback_https_and_native_app_uris(world: World) -> None:
    uris = ["http://localhost:5000/cb", "http://[::1]:5/cb", "https://app.example/cb?x=1", "cursor://anysphere/cb"]
    assert Connector(world).register(redirect_uris=uris).json["redirect_uris"] == uris


@pytest.mark.parametrize(
    ("uri", "source"),
    [("com.example.app:/oauth/cb", "com.example.app:"), ("http://127.0.0.1:4321/cb?x=1", "http://127.0.0.1:4321")],
)
def test_the_consent_page_lets_its_form_lead_to_the_clients_redirect(
    world: World, owner: WebBrowser, uri: str, source: str
) -> None:
    """Chromium applies form-action to the redirect that follows the consent form's POST: the page allows
    the client's origin, or its scheme for a native app, and nothing else."""
    connector = Connector(world, redirect_uri=uri)
    assert connector.register().status_code == 201
    _, challenge = pkce()
    page = owner.get(connector.authorize_path(challenge))
    assert page.status_code == 200
    assert f"form-action 'self' {source};" in page.headers["content-security-policy"]
    done = owner.submit(page, "/oauth/authorize", button=("decision", "approve"))
    assert done.status_code == 303
    location = done.headers["location"]
    assert location.startswith(uri + ("&" if "?" in uri else "?"))  # the URI's own query kept
    assert query_of(location)["code"].startswith("cdc_")


def test_registration_is_throttled_per_address(world: World) -> None:
    for _ in range(20):
        assert Connector(world).register().status_code == 201
    limited = Connector(world).register()
    assert limited.status_code == 429 and int(limited.headers["retry-after"]) > 0
    world.clock.advance(hours=1, seconds=1)
    assert Connector(world).register().status_code == 201


def test_registration_counts_an_ipv6_client_by_its_64(world: World) -> None:
    """One subscriber holds a whole /64: a new address in it per registration must not pass the bound, as
    sign-in counts it (``sign_in_guard.client_key``)."""

    def register(address: str) -> int:
        body = {"client_name": "Test Agent", "redirect_uris": [REDIRECT_URI]}
        answer = world.client.simulate_post("/oauth/register", json=body, headers={"Host": HOST}, remote_addr=address)
        return answer.status_code

    assert [register(f"2001:db8:1:2::{n:x}") for n in range(1, 21)] == [201] * 20
    assert register("2001:db8:1:2:ffff::1") == 429  # the same /64
    assert register("2001:db8:1:3::1") == 201  # the next /64: another subscriber


def test_the_whole_flow_signs_in_asks_consent_and_issues_tokens(
    world: World, owner: WebBrowser, connector: Connector
) -> None:
    owner.cookies.pop("cda_session")  # signed out: the authorization request goes through sign-in
    verifier, challenge = pkce()
    asked = owner.get(connector.authorize_path(challenge, state="xyz"))
    assert asked.status_code == 303 and asked.headers["location"].startswith("/login?next=%2Foauth%2Fauthorize%3F")
    signed_in = owner.submit(owner.follow(asked), "/login", {"email": "owner@example.com", "password": PASSWORD})
    consent = owner.follow(signed_in)
    assert consent.status_code == 200 and "Connect Test Agent?" in consent.text
    assert f"form-action 'self' {REDIRECT_URI.rsplit('/', 1)[0]}" in consent.headers["content-security-policy"]
    ticked = [f.value for f in form(consent.text, "/oauth/authorize").fields if f.name == "granted_scope" and f.checked]
    assert ticked == ["groups:read", "posts:read"]  # what the client asked for
    assert "Acts as the account." in consent.text
    bob = next(c for c in world.store.list_connections(account_id(world)) if c.handle == "bob")
    approved = owner.submit(
        consent,
        "/oauth/authorize",
        {"granted_scope": ["groups:read", "posts:read", "posts:write"], "connection_id": bob.id},
        button=("decision", "approve"),
    )
    assert approved.status_code == 303
    location = approved.headers["location"]
    assert location.startswith(REDIRECT_URI + "?")
    answer = query_of(location)
    assert answer["state"] == "xyz" and answer["iss"] == ORIGIN and answer["code"].startswith("cdc_")

    tokens = connector.redeem(Grant(answer["code"], verifier, "xyz"))
    assert tokens.status_code == 200, tokens.text
    body = tokens.json
    assert body["token_type"] == "Bearer" and body["expires_in"] == 3600
    assert body["access_token"].startswith("cdo_") and body["refresh_token"].startswith("cdr_")
    assert body["scope"] == "groups:read posts:read posts:write"  # what the person chose
    assert tokens.headers["cache-control"] == "no-store" and tokens.headers["pragma"] == "no-cache"

    me = world.client.simulate_get("/v1/me", headers=owner.headers()).json
    connector_keys = [k for k in me["keys"] if k["kind"] == "connector"]
    assert len(connector_keys) == 1
    grant = connector_keys[0]
    assert grant["name"] == "Test Agent" and grant["connectionId"] == bob.id
    assert grant["scopes"] == ["groups:read", "posts:read", "posts:write"]
    keys_page = owner.get("/keys")
    assert "OAuth connector" in keys_page.text and f"/keys/{grant['id']}/rotate" not in keys_page.text
    assert accepted(world, body["access_token"])
    assert world.store.get_key(grant["id"]).kind == "connector"  # type: ignore[union-attr]


def test_refresh_rotates_both_tokens(world: World, owner: WebBrowser, connector: Connector) -> None:
    first = connector.redeem(connector.approve(owner)).json
    world.clock.advance(minutes=59)
    second = connector.refresh(first["refresh_token"])
    assert second.status_code == 200, second.text
    renewed = second.json
    assert renewed["refresh_token"] != first["refresh_token"] and renewed["access_token"] != first["access_token"]
    assert renewed["scope"] == first["scope"] == "groups:read posts:read"
    assert accepted(world, renewed["access_token"]) and accepted(world, first["access_token"])
    world.clock.advance(minutes=2)
    assert not accepted(world, first["access_token"])  # an access token lives one hour
    assert accepted(world, renewed["access_token"])
    third = connector.refresh(renewed["refresh_token"], scope="groups:read")  # narrower: allowed
    assert third.status_code == 200 and third.json["scope"] == "groups:read posts:read"


@pytest.mark.parametrize("port", ["50123", "1", "65535", None])
def test_a_loopback_redirect_uri_may_come_back_on_another_port(
    world: World, owner: WebBrowser, connector: Connector, port: str | None
) -> None:
    """RFC 8252 §7.3 (and RFC 9700 §4.1.3): a native client listens on whatever port the system gives it,
    so for a loopback redirect URI any port is accepted at request time; the rest must match exactly, and
    the token request repeats the URI the authorization request used."""
    asked = "http://127.0.0.1" + (f":{port}" if port else "") + "/callback"
    moved = Connector(world, client_id=connector.client_id, redirect_uri=asked)
    grant = moved.approve(owner)  # redirected to ``asked`` (checked by approve)
    assert connector.redeem(grant).json["error"] == "invalid_grant"  # the registered port: not the one used
    second = moved.approve(owner)
    tokens = moved.redeem(second)
    assert tokens.status_code == 200, tokens.text
    assert accepted(world, tokens.json["access_token"])


@pytest.mark.parametrize(
    ("registered", "asked"),
    [
        ("http://[::1]:5/cb", "http://[::1]:6000/cb"),
        ("http://[::1]/cb", "http://[::1]:6000/cb"),
        ("http://localhost:5000/cb", "http://localhost/cb"),
        ("http://127.0.0.1/cb?x=1", "http://127.0.0.1:9/cb?x=1"),
    ],
)
def test_every_loopback_form_takes_another_port(world: World, registered: str, asked: str) -> None:
    connector = Connector(world, redirect_uri=registered)
    assert connector.register().status_code == 201
    client, uri = oauth_clients.check_client_redirect(world.store, connector.client_id, asked)
    assert client.id == connector.client_id and uri == asked


def test_a_client_with_one_redirect_uri_may_leave_it_out_of_both_requests(
    world: World, owner: WebBrowser, connector: Connector
) -> None:
    """OAuth 2.1 §4.1.1: redirect_uri is optional when the client registered only one; §4.1.3: then the
    token request may leave it out too, and if it sends one it must be that one. A code asked for with
    an explicit redirect_uri still needs it repeated at the token endpoint."""
    implicit = connector.approve(owner, redirect_uri=None)
    tokens = connector.redeem(implicit, redirect_uri=None)
    assert tokens.status_code == 200, tokens.text
    assert accepted(world, tokens.json["access_token"])
    assert connector.redeem(connector.approve(owner, redirect_uri=None)).status_code == 200  # sent anyway: same one
    wrong = connector.redeem(connector.approve(owner, redirect_uri=None), redirect_uri=REDIRECT_URI + "x")
    assert wrong.status_code == 400 and wrong.json["error"] == "invalid_grant"
    explicit = connector.redeem(connector.approve(owner), redirect_uri=None)
    assert explicit.status_code == 400 and explicit.json["error"] == "invalid_grant"
    assert "redirect_uri" in explicit.json["error_description"]


def test_deny_answers_access_denied_with_the_state(world: World, owner: WebBrowser, connector: Connector) -> None:
    _, challenge = pkce()
    page = owner.get(connector.authorize_path(challenge, state="s-9"))
    denied = owner.submit(page, "/oauth/authorize", button=("decision", "deny"))
    assert redirect_query(denied) == {
        "error": "access_denied",
        "error_description": "the person declined to connect this application",
        "state": "s-9",
        "iss": ORIGIN,
    }
    assert [k for k in world.store.list_keys(account_id(world)) if k.kind == "connector"] == []


@pytest.mark.parametrize("redirect_uri", ["http://127.0.0.1:33418/callback/é", "https://app.example/cb?from=bücher"])
def test_a_redirect_uri_holding_a_character_outside_ascii_gets_its_answer_encoded_once(
    world: World, owner: WebBrowser, redirect_uri: str
) -> None:
    """Falcon encodes a Location that holds a character outside ASCII whole, its escapes too: such a
    client got ``iss=http%253A…`` and its state and error text encoded twice, and its check of ``iss``
    (RFC 9207) or of ``state`` failed."""
    connector = Connector(world)
    connector.redirect_uri = redirect_uri
    assert connector.register().status_code == 201
    _, challenge = pkce()
    page = owner.get(connector.authorize_path(challenge, state="s 9/%+&"))
    denied = owner.submit(page, "/oauth/authorize", button=("decision", "deny"))
    location = denied.headers["location"]
    assert location.isascii() and location.startswith(quote(redirect_uri, safe=":/?=&"))
    assert query_of(location) | {"from": None} == {
        "error": "access_denied",
        "error_description": "the person declined to connect this application",
        "state": "s 9/%+&",
        "iss": ORIGIN,
        "from": None,
    }
    verifier, challenge = pkce()
    page = owner.get(connector.authorize_path(challenge, state="s 9/%+&"))
    approved = owner.submit(page, "/oauth/authorize", button=("decision", "approve"))
    answer = query_of(approved.headers["location"])
    assert answer["state"] == "s 9/%+&" and answer["iss"] == ORIGIN
    tokens = connector.redeem(Grant(answer["code"], verifier, answer["state"]), redirect_uri=redirect_uri)
    assert tokens.status_code == 200, tokens.text


def test_consent_needs_a_scope_and_an_own_connection(world: World, owner: WebBrowser, connector: Connector) -> None:
    _, challenge = pkce()
    page = owner.get(connector.authorize_path(challenge))
    none = owner.submit(page, "/oauth/authorize", {"granted_scope": None}, button=("decision", "approve"))
    assert none.status_code == 400 and "at least one scope" in none.text
    other = owner.submit(
        page, "/oauth/authorize", {"connection_id": "con_someone_else"}, button=("decision", "approve")
    )
    assert other.status_code == 404


@pytest.mark.parametrize("button", [None, ("decision", "maybe"), ("decision", "Approve")], ids=str)
def test_only_the_approve_button_approves(
    world: World, owner: WebBrowser, connector: Connector, button: tuple[str, str] | None
) -> None:
    """A consent form sent without the approve button's own value (a script, a form changed in the page)
    connects nothing: it is declined."""
    _, challenge = pkce()
    page = owner.get(connector.authorize_path(challenge, state="s-2"))
    answer = owner.submit(page, "/oauth/authorize", button=button)
    assert redirect_query(answer)["error"] == "access_denied" and "code" not in redirect_query(answer)
    assert [k for k in world.store.list_keys(account_id(world)) if k.kind == "connector"] == []


def test_a_refused_approval_shows_the_form_again_as_the_person_left_it(owner: WebBrowser, connector: Connector) -> None:
    _, challenge = pkce()
    page = owner.get(connector.authorize_path(challenge))
    fill = {"granted_scope": ["groups:read"], "connection_id": "con_someone_else"}
    refused = owner.submit(page, "/oauth/authorize", fill, button=("decision", "approve"))
    assert refused.status_code == 404
    ticked = [value for name, value in form(refused.text, "/oauth/authorize").defaults() if name == "granted_scope"]
    assert ticked == ["groups:read"]  # posts:read, asked for, stays unticked as the person left it


def test_a_request_without_state_is_answered_without_one(owner: WebBrowser, connector: Connector) -> None:
    """``state`` goes back exactly when the client sent it (RFC 6749 §4.1.2): never an empty one."""
    _, challenge = pkce()
    page = owner.get(connector.authorize_path(challenge, state=None))
    approved = owner.submit(page, "/oauth/authorize", button=("decision", "approve"))
    assert "code" in redirect_query(approved) and "state=" not in approved.headers["location"]
    page = owner.get(connector.authorize_path(challenge, state=None))
    declined = owner.submit(page, "/oauth/authorize", button=("decision", "deny"))
    assert redirect_query(declined)["error"] == "access_denied" and "state=" not in declined.headers["location"]


def test_a_consent_form_with_a_parameter_given_twice_is_refused_on_a_page(
    owner: WebBrowser, connector: Connector
) -> None:
    _, challenge = pkce()
    page = owner.get(connector.authorize_path(challenge))
    twice = owner.submit(page, "/oauth/authorize", {"state": ["st-1", "st-2"]}, button=("decision", "approve"))
    assert twice.status_code == 400 and twice.headers["content-type"].startswith("text/html")
    assert "state may be given once" in twice.text


def test_revoking_the_connector_key_ends_its_tokens_at_once(
    world: World, owner: WebBrowser, connector: Connector
) -> None:
    tokens = connector.redeem(connector.approve(owner)).json
    grant = next(k for k in world.store.list_keys(account_id(world)) if k.kind == "connector")
    headers = owner.headers({"X-CSRF-Token": owner.csrf()})
    revoked = world.client.simulate_delete(f"/v1/keys/{grant.id}", headers=headers)
    assert revoked.status_code == 204
    assert not accepted(world, tokens["access_token"])
    for value in tokens["access_token"], tokens["refresh_token"]:
        assert world.store.get_oauth_token(hash_secret(value)) is None  # dropped, not merely refused
    refused = connector.refresh(tokens["refresh_token"])
    assert refused.status_code == 400 and refused.json["error"] == "invalid_grant"


def test_revoking_from_the_dashboard_says_it_disconnects_the_client(
    world: World, owner: WebBrowser, connector: Connector
) -> None:
    tokens = connector.redeem(connector.approve(owner)).json
    grant = next(k for k in world.store.list_keys(account_id(world)) if k.kind == "connector")
    confirm = owner.get(f"/keys/{grant.id}/revoke")
    assert "disconnects that" in confirm.text
    assert owner.submit(confirm, f"/keys/{grant.id}/revoke").status_code == 303
    assert not accepted(world, tokens["access_token"])
    assert connector.refresh(tokens["refresh_token"]).json["error"] == "invalid_grant"


def test_a_connector_key_cannot_be_rotated(world: World, owner: WebBrowser, connector: Connector) -> None:
    connector.redeem(connector.approve(owner))
    grant = next(k for k in world.store.list_keys(account_id(world)) if k.kind == "connector")
    assert f'href="/keys/{grant.id}/rotate"' not in owner.get("/keys").text  # not offered
    page = owner.get(f"/keys/{grant.id}/rotate")
    assert page.status_code == 409 and "A connector key cannot be rotated" in page.text
    assert f'action="/keys/{grant.id}/rotate"' not in page.text
    refused = owner.post(f"/keys/{grant.id}/rotate", [("csrf_token", owner.csrf()), ("grace", "24h")])
    assert refused.status_code == 409 and "cannot be rotated" in refused.text
    assert [k.kind for k in world.store.list_keys(account_id(world))].count("connector") == 1  # nothing issued


def test_a_new_scope_needs_a_new_consent(world: World, owner: WebBrowser, connector: Connector) -> None:
    tokens = connector.redeem(connector.approve(owner)).json
    wider = connector.refresh(tokens["refresh_token"], scope="groups:read posts:write")
    assert wider.status_code == 400 and wider.json["error"] == "invalid_scope"
    assert "new consent" in wider.json["error_description"]
    again = connector.redeem(connector.approve(owner, scope="groups:read posts:write")).json
    assert again["scope"] == "groups:read posts:write"
    grants = [k for k in world.store.list_keys(account_id(world)) if k.kind == "connector"]
    assert [g.scopes for g in grants] == [("groups:read", "posts:read"), ("groups:read", "posts:write")]


def test_a_refresh_may_ask_for_offline_access_as_its_authorization_could(
    world: World, owner: WebBrowser, connector: Connector
) -> None:
    """Clients ask for ``offline_access`` to be given a refresh token, at the authorization and again at a
    refresh: it is no scope of ours, ignored at both, never "a new scope"."""
    tokens = connector.redeem(connector.approve(owner)).json
    renewed = connector.refresh(tokens["refresh_token"], scope="groups:read offline_access")
    assert renewed.status_code == 200, renewed.text
    assert renewed.json["scope"] == "groups:read posts:read"


def test_oauth_answers_match_their_documented_schemas(world: World, owner: WebBrowser) -> None:
    """What a connector reads from each OAuth route, success and refusal, validates against the OpenAPI
    document's schema for it; a success's schema requires exactly the fields the service sends (as the
    data API's do: a generated client's attributes are never optional), and none of these routes asks for
    a key."""
    import jsonschema

    document = world.client.simulate_get("/v1/openapi.json").json

    def check(method: str, path: str, answer: falcon.testing.Result) -> None:
        operation = document["paths"][path][method]
        assert operation["security"] == []
        responses = operation["responses"]
        described = responses.get(str(answer.status_code), responses["default"])
        schema = described["content"]["application/json"]["schema"]
        jsonschema.validate(answer.json, schema)
        if answer.status_code < 300:
            assert sorted(schema["required"]) == sorted(answer.json), path

    for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/v1/mcp"):
        check("get", path, world.client.simulate_get(path, headers={"Host": HOST}))
    server = "/.well-known/oauth-authorization-server"
    check("get", server, world.client.simulate_get(server, headers={"Host": HOST}))
    connector = Connector(world)
    registered = connector.register()
    assert registered.status_code == 201
    check("post", "/oauth/register", registered)
    refused = connector.register(redirect_uris=[])
    assert refused.status_code == 400
    check("post", "/oauth/register", refused)
    tokens = connector.redeem(connector.approve(owner))
    assert tokens.status_code == 200
    check("post", "/oauth/token", tokens)
    replayed = connector.token([("grant_type", "password")])
    assert replayed.status_code == 400
    check("post", "/oauth/token", replayed)
    # Each list of choices is what the service offers (its metadata) or issues.
    metadata = world.client.simulate_get(server, headers={"Host": HOST}).json

    def answered(method: str, path: str, status: str) -> Any:
        return document["paths"][path][method]["responses"][status]["content"]["application/json"]["schema"]

    registration = answered("post", "/oauth/register", "201")["properties"]
    assert registration["token_endpoint_auth_method"]["enum"] == metadata["token_endpoint_auth_methods_supported"]
    for path in (server, "/.well-known/oauth-protected-resource"):
        assert (
            answered("get", path, "200")["properties"]["scopes_supported"]["items"]["enum"]
            == metadata["scopes_supported"]
        )
    assert answered("post", "/oauth/token", "200")["properties"]["token_type"]["enum"] == [tokens.json["token_type"]]


def _request_schema(world: World, path: str, media: str) -> Any:
    import jsonschema

    document = world.client.simulate_get("/v1/openapi.json").json
    return jsonschema.Draft202012Validator(document["paths"][path]["post"]["requestBody"]["content"][media]["schema"])


_URIS = [REDIRECT_URI]


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"redirect_uris": [f"{REDIRECT_URI}/{n}" for n in range(11)]}, id="eleven redirect URIs"),
        pytest.param({"redirect_uris": [REDIRECT_URI + "/" + "a" * 2000]}, id="a redirect URI over 2000 characters"),
        pytest.param({"redirect_uris": _URIS, "client_name": "evil\u202eppA"}, id="a name with a bidi override"),
        pytest.param({"redirect_uris": _URIS, "client_name": "Agent\nApproved"}, id="a name with a newline"),
    ],
)
def test_a_registration_the_service_refuses_the_document_refuses(world: World, body: dict[str, Any]) -> None:
    """A connector that checks its request against the OpenAPI document learns of these before sending."""
    refused = world.client.simulate_post("/oauth/register", json=body, headers={"Host": HOST})
    assert refused.status_code == 400, refused.text
    assert not _request_schema(world, "/oauth/register", "application/json").is_valid(body)


@pytest.mark.parametrize(
    ("overrides", "status", "error"),
    [
        pytest.param({"code_verifier": "v" * 42}, 400, "invalid_grant", id="a PKCE verifier of 42 characters"),
        pytest.param({"client_id": ""}, 401, "invalid_client", id="an empty client id"),
        pytest.param({"client_id": None}, 401, "invalid_client", id="no client id"),
    ],
)
def test_a_code_exchange_the_service_refuses_the_document_refuses(
    world: World, owner: WebBrowser, overrides: dict[str, str | None], status: int, error: str
) -> None:
    connector = Connector(world)
    assert connector.register().status_code == 201
    grant = connector.approve(owner)
    fields = {
        "grant_type": "authorization_code",
        "code": grant.code,
        "redirect_uri": connector.redirect_uri,
        "client_id": connector.client_id,
        "code_verifier": grant.verifier,
        **overrides,
    }
    form_fields = {name: value for name, value in fields.items() if value is not None}
    refused = connector.token(list(form_fields.items()))
    assert (refused.status_code, refused.json["error"]) == (status, error), refused.text
    assert not _request_schema(world, "/oauth/token", "application/x-www-form-urlencoded").is_valid(form_fields)


def test_a_refresh_with_an_empty_token_is_refused_by_the_service_and_the_document(world: World) -> None:
    connector = Connector(world)
    assert connector.register().status_code == 201
    form_fields = {"grant_type": "refresh_token", "client_id": connector.client_id, "refresh_token": ""}
    refused = connector.token(list(form_fields.items()))
    assert refused.status_code == 400, refused.text
    assert not _request_schema(world, "/oauth/token", "application/x-www-form-urlencoded").is_valid(form_fields)


def test_registrations_nobody_approves_are_bounded_and_forgotten_after_a_day(
    world: World, owner: WebBrowser, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Strangers from many addresses, each under its own bound, registering clients nobody ever approves
    (up to 20 kB each): before, kept for good and without limit."""
    monkeypatch.setattr(oauth_clients, "MAX_UNAPPROVED_CLIENTS", 30)

    def register(address: str) -> falcon.testing.Result:
        body = {"client_name": "Flood", "redirect_uris": [REDIRECT_URI]}
        return world.client.simulate_post("/oauth/register", json=body, headers={"Host": HOST}, remote_addr=address)

    used = Connector(world)
    assert used.register().status_code == 201
    used.approve(owner)  # a person approved it: kept for good
    flood = [register(f"198.51.100.{n // 10}").status_code for n in range(40)]
    assert flood == [201] * 30 + [429] * 10
    refused = register("203.0.113.9")  # a newcomer is refused too, and told why
    assert refused.status_code == 429 and int(refused.headers["retry-after"]) > 0
    assert "waiting for a person's approval" in refused.json["error_description"]
    assert world.store.count_unapproved_oauth_clients() == 30

    world.clock.advance(days=1, seconds=1)
    assert register("203.0.113.9").status_code == 201  # the flood is forgotten
    assert world.store.count_unapproved_oauth_clients() == 1
    assert world.store.get_oauth_client(used.client_id) is not None  # the approved one is kept
    used.approve(owner)  # and still works


def test_the_owner_sees_the_connector_approved_connected_and_revoked(
    world: World, owner: WebBrowser, connector: Connector
) -> None:
    tokens = connector.redeem(connector.approve(owner)).json
    key = next(k for k in world.store.list_keys(account_id(world)) if k.kind == "connector")
    owner.submit(owner.get(f"/keys/{key.id}/revoke"), f"/keys/{key.id}/revoke")
    assert not accepted(world, tokens["access_token"])
    rows = [what for _, what in activity_rows(owner.get("/account").text)]
    assert rows[:3] == [
        "Connector “Test Agent” revoked",
        "Connector “Test Agent” connected",
        "Connector “Test Agent” approved",
    ], rows
