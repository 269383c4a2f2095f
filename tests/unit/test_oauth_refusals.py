"""What OAuth for MCP connectors refuses, each on its own: a wrong verifier, a reused code, a mismatched
redirect URI, a replayed refresh token (which revokes the grant), a token for another resource, plain
PKCE, and the rest of the malformed requests a client or an attacker may send."""

from __future__ import annotations

import pytest

from community_api import keys
from community_api.model import ApiKey
from tests.unit.oauth_support import REDIRECT_URI, Connector, accepted, pkce, redirect_query
from tests.unit.web_support import HOST, ORIGIN, WebBrowser, account_id, activity_rows
from tests.unit.world_support import World

OTHER_RESOURCE = "https://other.example/v1/mcp"


@pytest.fixture
def owner(world: World) -> WebBrowser:
    browser = WebBrowser(world)
    browser.sign_up()
    browser.link("alice")
    return browser


def oauth_error(result: object, error: str, status: int = 400) -> None:
    assert result.status_code == status, result.text  # type: ignore[attr-defined]
    assert result.json["error"] == error and result.json["error_description"]  # type: ignore[attr-defined]


def grants(world: World) -> list[ApiKey]:
    return [k for k in world.store.list_keys(account_id(world)) if k.kind == "connector"]


# --- at the token endpoint --------------------------------------------------------------------------


def test_a_wrong_verifier_is_refused_and_spends_the_code(owner: WebBrowser, connector: Connector, world: World) -> None:
    grant = connector.approve(owner)
    wrong, _ = pkce()
    refused = connector.redeem(grant, code_verifier=wrong)
    oauth_error(refused, "invalid_grant")
    assert refused.json["error_description"] == "code_verifier does not match the code_challenge"
    oauth_error(connector.redeem(grant), "invalid_grant")  # a code serves one request, good or bad
    assert grants(world) == []


@pytest.mark.parametrize(
    ("verifier", "good"),
    [
        ("a" * 43, True),
        ("a" * 128, True),
        ("-._~" + "A0z" * 13, True),  # RFC 7636 §4.1: unreserved characters, 43 to 128 of them
        ("a" * 42, False),
        ("a" * 129, False),
        ("a" * 42 + "+", False),
        ("a" * 42 + "/", False),
    ],
    ids=["43", "128", "unreserved", "42", "129", "plus", "slash"],
)
def test_a_verifier_is_43_to_128_unreserved_characters_even_when_its_challenge_matches(
    owner: WebBrowser, connector: Connector, world: World, verifier: str, good: bool
) -> None:
    answer = connector.redeem(connector.approve(owner, verifier=verifier))
    if good:
        assert answer.status_code == 200, answer.text
        return
    oauth_error(answer, "invalid_grant")
    assert answer.json["error_description"].startswith("code_verifier must be 43 to 128 characters")
    assert grants(world) == []


def test_a_code_whose_connection_was_removed_since_the_consent_grants_nothing(
    owner: WebBrowser, connector: Connector, world: World
) -> None:
    """The person approves for alice, then unlinks alice before the client redeems the code: the code
    must not become a grant (on another connection, or on none)."""
    alice = world.store.list_connections(account_id(world))[0]
    grant = connector.approve(owner, {"connection_id": alice.id})  # "Always @alice"
    removed = world.client.simulate_delete(
        f"/v1/connections/{alice.id}", headers=owner.headers({"X-CSRF-Token": owner.csrf()})
    )
    assert removed.status_code == 204
    refused = connector.redeem(grant)
    oauth_error(refused, "invalid_grant")
    assert "no longer exists" in refused.json["error_description"]
    assert grants(world) == []
    oauth_error(connector.redeem(grant), "invalid_grant")  # spent all the same


def fill_keys(world: World, up_to: int) -> None:
    account = account_id(world)
    while keys.live_keys(world.store, account, world.clock.now()) < up_to:
        keys.mint_key(world.store, world.clock, account_id=account, name="loop", scopes=None, connection_id=None)


def test_a_connector_is_refused_on_the_consent_page_when_the_account_holds_its_most_keys(
    owner: WebBrowser, connector: Connector, world: World
) -> None:
    fill_keys(world, keys.MAX_LIVE_KEYS)
    _, challenge = pkce()
    page = owner.get(connector.authorize_path(challenge))
    refused = owner.submit(page, "/oauth/authorize", button=("decision", "approve"))
    assert refused.status_code == 409 and "already holds 100 live keys" in refused.text
    assert "location" not in refused.headers and grants(world) == []


def test_the_consent_page_binds_no_connection_of_another_account(
    owner: WebBrowser, connector: Connector, world: World
) -> None:
    """A consent form posted by hand with another account's connection id: refused there, no code given
    (as an unknown connection is), rather than a code that fails later at the token endpoint."""
    world.add_account("stranger@example.com")
    stranger = WebBrowser(world)
    stranger.sign_in("stranger@example.com")
    stranger.link("bob")
    theirs = world.store.list_connections(account_id(world, "stranger@example.com"))[0].id
    _, challenge = pkce()
    page = owner.get(connector.authorize_path(challenge))
    refused = owner.submit(page, "/oauth/authorize", {"connection_id": theirs}, button=("decision", "approve"))
    assert refused.status_code == 404 and "location" not in refused.headers, refused.text[:300]
    assert "@bob" not in refused.text and grants(world) == []


def test_a_code_redeemed_once_the_account_holds_its_most_keys_grants_nothing(
    owner: WebBrowser, connector: Connector, world: World
) -> None:
    grant = connector.approve(owner)
    fill_keys(world, keys.MAX_LIVE_KEYS)  # minted between the consent and the exchange
    refused = connector.redeem(grant)
    oauth_error(refused, "invalid_grant")
    assert "already holds 100 live keys" in refused.json["error_description"]
    assert grants(world) == []


def test_a_missing_verifier_is_an_invalid_request(owner: WebBrowser, connector: Connector) -> None:
    oauth_error(connector.redeem(connector.approve(owner), code_verifier=None), "invalid_request")


def test_a_reused_code_is_refused_and_ends_the_grant_it_made(
    owner: WebBrowser, connector: Connector, world: World
) -> None:
    grant = connector.approve(owner)
    first = connector.redeem(grant).json
    oauth_error(connector.redeem(grant), "invalid_grant")
    assert not accepted(world, first["access_token"])
    oauth_error(connector.refresh(first["refresh_token"]), "invalid_grant")
    assert grants(world)[0].revoked_at is not None


def test_a_mismatched_redirect_uri_at_the_token_endpoint(owner: WebBrowser, connector: Connector) -> None:
    grant = connector.approve(owner)
    oauth_error(connector.redeem(grant, redirect_uri=REDIRECT_URI + "x"), "invalid_grant")


def test_a_code_of_another_client_or_an_expired_code(owner: WebBrowser, connector: Connector, world: World) -> None:
    other = Connector(world)
    other.register()
    oauth_error(other.redeem(connector.approve(owner)), "invalid_grant")
    late = connector.approve(owner)
    world.clock.advance(minutes=10, seconds=1)
    oauth_error(connector.redeem(late), "invalid_grant")
    oauth_error(connector.redeem(late, code="cdc_garbage"), "invalid_grant")


def test_a_code_and_a_refresh_token_end_at_the_very_instant_of_their_lifetimes(
    owner: WebBrowser, connector: Connector, world: World
) -> None:
    on_time, late = connector.approve(owner), connector.approve(owner)
    world.clock.advance(minutes=10, microseconds=-1)
    tokens = connector.redeem(on_time).json
    world.clock.advance(microseconds=1)
    oauth_error(connector.redeem(late), "invalid_grant")
    world.clock.advance(days=30, microseconds=-2)
    tokens = connector.refresh(tokens["refresh_token"]).json  # the last instant of its 30 days
    world.clock.advance(days=30)
    oauth_error(connector.refresh(tokens["refresh_token"]), "invalid_grant")


def test_an_empty_verifier_is_a_missing_one(owner: WebBrowser, connector: Connector, world: World) -> None:
    oauth_error(connector.redeem(connector.approve(owner), code_verifier=""), "invalid_request")
    assert grants(world) == []


def test_a_reused_code_is_told_to_the_owner(owner: WebBrowser, connector: Connector) -> None:
    grant = connector.approve(owner)
    connector.redeem(grant)
    connector.redeem(grant)
    said = [what for _, what in activity_rows(owner.get("/account").text)]
    assert said[0] == "A connector's authorization code was used a second time: that connector was revoked"


def test_unknown_client_and_unknown_grant_type(connector: Connector, world: World) -> None:
    oauth_error(
        connector.token([("grant_type", "refresh_token"), ("client_id", "ocl_nope"), ("refresh_token", "cdr_x")]),
        "invalid_client",
        401,
    )
    missing = connector.token([("grant_type", "authorization_code"), ("code", "cdc_x"), ("code_verifier", "v")])
    oauth_error(missing, "invalid_client", 401)
    assert missing.json["error_description"] == "client_id is required"  # not "unknown": none was sent
    oauth_error(
        connector.token([("grant_type", "password"), ("client_id", connector.client_id)]), "unsupported_grant_type"
    )
    as_json = world.client.simulate_post("/oauth/token", json={"grant_type": "refresh_token"}, headers={"Host": HOST})
    oauth_error(as_json, "invalid_request", 415)
    twice = connector.token([("grant_type", "authorization_code"), ("grant_type", "refresh_token")])
    oauth_error(twice, "invalid_request")


def test_a_token_request_with_an_escape_that_is_not_utf8_is_an_invalid_request(
    connector: Connector, world: World
) -> None:
    """Read as U+FFFD before, the field was another value than the one sent (``invalid_grant`` here)."""
    body = f"grant_type=refresh_token&client_id={connector.client_id}&refresh_token=cdr_%FF%FE"
    result = world.client.simulate_post(
        "/oauth/token", headers={"Host": HOST, "Content-Type": "application/x-www-form-urlencoded"}, body=body
    )
    oauth_error(result, "invalid_request")
    assert result.json["error_description"] == "the form could not be read"


def test_a_token_request_whose_media_type_is_written_in_capitals_is_read(
    owner: WebBrowser, connector: Connector, world: World
) -> None:
    """Media types are case-insensitive (RFC 9110 §8.3.1): a client library that writes
    ``Application/X-WWW-Form-Urlencoded; Charset=UTF-8`` is answered as any other."""
    grant = connector.approve(owner)
    result = connector.redeem(grant, content_type="Application/X-WWW-Form-Urlencoded; Charset=UTF-8")
    assert result.status_code == 200, result.text
    assert accepted(world, result.json["access_token"])


def test_a_replayed_refresh_token_revokes_the_whole_grant(
    owner: WebBrowser, connector: Connector, world: World
) -> None:
    first = connector.redeem(connector.approve(owner)).json
    rotated = connector.refresh(first["refresh_token"]).json
    oauth_error(connector.refresh(first["refresh_token"]), "invalid_grant")  # the replay
    oauth_error(connector.refresh(rotated["refresh_token"]), "invalid_grant")  # the rotated one died too
    assert not accepted(world, rotated["access_token"]) and not accepted(world, first["access_token"])
    assert grants(world)[0].revoked_at is not None
    assert "oauth.refresh_replayed" in [e.event for e in world.store.list_audit(account_id(world))]


def test_a_refresh_token_of_another_client_is_refused_without_spending_it(
    owner: WebBrowser, connector: Connector, world: World
) -> None:
    tokens = connector.redeem(connector.approve(owner)).json
    thief = Connector(world)
    thief.register()
    oauth_error(thief.refresh(tokens["refresh_token"]), "invalid_grant")
    assert connector.refresh(tokens["refresh_token"]).status_code == 200  # the owner's grant lives on


def test_a_refresh_request_without_a_usable_token(owner: WebBrowser, connector: Connector, world: World) -> None:
    tokens = connector.redeem(connector.approve(owner)).json
    missing = connector.token([("grant_type", "refresh_token"), ("client_id", connector.client_id)])
    oauth_error(missing, "invalid_request")
    assert missing.json["error_description"] == "refresh_token is required"
    real = tokens["refresh_token"]
    altered = real[:-1] + ("1" if real.endswith("0") else "0")  # never the token itself (it ends in 0 once in 64)
    for value in ("cdr_short", tokens["access_token"], altered):
        oauth_error(connector.refresh(value), "invalid_grant")
    assert connector.refresh(real).status_code == 200  # none of them spent it


def test_a_refresh_token_of_a_revoked_grant_is_refused(owner: WebBrowser, connector: Connector, world: World) -> None:
    tokens = connector.redeem(connector.approve(owner)).json
    keys.revoke_key(world.store, world.clock, account_id=account_id(world), key_id=grants(world)[0].id)
    refused = connector.refresh(tokens["refresh_token"])
    oauth_error(refused, "invalid_grant")
    assert not accepted(world, tokens["access_token"])


def test_a_refresh_token_expires_after_30_days(owner: WebBrowser, connector: Connector, world: World) -> None:
    tokens = connector.redeem(connector.approve(owner)).json
    world.clock.advance(days=30, seconds=1)
    oauth_error(connector.refresh(tokens["refresh_token"]), "invalid_grant")


# --- tokens for another resource --------------------------------------------------------------------


def test_a_token_for_another_resource_is_refused_everywhere(
    owner: WebBrowser, connector: Connector, world: World
) -> None:
    _, challenge = pkce()
    asked = owner.get(connector.authorize_path(challenge, resource=OTHER_RESOURCE))
    assert redirect_query(asked)["error"] == "invalid_target"
    grant = connector.approve(owner)
    oauth_error(connector.redeem(grant, resource=OTHER_RESOURCE), "invalid_target")
    tokens = connector.redeem(connector.approve(owner)).json
    oauth_error(connector.refresh(tokens["refresh_token"], resource=OTHER_RESOURCE), "invalid_target")
    access = tokens["access_token"]
    assert accepted(world, access)
    assert accepted(world, access, f"HTTP://{HOST}/v1/mcp/")  # scheme and host case, a trailing slash
    assert not accepted(world, access, f"{ORIGIN}/V1/MCP")  # the path is compared exactly
    assert not accepted(world, access, OTHER_RESOURCE)
    assert not accepted(world, access, f"{ORIGIN}/v1/whoami")
    # REST routes are not the token's resource: there it is refused like an unknown key.
    assert world.get("/v1/whoami", access).status_code == 401
    assert world.client.simulate_get("/v1/whoami", params={"token": access}).status_code == 401


def test_a_resource_that_is_no_url_is_refused_as_another_resource(
    owner: WebBrowser, connector: Connector, world: World
) -> None:
    """Brackets that hold no IPv6 address make urlsplit raise: it answered 500 at each of the three steps."""
    hostile = "https://[other.example]/v1/mcp"
    _, challenge = pkce()
    assert redirect_query(owner.get(connector.authorize_path(challenge, resource=hostile)))["error"] == "invalid_target"
    oauth_error(connector.redeem(connector.approve(owner), resource=hostile), "invalid_target")
    tokens = connector.redeem(connector.approve(owner)).json
    oauth_error(connector.refresh(tokens["refresh_token"], resource=hostile), "invalid_target")


def test_a_request_without_resource_gets_a_token_for_the_mcp_endpoint(
    owner: WebBrowser, connector: Connector, world: World
) -> None:
    tokens = connector.redeem(connector.approve(owner, resource=None), resource=None).json
    assert accepted(world, tokens["access_token"])


# --- at the authorization endpoint ------------------------------------------------------------------


def test_a_mismatched_redirect_uri_is_shown_never_followed(owner: WebBrowser, connector: Connector) -> None:
    _, challenge = pkce()
    for overrides in (
        {"redirect_uri": "https://evil.example/cb"},
        {"redirect_uri": REDIRECT_URI + "/"},
        {"client_id": "ocl_unknown"},
    ):
        page = owner.get(connector.authorize_path(challenge, **overrides))
        assert page.status_code == 400 and "location" not in page.headers
        assert "cannot be completed" in page.text


@pytest.mark.parametrize(
    "asked",
    [
        "http://127.0.0.1:50123/cb",  # another path
        "http://127.0.0.1:50123/callback?x=1",  # a query the registered URI does not have
        "http://localhost:50123/callback",  # another host, loopback too
        "https://127.0.0.1:50123/callback",  # another scheme
        "http://user@127.0.0.1:50123/callback",
        "http://127.0.0.1:0/callback",
        "http://127.0.0.1:65536/callback",
        "http://127.0.0.1:5x/callback",
        "http://127.0.0.1:50123/callback#x",
        "http://127.0.0.1:50123/callback\n",
        "http://127.0.0.1.evil.example:50123/callback",
        "http://[127.0.0.1]:50123/callback",  # brackets hold no IPv6 address: urlsplit raised, a 500
        "http://[::1:50123/callback",
    ],
)
def test_only_the_port_of_a_loopback_redirect_uri_may_differ(
    owner: WebBrowser, connector: Connector, asked: str
) -> None:
    _, challenge = pkce()
    page = owner.get(connector.authorize_path(challenge, redirect_uri=asked))
    assert page.status_code == 400 and "location" not in page.headers
    assert "redirect_uri is not one the application registered" in page.text


def test_a_registered_https_redirect_uri_is_matched_with_its_port(world: World, owner: WebBrowser) -> None:
    connector = Connector(world, redirect_uri="https://app.example/cb")
    connector.register()
    _, challenge = pkce()
    page = owner.get(connector.authorize_path(challenge, redirect_uri="https://app.example:8443/cb"))
    assert page.status_code == 400 and "location" not in page.headers


def test_a_client_with_several_redirect_uris_must_name_one(world: World, owner: WebBrowser) -> None:
    connector = Connector(world)
    connector.register(redirect_uris=[REDIRECT_URI, "https://app.example/cb"])
    _, challenge = pkce()
    page = owner.get(connector.authorize_path(challenge, redirect_uri=None))
    assert page.status_code == 400 and "location" not in page.headers
    assert "redirect_uri is not one the application registered" in page.text


def test_an_overlong_state_goes_back_as_an_error(owner: WebBrowser, connector: Connector) -> None:
    _, challenge = pkce()
    answer = redirect_query(owner.get(connector.authorize_path(challenge, state="s" * 1001)))
    assert answer["error"] == "invalid_request" and "state is longer than 1000" in answer["error_description"]
    assert owner.get(connector.authorize_path(challenge, state="s" * 1000)).status_code == 200


def test_a_request_without_scope_is_offered_the_read_scopes(owner: WebBrowser, connector: Connector) -> None:
    grant = connector.approve(owner, scope=None)
    tokens = connector.redeem(grant)
    assert tokens.status_code == 200 and tokens.json["scope"] == "groups:read posts:read comments:read"


@pytest.mark.parametrize(
    ("overrides", "error", "words"),
    [
        ({"code_challenge_method": "plain"}, "invalid_request", "S256"),
        ({"code_challenge_method": None}, "invalid_request", "S256"),
        ({"code_challenge": None}, "invalid_request", "PKCE is required"),
        ({"code_challenge": "short"}, "invalid_request", "base64url"),
        ({"code_challenge": "A" * 44}, "invalid_request", "base64url"),  # a SHA-256 is 43, unpadded
        ({"code_challenge": "A" * 42 + "="}, "invalid_request", "base64url"),
        ({"response_type": "token"}, "unsupported_response_type", "code"),
        ({"scope": "groups:read admin"}, "invalid_scope", "admin"),
        ({"resource": OTHER_RESOURCE}, "invalid_target", "issues tokens only for"),
        ({"resource": f"{ORIGIN}/v1/mcp#x"}, "invalid_target", "issues tokens only for"),  # a fragment is no part
    ],
)
def test_faulty_requests_go_back_with_the_error_and_state(
    owner: WebBrowser, connector: Connector, overrides: dict[str, str | None], error: str, words: str
) -> None:
    _, challenge = pkce()
    answer = redirect_query(owner.get(connector.authorize_path(challenge, state="keep-me", **overrides)))
    assert answer["error"] == error and words in answer["error_description"]
    assert answer["state"] == "keep-me" and answer["iss"] == ORIGIN


def test_offline_access_is_ignored_and_a_repeated_parameter_refused(owner: WebBrowser, connector: Connector) -> None:
    _, challenge = pkce()
    page = owner.get(connector.authorize_path(challenge, scope="offline_access groups:read"))
    assert page.status_code == 200
    twice = owner.get(connector.authorize_path(challenge) + "&state=second")
    assert twice.status_code == 400 and "more than once" in twice.text
    posted = owner.submit(page, "/oauth/authorize", {"state": ["st-1", "second"]}, button=("decision", "approve"))
    assert posted.status_code == 400 and "state may be given once" in posted.text
    assert "location" not in posted.headers


def test_the_consent_form_needs_the_csrf_token_and_this_site(
    owner: WebBrowser, connector: Connector, world: World
) -> None:
    _, challenge = pkce()
    page = owner.get(connector.authorize_path(challenge))
    no_token = owner.submit(page, "/oauth/authorize", {"csrf_token": None}, button=("decision", "approve"))
    assert no_token.status_code == 403
    cross = owner.submit(
        page,
        "/oauth/authorize",
        button=("decision", "approve"),
        same_site=False,
        headers={"Origin": "https://evil.example"},
    )
    assert cross.status_code == 403
    assert grants(world) == [] and not [e for e in world.store.audit_trail() if e.event == "oauth.consented"]


def test_hidden_fields_are_checked_again_when_the_consent_is_posted(owner: WebBrowser, connector: Connector) -> None:
    _, challenge = pkce()
    page = owner.get(connector.authorize_path(challenge))
    swapped = owner.submit(
        page, "/oauth/authorize", {"redirect_uri": "https://evil.example/cb"}, button=("decision", "approve")
    )
    assert swapped.status_code == 400 and "location" not in swapped.headers
    plain = owner.submit(page, "/oauth/authorize", {"code_challenge_method": "plain"}, button=("decision", "approve"))
    assert redirect_query(plain)["error"] == "invalid_request"
