"""API keys as a client meets them: hostile values, scopes, bound keys, rotation and revocation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from freezegun import freeze_time

from community_api import keys
from community_api.ids import random_base62
from community_api.scopes import ALL_SCOPES, DEFAULT_SCOPES
from tests.unit.world_support import Ready, World, build_world


def _valid_shape_unknown_key() -> str:
    body = keys.KEY_PREFIX + "A" * keys.RANDOM_LENGTH
    return body + keys._checksum(body)


def _bad_checksum(secret: str) -> str:
    last = secret[-1]
    return secret[:-1] + ("B" if last != "B" else "C")


HOSTILE = {
    "empty": lambda s: "",
    "missing prefix": lambda s: s[len("cda_") :],
    "other prefix": lambda s: "cdb_" + s[4:],
    "bad checksum": _bad_checksum,
    "trailing junk after a space": lambda s: s + " x",
    "two keys": lambda s: s + " " + s,
    "tab inside": lambda s: s[:10] + "\t" + s[10:],
    "oversize": lambda s: s + "x" * 10_000,
    "truncated": lambda s: s[:-1],
    "lowercased": lambda s: s.lower(),
    "unknown but well formed": lambda s: _valid_shape_unknown_key(),
    "sql": lambda s: "cda_' OR 1=1 --",
    "non-ascii": lambda s: s[:-1] + "é",
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_keys_get_the_same_401(ready: Ready, name: str) -> None:
    presented = HOSTILE[name](ready.key)
    result = ready.world.client.simulate_get("/v1/whoami", headers={"Authorization": f"Bearer {presented}"})
    assert result.status_code == 401
    # RFC 6750 §3.1: a credential sent and refused is an invalid_token, whatever was wrong with it;
    # none sent (an empty one) carries no error code.
    refused = 'Bearer realm="community-api", error="invalid_token"'
    assert result.headers["WWW-Authenticate"] == (refused if presented.strip() else 'Bearer realm="community-api"')
    assert result.json["error"]["code"] == "unauthorized"
    assert presented.strip() == "" or presented.strip() not in result.text


@pytest.mark.parametrize("suffix", ["\n", " ", "\r\n", "\t", "\x00"])
def test_keys_with_trailing_whitespace_are_refused_by_the_core(ready: Ready, suffix: str) -> None:
    """HTTP servers trim whitespace around a header value (RFC 9110 OWS) before we see it, so at the
    HTTP level ``Bearer <key> `` is the key itself; everywhere else (MCP arguments, the CLI, a store
    look-up) a key with a trailing newline or space is not the key."""
    from community_api.errors import Unauthorized

    world = ready.world
    with pytest.raises(Unauthorized):
        keys.authenticate_key(world.store, world.clock, ready.key + suffix, world.deps.refusals)
    with pytest.raises(Unauthorized):
        keys.authenticate_key(world.store, world.clock, suffix + ready.key, world.deps.refusals)


@pytest.mark.parametrize(
    "header",
    [
        "",
        "Bearer",
        "Bearer ",
        "Bearer   ",
        "Basic dXNlcjpwYXNz",
        "Token {key}",
        "{key}",
        "Bearer\t{key}",
        "Bearer{key}",
    ],
)
def test_malformed_authorization_headers(ready: Ready, header: str) -> None:
    result = ready.world.client.simulate_get("/v1/whoami", headers={"Authorization": header.format(key=ready.key)})
    assert result.status_code == 401
    assert result.json["error"]["code"] == "unauthorized"


def test_no_authorization_header(ready: Ready) -> None:
    result = ready.world.client.simulate_get("/v1/whoami")
    assert result.status_code == 401
    assert "WWW-Authenticate" in result.headers


@pytest.mark.parametrize("header", ["bearer {key}", "BEARER {key}", "Bearer  {key}", "Bearer    {key}"])
def test_scheme_is_case_insensitive_and_may_be_followed_by_several_spaces(ready: Ready, header: str) -> None:
    # RFC 6750 §2.1: "Bearer" 1*SP b64token.
    result = ready.world.client.simulate_get("/v1/whoami", headers={"Authorization": header.format(key=ready.key)})
    assert result.status_code == 200


@pytest.mark.parametrize("header", ["Bearer {key},Bearer {key}", "Bearer {key}, Bearer {other}", "Bearer {key},"])
def test_an_authorization_header_sent_twice_is_400_saying_so(ready: Ready, header: str) -> None:
    """An HTTP server hands a header sent twice to the application as its values joined by a comma: it was
    refused as an invalid key (401), with no hint why. RFC 6750 §3.1 names a repeated credential
    invalid_request, 400; on the MCP endpoint too, with its challenge."""
    world = ready.world
    other = world.mint(ready.browser, scopes=["groups:read"])["secret"]
    value = header.format(key=ready.key, other=other)
    for answer in (
        world.client.simulate_get("/v1/whoami", headers={"Authorization": value}),
        world.client.simulate_post(
            "/v1/mcp", headers={"Authorization": value}, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}
        ),
    ):
        assert answer.status_code == 400 and answer.json["error"]["code"] == "invalid_request"
        assert "was it sent twice" in answer.json["error"]["message"] and ready.key not in answer.text
        assert answer.headers["WWW-Authenticate"].endswith('error="invalid_request"')
    assert world.client.simulate_get("/v1/whoami", headers={"Authorization": f"Bearer {ready.key}"}).status_code == 200


def test_key_in_query_string_is_refused_even_with_a_header(ready: Ready) -> None:
    world = ready.world
    assert world.client.simulate_get("/v1/whoami", params={"access_token": ready.key}).status_code == 401
    result = world.get("/v1/whoami", ready.key, params={"key": ready.key})
    assert result.status_code == 401
    assert "Authorization header" in result.json["error"]["message"]
    assert ready.key not in result.text


@pytest.mark.parametrize(
    "query",
    [
        "token=cdo_" + "a" * 40,  # an OAuth access token
        "refresh_token=cdr_" + "a" * 40,  # and a refresh token
        "x=1&x=cda_" + "a" * 49,  # a parameter given twice: each of its values is looked at
        "x=cda_" + "a" * 49 + "&x=1",
    ],
)
def test_any_credential_in_the_query_string_is_refused(ready: Ready, query: str) -> None:
    result = ready.world.get("/v1/whoami", ready.key, query_string=query)
    assert result.status_code == 401
    assert "never in the URL" in result.json["error"]["message"]


def test_a_key_of_another_account_cannot_reach_its_connection(world: World) -> None:
    owner = world.sign_up("one@example.com")
    alice = world.link(owner)
    # The world has sign-up closed: the second account is created as the CLI creates one.
    world.add_account("two@example.com", "another long password")
    other = world.sign_in("two@example.com", "another long password")
    world.link(other, "bob")
    other_key = world.mint(other)["secret"]
    result = world.get("/v1/whoami", other_key, headers={"X-Community-Connection": alice["id"]})
    assert result.status_code == 404
    assert result.json["error"]["code"] == "not_found"
    assert "alice" not in result.text


@pytest.mark.parametrize("whose", ["another account's", "unknown", "not an id"])
def test_a_key_is_not_bound_to_a_connection_the_account_does_not_have(world: World, whose: str) -> None:
    owner = world.sign_up("one@example.com")
    world.link(owner)
    world.add_account("two@example.com", "another long password")
    other = world.sign_in("two@example.com", "another long password")
    theirs = world.link(other, "bob")["id"]
    connection_id = {"another account's": theirs, "unknown": "con_" + "A" * 16, "not an id": "../con"}[whose]
    result = world.client.simulate_post(
        "/v1/keys", json={"name": "bound", "connectionId": connection_id}, headers=owner.headers()
    )
    assert result.status_code == 404
    assert result.json["error"]["code"] == "not_found"
    assert result.json["error"]["details"] == {"field": "connectionId"}
    assert "bob" not in result.text
    assert world.store.list_keys(owner.account["id"]) == []  # nothing minted


def test_default_scopes_and_opt_in(ready: Ready) -> None:
    world = ready.world
    minted = world.mint(ready.browser)
    assert tuple(minted["scopes"]) == DEFAULT_SCOPES
    assert world.get("/v1/whoami", minted["secret"]).status_code == 200
    result = world.get("/v1/dms", minted["secret"])
    assert result.status_code == 403
    assert result.json["error"]["details"]["requiredScope"] == "dms:read"
    assert result.headers["WWW-Authenticate"] == 'Bearer error="insufficient_scope", scope="dms:read"'


def test_scopes_asked_for_are_kept_once_each_in_the_services_order(ready: Ready) -> None:
    minted = ready.world.mint(ready.browser, scopes=["posts:read", "dms:write", "groups:read", "posts:read"])
    assert minted["scopes"] == ["groups:read", "posts:read", "dms:write"]


@pytest.mark.parametrize(
    ("scopes", "message", "details"),
    [
        ([], "scopes must name at least one scope", {}),
        (
            ["posts:read", "posts:admin", "dms:delete", "posts:admin"],
            "unknown scope: dms:delete, posts:admin",  # each once, sorted
            {"unknown": ["dms:delete", "posts:admin"]},
        ),
    ],
)
def test_scopes_that_name_nothing_are_refused_listing_the_scopes_there_are(
    ready: Ready, scopes: list[str], message: str, details: dict[str, list[str]]
) -> None:
    answer = ready.world.client.simulate_post(
        "/v1/keys", json={"name": "k", "scopes": scopes}, headers=ready.browser.headers()
    )
    assert answer.status_code == 400 and answer.json["error"]["message"] == message
    assert answer.json["error"]["details"] == {"field": "scopes", **details, "allowed": list(ALL_SCOPES)}


@pytest.mark.parametrize(
    ("method", "path", "scope"),
    [
        ("GET", "/v1/whoami", "groups:read"),
        ("GET", "/v1/groups", "groups:read"),
        ("GET", "/v1/groups/builders-club", "groups:read"),
        ("GET", "/v1/groups/builders-club/posts", "posts:read"),
        ("POST", "/v1/groups/builders-club/posts", "posts:write"),
        ("GET", "/v1/posts/p1", "posts:read"),
        ("DELETE", "/v1/posts/p1", "posts:write"),
        ("GET", "/v1/posts/p1/comments", "comments:read"),
        ("POST", "/v1/posts/p1/comments", "comments:write"),
        ("DELETE", "/v1/comments/c1", "comments:write"),
        ("GET", "/v1/dms", "dms:read"),
        ("GET", "/v1/dms/c1", "dms:read"),
        ("POST", "/v1/dms", "dms:write"),
    ],
)
def test_each_route_needs_its_scope(ready: Ready, method: str, path: str, scope: str) -> None:
    world = ready.world
    others = [s for s in ALL_SCOPES if s != scope]
    key = world.mint(ready.browser, scopes=others)["secret"]
    result = world.client.simulate_request(method, path, headers={"Authorization": f"Bearer {key}"}, json={})
    assert result.status_code == 403
    assert result.json["error"]["details"]["requiredScope"] == scope


def test_unknown_scope_is_refused(ready: Ready) -> None:
    result = ready.world.client.simulate_post(
        "/v1/keys", json={"scopes": ["posts:read", "admin"]}, headers=ready.browser.headers()
    )
    assert result.status_code == 400
    assert result.json["error"]["details"]["unknown"] == ["admin"]


@pytest.mark.parametrize("scopes", [{"posts:read": True}, "posts:read", 5, [5], [["posts:read"]]])
def test_scopes_must_be_a_list_of_names(ready: Ready, scopes: object) -> None:
    """An object's keys or a string's characters are never read as a list: a key with scopes the client did
    not spell out would be minted."""
    result = ready.world.client.simulate_post(
        "/v1/keys", json={"name": "typed", "scopes": scopes}, headers=ready.browser.headers()
    )
    assert result.status_code == 400
    assert result.json["error"]["message"] == "scopes must be a list of scope names"
    assert result.json["error"]["details"] == {"field": "scopes"}
    assert "typed" not in [key.name for key in ready.world.store.list_keys(ready.browser.account["id"])]


def test_an_unknown_field_given_as_null_is_still_unknown(ready: Ready) -> None:
    """null is "not given" for a field the route takes; a name it does not take is a typo all the same."""
    result = ready.world.client.simulate_post(
        "/v1/keys", json={"name": "typo", "scope": None}, headers=ready.browser.headers()
    )
    assert result.status_code == 400 and result.json["error"]["details"]["unknown"] == ["scope"]
    taken = ready.world.client.simulate_post(
        "/v1/keys", json={"name": "null", "scopes": None}, headers=ready.browser.headers()
    )
    assert taken.status_code == 201 and taken.json["scopes"] == ["groups:read", "posts:read", "comments:read"]


def test_bound_key_uses_its_connection_and_refuses_another(ready: Ready) -> None:
    world = ready.world
    bob = world.link(ready.browser, "bob")
    bound = world.mint(ready.browser, connection_id=bob["id"])["secret"]
    assert world.get("/v1/whoami", bound).json["handle"] == "bob"
    same = world.get("/v1/whoami", bound, headers={"X-Community-Connection": bob["id"]})
    assert same.json["handle"] == "bob"
    other = world.get("/v1/whoami", bound, headers={"X-Community-Connection": ready.connection["id"]})
    assert other.status_code == 403
    assert other.json["error"]["code"] == "connection_mismatch"


def test_unbound_key_picks_connection_by_header_else_active(ready: Ready) -> None:
    world = ready.world
    bob = world.link(ready.browser, "bob")
    assert world.get("/v1/whoami", ready.key).json["handle"] == "alice"
    chosen = world.get("/v1/whoami", ready.key, headers={"X-Community-Connection": bob["id"]})
    assert chosen.json["handle"] == "bob"
    missing = world.get("/v1/whoami", ready.key, headers={"X-Community-Connection": "con_nope"})
    assert missing.status_code == 404
    # Sent twice, the header reaches the service as the two joined by a comma: said so, rather than "no such
    # connection" (session 44).
    both = f"{bob['id']},{ready.connection['id']}"
    twice = world.get("/v1/whoami", ready.key, headers={"X-Community-Connection": both})
    assert twice.status_code == 400
    assert twice.json["error"]["message"] == (
        "X-Community-Connection names one connection (was the header sent twice? send it once)"
    )


def test_no_connection_is_a_clear_conflict(world: World) -> None:
    browser = world.sign_up()
    key = world.mint(browser)["secret"]
    result = world.get("/v1/whoami", key)
    assert result.status_code == 409
    assert "POST /v1/connections" in result.json["error"]["message"]


def test_revocation_is_immediate_and_audited(ready: Ready) -> None:
    world = ready.world
    minted = world.mint(ready.browser)
    assert world.get("/v1/whoami", minted["secret"]).status_code == 200
    result = world.client.simulate_delete(f"/v1/keys/{minted['id']}", headers=ready.browser.headers())
    assert result.status_code == 204
    assert world.get("/v1/whoami", minted["secret"]).status_code == 401
    events = [e.event for e in world.store.list_audit(ready.browser.account["id"])]
    assert "key.revoked" in events and "key.refused" in events


def test_rotation_returns_a_new_key_once_and_keeps_the_old_for_24h(ready: Ready) -> None:
    world = ready.world
    minted = world.mint(ready.browser)
    result = world.client.simulate_post(f"/v1/keys/{minted['id']}/rotate", headers=ready.browser.headers())
    assert result.status_code == 201
    new = result.json
    assert new["secret"] != minted["secret"] and new["id"] != minted["id"]
    assert new["scopes"] == minted["scopes"]
    assert world.get("/v1/whoami", new["secret"]).status_code == 200
    world.clock.advance(hours=24, seconds=-1)
    assert world.get("/v1/whoami", minted["secret"]).status_code == 200
    world.clock.advance(seconds=1)
    assert world.get("/v1/whoami", minted["secret"]).status_code == 401
    assert world.get("/v1/whoami", new["secret"]).status_code == 200


def test_rotation_boundary_under_freezegun() -> None:
    """The same boundary with the system clock frozen, as the real service reads time."""
    from community_api.clock import SystemClock

    with freeze_time("2026-11-01 12:00:00") as frozen:
        world = build_world(SystemClock())
        browser = world.sign_up()
        world.link(browser)
        minted = world.mint(browser)
        rotated = world.client.simulate_post(f"/v1/keys/{minted['id']}/rotate", headers=browser.headers())
        assert rotated.json["createdAt"] == "2026-11-01T12:00:00Z"
        frozen.tick(timedelta(hours=24) - timedelta(seconds=1))
        assert world.get("/v1/whoami", minted["secret"]).status_code == 200
        frozen.tick(timedelta(seconds=1))
        assert datetime.now(UTC) == datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
        assert world.get("/v1/whoami", minted["secret"]).status_code == 401


def test_rotation_without_grace_and_double_rotation(ready: Ready) -> None:
    world = ready.world
    first = world.mint(ready.browser)
    second = world.client.simulate_post(f"/v1/keys/{first['id']}/rotate", headers=ready.browser.headers()).json
    # Rotating the successor ends the first key at once: at most two live secrets.
    third = world.client.simulate_post(f"/v1/keys/{second['id']}/rotate", headers=ready.browser.headers()).json
    assert world.get("/v1/whoami", first["secret"]).status_code == 401
    assert world.get("/v1/whoami", second["secret"]).status_code == 200
    again = world.client.simulate_post(f"/v1/keys/{second['id']}/rotate", headers=ready.browser.headers())
    assert again.status_code == 409
    leaked = world.client.simulate_post(
        f"/v1/keys/{third['id']}/rotate", params={"grace": "0"}, headers=ready.browser.headers()
    )
    assert leaked.status_code == 201
    assert world.get("/v1/whoami", third["secret"]).status_code == 401
    assert world.get("/v1/whoami", leaked.json["secret"]).status_code == 200


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("grace=1h", "grace must be 0 (end the old key now) or 24h (the default)"),
        ("grace=none", "grace must be 0 (end the old key now) or 24h (the default)"),
        ("grace=0&grace=24h", "grace may be given once"),
        ("graceful=0", "unknown query parameter: graceful"),
    ],
)
def test_a_bad_rotation_query_is_refused_and_the_key_keeps_working(ready: Ready, query: str, message: str) -> None:
    world = ready.world
    minted = world.mint(ready.browser)
    refused = world.client.simulate_post(
        f"/v1/keys/{minted['id']}/rotate", query_string=query, headers=ready.browser.headers()
    )
    assert refused.status_code == 400
    assert refused.json["error"]["code"] == "invalid_request"
    assert refused.json["error"]["message"] == message
    assert world.get("/v1/whoami", minted["secret"]).status_code == 200
    # Nothing was rotated: the key can still be rotated once.
    assert (
        world.client.simulate_post(f"/v1/keys/{minted['id']}/rotate", headers=ready.browser.headers()).status_code
        == 201
    )


def test_key_record_shape_and_secret_shown_once(ready: Ready) -> None:
    world = ready.world
    minted = world.mint(ready.browser)
    assert minted["secret"].startswith("cda_") and len(minted["secret"]) == keys.KEY_LENGTH
    assert keys.has_valid_shape(minted["secret"])
    assert minted["prefix"] == minted["secret"][4:12]
    assert set(minted) == {
        "id",
        "name",
        "prefix",
        "scopes",
        "connectionId",
        "kind",
        "createdAt",
        "lastUsedAt",
        "expiresAt",
        "revokedAt",
        "secret",
    }
    me = world.client.simulate_get("/v1/me", headers=ready.browser.headers())
    assert minted["secret"] not in me.text
    assert all("secret" not in k for k in me.json["keys"])


def test_other_accounts_keys_cannot_be_rotated_or_revoked(ready: Ready) -> None:
    world = ready.world
    world.add_account("two@example.com", "another long password")
    other = world.sign_in("two@example.com", "another long password")
    minted = world.mint(ready.browser)
    assert world.client.simulate_delete(f"/v1/keys/{minted['id']}", headers=other.headers()).status_code == 404
    assert world.client.simulate_post(f"/v1/keys/{minted['id']}/rotate", headers=other.headers()).status_code == 404
    assert world.get("/v1/whoami", minted["secret"]).status_code == 200


def test_failed_authentication_does_not_count_as_usage(ready: Ready) -> None:
    world = ready.world
    minted = world.mint(ready.browser)
    world.get("/v1/whoami", minted["secret"])
    world.get("/v1/whoami", _bad_checksum(minted["secret"]))
    world.get("/v1/whoami", minted["secret"] + " x")
    me = world.client.simulate_get("/v1/me", headers=ready.browser.headers()).json
    record = next(k for k in me["keys"] if k["id"] == minted["id"])
    assert record["requestsToday"] == 1 and record["requestsTotal"] == 1
    assert record["lastUsedAt"] is not None


def test_a_successor_starts_unused(ready: Ready) -> None:
    """A rotation makes a new value: the dashboard must not say it was used when only its predecessor was."""
    world = ready.world
    minted = world.mint(ready.browser)
    assert world.get("/v1/whoami", minted["secret"]).status_code == 200
    rotated = world.client.simulate_post(f"/v1/keys/{minted['id']}/rotate", headers=ready.browser.headers())
    assert rotated.status_code == 201 and rotated.json["lastUsedAt"] is None
    me = world.client.simulate_get("/v1/me", headers=ready.browser.headers()).json
    used = {k["id"]: k["lastUsedAt"] for k in me["keys"]}
    assert used[minted["id"]] is not None and used[rotated.json["id"]] is None


def test_ending_a_key_leaves_how_its_ended_predecessors_ended(ready: Ready) -> None:
    """A key replaced by a rotation stays "replaced" (``expiresAt``), one revoked stays "revoked" with its
    time, whatever later happens to their successors: the dashboard says why an old value is refused."""
    world, headers = ready.world, ready.browser.headers()

    def records() -> dict[str, tuple[str | None, str | None]]:
        me = world.client.simulate_get("/v1/me", headers=headers).json
        return {k["id"]: (k["expiresAt"], k["revokedAt"]) for k in me["keys"]}

    replaced = world.mint(ready.browser)
    successor = world.client.simulate_post(
        f"/v1/keys/{replaced['id']}/rotate", params={"grace": "0"}, headers=headers
    ).json
    revoked = world.mint(ready.browser)
    in_grace = world.client.simulate_post(f"/v1/keys/{revoked['id']}/rotate", headers=headers).json
    assert world.client.simulate_delete(f"/v1/keys/{revoked['id']}", headers=headers).status_code == 204
    before = records()
    world.clock.advance(minutes=5)
    assert world.client.simulate_delete(f"/v1/keys/{successor['id']}", headers=headers).status_code == 204
    assert world.client.simulate_post(f"/v1/keys/{in_grace['id']}/rotate", headers=headers).status_code == 201
    after = records()
    assert after[replaced["id"]] == before[replaced["id"]] and before[replaced["id"]][1] is None
    assert after[revoked["id"]] == before[revoked["id"]]
    assert world.get("/v1/whoami", replaced["secret"]).status_code == 401


def test_revoking_a_revoked_key_again_changes_nothing(ready: Ready) -> None:
    """Idempotent, as a retried DELETE must be: 204 again, the first time kept, one line on the trail."""
    world, headers = ready.world, ready.browser.headers()
    minted = world.mint(ready.browser)
    assert world.client.simulate_delete(f"/v1/keys/{minted['id']}", headers=headers).status_code == 204
    first = next(
        k for k in world.client.simulate_get("/v1/me", headers=headers).json["keys"] if k["id"] == minted["id"]
    )
    world.clock.advance(minutes=5)
    assert world.client.simulate_delete(f"/v1/keys/{minted['id']}", headers=headers).status_code == 204
    again = next(
        k for k in world.client.simulate_get("/v1/me", headers=headers).json["keys"] if k["id"] == minted["id"]
    )
    assert again == first and first["revokedAt"] is not None
    revocations = [e for e in world.store.audit_trail() if e.event == "key.revoked" and e.key_id == minted["id"]]
    assert len(revocations) == 1


def test_a_value_sharing_a_keys_shown_prefix_is_not_that_key(ready: Ready) -> None:
    """The eight characters after ``cda_`` are shown on the dashboard, in the activity and in logs, and a key
    is looked up by them: only the whole value's hash may match. A value made from a real key's prefix,
    its checksum right, opens nothing, and an operator told it leaked revokes nothing."""
    world = ready.world
    for _ in range(3):
        body = ready.key[:12] + random_base62(keys.RANDOM_LENGTH - 8)
        forged = body + keys._checksum(body)
        assert keys.has_valid_shape(forged) and keys.display_prefix(forged) == keys.display_prefix(ready.key)
        assert world.get("/v1/whoami", forged).status_code == 401
        assert keys.revoke_leaked_key(world.store, world.clock, forged).key is None
    assert world.get("/v1/whoami", ready.key).status_code == 200


def test_an_account_holds_at_most_a_hundred_live_keys(ready: Ready) -> None:
    """A script minting in a loop stops with a clear 409 instead of filling the database; revoking a key
    makes room, and rotating one at the limit still works (it replaces the key; the old one counts until
    its grace ends)."""
    world, browser = ready.world, ready.browser
    account = browser.account["id"]
    for _ in range(keys.MAX_LIVE_KEYS - 2):  # the fixture's key is the first
        keys.mint_key(world.store, world.clock, account_id=account, name="loop", scopes=None, connection_id=None)
    last = world.mint(browser)
    refused = world.client.simulate_post("/v1/keys", json={"name": "one more"}, headers=browser.headers())
    assert refused.status_code == 409
    error = refused.json["error"]
    assert error["code"] == "conflict" and error["details"]["maxLiveKeys"] == keys.MAX_LIVE_KEYS
    assert "already holds 100 live keys" in error["message"] and "revoke one" in error["message"]
    rotated = world.client.simulate_post(f"/v1/keys/{last['id']}/rotate", headers=browser.headers())
    assert rotated.status_code == 201  # 101 live for the 24 hours of the old key's grace
    assert world.client.simulate_post("/v1/keys", json={}, headers=browser.headers()).status_code == 409
    world.clock.advance(hours=24)  # the old key's grace is over: 100 live again, still the most
    assert world.client.simulate_post("/v1/keys", json={}, headers=browser.headers()).status_code == 409
    assert world.client.simulate_delete(f"/v1/keys/{rotated.json['id']}", headers=browser.headers()).status_code == 204
    assert world.mint(browser)["secret"]  # revoking one made room


@pytest.mark.parametrize("random_length", [0, keys.RANDOM_LENGTH - 1, keys.RANDOM_LENGTH + 1, 2 * keys.RANDOM_LENGTH])
def test_a_value_of_the_wrong_length_is_no_key_even_when_its_checksum_holds(random_length: int) -> None:
    """The shape alone refuses it, before any look-up: a checksum is six characters, so one in a few billion
    random values has one that holds, and the length is what keeps the rest of the rule."""
    body = keys.KEY_PREFIX + "A" * random_length
    assert not keys.has_valid_shape(body + keys._checksum(body))
    assert keys.has_valid_shape(_valid_shape_unknown_key())
