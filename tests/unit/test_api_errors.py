"""Every error is our JSON body — Falcon's own ones too — and Planned routes are not live."""

from __future__ import annotations

import gzip
import io
import json

import pytest
from gunicorn.http.errors import InvalidChunkSize

from community_api.activity import recent_activity
from tests.unit.world_support import Ready


def assert_error(result, status: int, code: str) -> None:  # type: ignore[no-untyped-def]
    assert result.status_code == status, result.text
    assert result.headers["Content-Type"].startswith("application/json")
    body = result.json
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code
    assert body["error"]["message"]
    assert "Traceback" not in result.text and "<html" not in result.text.lower()


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("GET", "/v1/nope", 404, "not_found"),
        ("GET", "/nope", 404, "not_found"),  # "/" is the dashboard (adapters/web)
        ("GET", "/v2/whoami", 404, "not_found"),
        # Planned routes answer exactly as unknown paths do.
        ("GET", "/v1/groups/builders-club/members", 404, "not_found"),
        ("POST", "/v1/members/m1/approve", 404, "not_found"),
        ("POST", "/v1/members/m1/reject", 404, "not_found"),
        ("POST", "/v1/members/m1/ban", 404, "not_found"),
        ("GET", "/v1/groups/builders-club/courses", 404, "not_found"),
        ("GET", "/v1/groups/builders-club/events", 404, "not_found"),
        ("GET", "/v1/groups/builders-club/leaderboard", 404, "not_found"),
        ("POST", "/v1/posts/p1/pin", 404, "not_found"),
        # ...or 405 where the path serves other methods.
        ("PATCH", "/v1/posts/p1", 405, "method_not_allowed"),
        ("PUT", "/v1/whoami", 405, "method_not_allowed"),
        ("DELETE", "/v1/groups/g1", 405, "method_not_allowed"),
    ],
)
def test_unknown_and_planned_routes(ready: Ready, method: str, path: str, status: int, code: str) -> None:
    result = ready.world.client.simulate_request(method, path, headers={"Authorization": f"Bearer {ready.key}"})
    assert_error(result, status, code)


@pytest.mark.parametrize("path", ["/v1/whoami/", "/v1/groups/", "/v1/groups/builders-club/posts/"])
def test_a_trailing_slash_names_the_same_route(ready: Ready, path: str) -> None:
    """``/v1/whoami/`` is ``/v1/whoami``: a client that joins a base URL and a path with one slash too many
    is answered, not told the route does not exist."""
    with_slash = ready.world.get(path, ready.key)
    without = ready.world.get(path.rstrip("/"), ready.key)
    assert with_slash.status_code == without.status_code == 200
    assert with_slash.json == without.json


def test_405_lists_the_allowed_methods(ready: Ready) -> None:
    result = ready.world.client.simulate_request("PATCH", "/v1/posts/p1")
    assert "GET" in result.headers["Allow"] and "DELETE" in result.headers["Allow"]
    assert result.json["error"]["message"] == "PATCH is not allowed on /v1/posts/p1"


@pytest.mark.parametrize(
    ("body", "content_type", "status", "code"),
    [
        (b"{not json", "application/json", 400, "invalid_request"),
        (b'{"title": "x",}', "application/json", 400, "invalid_request"),
        (b"\xff\xfe", "application/json", 400, "invalid_request"),
        # A lone surrogate is no character: it could be neither stored nor sent on to the platform.
        (b'{"title": "\\ud800"}', "application/json", 400, "invalid_request"),
        (b'{"title": "x", "n": NaN}', "application/json", 400, "invalid_request"),
        (b'["a list"]', "application/json", 400, "invalid_request"),
        (b'"a string"', "application/json", 400, "invalid_request"),
        (b"null", "application/json", 400, "invalid_request"),
        (b"", "application/json", 400, "invalid_request"),
        (b'{"title": "x"}', "text/plain", 415, "unsupported_media_type"),
        (b"title=x", "application/x-www-form-urlencoded", 415, "unsupported_media_type"),
        (b'{"title": "' + b"x" * 300_000 + b'"}', "application/json", 413, "payload_too_large"),
    ],
)
def test_bad_bodies(ready: Ready, body: bytes, content_type: str, status: int, code: str) -> None:
    result = ready.world.client.simulate_post(
        "/v1/groups/builders-club/posts",
        body=body,
        headers={"Authorization": f"Bearer {ready.key}", "Content-Type": content_type},
    )
    assert_error(result, status, code)
    assert ready.world.gateway.created_posts() == []


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"\xff\xfe", "the request body is not valid UTF-8 (byte 0): JSON is sent as UTF-8"),
        (b'{"title": "caf\xe9"}', "the request body is not valid UTF-8 (byte 14): JSON is sent as UTF-8"),  # Latin-1
        # Valid UTF-8 that is not JSON (a lone surrogate's escape included): orjson's own words follow.
        (b'{"title": "\\ud800"}', "the request body is not valid JSON: "),
        (b"{not json", "the request body is not valid JSON: "),
        (b"", "a JSON object is required as the request body"),
        (b" \r\n", "a JSON object is required as the request body"),  # white space is no body either
    ],
)
def test_a_body_that_cannot_be_read_says_why(ready: Ready, body: bytes, says: str) -> None:
    """Bytes that are not UTF-8 are said so: orjson words them "str is not valid UTF-8: surrogates not
    allowed", which sent a client looking for surrogates in a Latin-1 body."""
    result = ready.world.client.simulate_post(
        "/v1/groups/builders-club/posts",
        body=body,
        headers={"Authorization": f"Bearer {ready.key}", "Content-Type": "application/json"},
    )
    assert_error(result, 400, "invalid_request")
    assert result.json["error"]["message"].startswith(says), result.json["error"]["message"]


@pytest.mark.parametrize(
    ("body", "name"),
    [
        (b'{"title": "draft", "title": "final"}', "title"),
        (b'{"title": "x", "content": "a", "content": "b"}', "content"),
        (b'{"title": "x", "title": "x"}', "title"),  # the same value twice too: the body is ambiguous
    ],
)
def test_a_body_naming_a_field_twice_is_refused(ready: Ready, body: bytes, name: str) -> None:
    """Parsers disagree on which of the two counts (ours kept the last): nothing is posted on a guess."""
    result = ready.world.client.simulate_post(
        "/v1/groups/builders-club/posts",
        body=body,
        headers={"Authorization": f"Bearer {ready.key}", "Content-Type": "application/json"},
    )
    assert_error(result, 400, "invalid_request")
    error = result.json["error"]
    assert error["details"]["field"] == name and f"names '{name}' twice" in error["message"]
    assert ready.world.gateway.created_posts() == []


@pytest.mark.parametrize("coding", ["gzip", "br", "deflate, gzip"])
def test_a_compressed_body_is_415_saying_to_send_it_uncompressed(ready: Ready, coding: str) -> None:
    body = gzip.compress(b'{"title": "x"}')
    headers = {"Authorization": f"Bearer {ready.key}", "Content-Type": "application/json"}
    result = ready.world.client.simulate_post(
        "/v1/groups/builders-club/posts", body=body, headers={**headers, "Content-Encoding": coding}
    )
    assert_error(result, 415, "unsupported_media_type")
    assert "uncompressed" in result.json["error"]["message"]
    assert result.headers["accept-encoding"] == "identity"
    assert ready.world.gateway.created_posts() == []
    plain = {**headers, "Content-Encoding": "identity"}  # no coding at all, said explicitly
    sent = ready.world.client.simulate_post("/v1/groups/builders-club/posts", body=b'{"title": "x"}', headers=plain)
    assert sent.status_code == 201


@pytest.mark.parametrize(
    ("content_type", "coding"),
    [
        ("application/json", "IDENTITY"),  # a content coding's name is case-insensitive (RFC 9110 §8.4.1)
        ("Application/JSON", None),  # and so is a media type's (RFC 9110 §8.3.1)
        ("application/json; charset=utf-8", None),  # with its parameters
        ("APPLICATION/JSON ; Charset=UTF-8", " Identity "),
    ],
)
def test_a_json_body_is_taken_however_its_headers_are_cased(
    ready: Ready, content_type: str, coding: str | None
) -> None:
    headers = {"Authorization": f"Bearer {ready.key}", "Content-Type": content_type}
    if coding is not None:
        headers["Content-Encoding"] = coding
    sent = ready.world.client.simulate_post("/v1/groups/builders-club/posts", body=b'{"title": "x"}', headers=headers)
    assert sent.status_code == 201, sent.text
    assert [post.title for post in ready.world.gateway.created_posts()] == ["x"]


@pytest.mark.parametrize("character", ["я", "😀"])
def test_the_longest_texts_allowed_are_taken_however_the_client_escapes_them(ready: Ready, character: str) -> None:
    """Python's json.dumps (and requests' ``json=``) writes every non-ASCII character as ``\\uXXXX``, and one
    beyond the BMP as two (12 bytes for one character): a post, a comment or a DM at its longest allowed
    length is still taken, not refused as too large."""
    world = ready.world
    headers = {"Authorization": f"Bearer {ready.key}", "Content-Type": "application/json"}
    post_body = {"title": character * 300, "content": character * 20_000}
    post = world.client.simulate_post(
        "/v1/groups/builders-club/posts", body=json.dumps(post_body).encode(), headers=headers
    )
    assert post.status_code == 201, post.text
    comment = world.client.simulate_post(
        f"/v1/posts/{post.json['id']}/comments",
        body=json.dumps({"content": character * 20_000}).encode(),
        headers=headers,
    )
    assert comment.status_code == 201, comment.text
    bob = world.gateway.user("bob")
    dm = world.client.simulate_post(
        "/v1/dms",
        params={"group": "builders-club"},
        body=json.dumps({"to": bob.id, "content": character * 10_000}).encode(),
        headers=headers,
    )
    assert dm.status_code == 201, dm.text
    assert [m.content for m in world.gateway.sent_messages()] == [character * 10_000]


def test_a_body_past_the_limit_without_content_length(ready: Ready) -> None:
    """A chunked upload announces no length; the limit (256 KiB for a data operation) still holds."""
    import io

    big = json.dumps({"content": "y" * 300_000}).encode()
    result = ready.world.client.simulate_request(
        "POST",
        "/v1/dms",
        headers={"Authorization": f"Bearer {ready.key}", "Content-Type": "application/json"},
        # As gunicorn hands a chunked body: no length, and the server ends the stream (PEP 3333).
        extras={"wsgi.input": io.BytesIO(big), "wsgi.input_terminated": True},
        content_type="application/json",
    )
    assert_error(result, 413, "payload_too_large")
    assert result.json["error"]["details"] == {"maxBytes": 256 * 1024}


class _NeverRead(io.BytesIO):
    def read(self, size: int | None = -1, /) -> bytes:
        raise AssertionError("the body was read")


def test_a_body_announced_past_the_limit_is_refused_before_a_byte_is_read(ready: Ready) -> None:
    """A client announcing a gigabyte hears 413 at once: the service neither reads nor waits for any of it."""
    result = ready.world.client.simulate_request(
        "POST",
        "/v1/dms",
        headers={
            "Authorization": f"Bearer {ready.key}",
            "Content-Type": "application/json",
            "Content-Length": "1073741824",
        },
        extras={"wsgi.input": _NeverRead()},
    )
    assert_error(result, 413, "payload_too_large")
    assert result.json["error"]["details"] == {"maxBytes": 256 * 1024}
    one_past = ready.world.client.simulate_request(  # the limit is exact: one byte past it is past it
        "POST",
        "/v1/dms",
        headers={
            "Authorization": f"Bearer {ready.key}",
            "Content-Type": "application/json",
            "Content-Length": str(256 * 1024 + 1),
        },
        extras={"wsgi.input": _NeverRead()},
    )
    assert_error(one_past, 413, "payload_too_large")


@pytest.mark.parametrize("announced", [True, False], ids=["with its length", "chunked"])
def test_a_body_of_exactly_the_limit_is_read(ready: Ready, announced: bool) -> None:
    """256 KiB is taken, to the byte: such a DM is read, and refused for its content's length by the core
    (400), not for its size (413)."""
    limit = 256 * 1024
    skeleton = json.dumps({"to": "a" * 32, "content": ""}).encode()
    body = json.dumps({"to": "a" * 32, "content": "y" * (limit - len(skeleton))}).encode()
    assert len(body) == limit
    extras: dict[str, object] = {"wsgi.input": io.BytesIO(body)}
    headers = {"Authorization": f"Bearer {ready.key}", "Content-Type": "application/json"}
    if announced:
        headers["Content-Length"] = str(limit)
    else:
        extras["wsgi.input_terminated"] = True
    result = ready.world.client.simulate_request("POST", "/v1/dms", headers=headers, extras=extras)
    assert_error(result, 400, "invalid_request")
    assert result.json["error"]["details"]["field"] == "content"


def test_a_management_body_is_taken_to_64_kib(ready: Ready) -> None:
    """Forms, management and OAuth bodies hold names, passwords and a few ids: 64 KiB, not a post's 256."""
    limit = 64 * 1024
    skeleton = json.dumps({"email": "owner@example.com", "password": ""}).encode()
    for size, status in ((limit, 400), (limit + 1, 413)):  # read, and refused for the password's length
        body = json.dumps({"email": "owner@example.com", "password": "p" * (size - len(skeleton))}).encode()
        assert len(body) == size
        result = ready.world.client.simulate_post("/v1/session", body=body, content_type="application/json")
        assert result.status_code == status, result.text
    assert result.json["error"]["details"] == {"maxBytes": limit}


def test_a_long_content_coding_is_named_cut_short(ready: Ready) -> None:
    coding = "x-" + "z" * 300
    headers = {"Authorization": f"Bearer {ready.key}", "Content-Type": "application/json", "Content-Encoding": coding}
    result = ready.world.client.simulate_post("/v1/groups/builders-club/posts", body=b'{"title": "x"}', headers=headers)
    assert_error(result, 415, "unsupported_media_type")
    assert result.json["error"]["details"]["contentEncoding"] == coding[:40]


def test_a_body_with_no_length_is_no_body_unless_the_server_ends_it(ready: Ready) -> None:
    """Without a Content-Length, only a server that ends the stream itself (PEP 3333's
    ``wsgi.input_terminated``, as gunicorn does for a chunked body) lets the body be read: on any other, a
    read would wait for bytes that never come. Such a request is one without a body."""
    body = json.dumps({"title": "never read"}).encode()
    result = ready.world.client.simulate_request(
        "POST",
        "/v1/groups/builders-club/posts",
        headers={"Authorization": f"Bearer {ready.key}", "Content-Type": "application/json"},
        extras={"wsgi.input": io.BytesIO(body)},
        content_type="application/json",
    )
    assert_error(result, 400, "invalid_request")
    assert result.json["error"]["message"] == "a JSON object is required as the request body"
    assert ready.world.gateway.created_posts() == []


class _BrokenMidBody(io.BytesIO):
    """A body stream that fails part-way, as gunicorn's reader does: a connection reset (an OSError), or
    a chunked body framed wrongly (its InvalidChunkSize)."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    def read(self, size: int | None = -1) -> bytes:
        raise self.error


@pytest.mark.parametrize("case", ["shorter than its length", "reset while read", "chunked framing broken"])
def test_a_body_that_does_not_arrive_whole_does_nothing(ready: Ready, case: str) -> None:
    """gunicorn's reader ends a body at the connection's end without a word: one shorter than its
    Content-Length (a client that gave up, or miscounted) was acted on when what came was whole JSON, and
    the client, having seen no answer, would send it again. A broken chunked body answered 500."""
    world = ready.world
    bob = world.gateway.user("bob")
    body = json.dumps({"to": bob.id, "content": "sent once, whole"}).encode()
    headers = {"Authorization": f"Bearer {ready.key}", "Content-Type": "application/json"}
    stream: io.BytesIO = _BrokenMidBody(InvalidChunkSize(b"zz"))
    if case == "shorter than its length":
        stream, headers["Content-Length"] = io.BytesIO(body), str(len(body) + 40)
    elif case == "reset while read":
        stream, headers["Content-Length"] = _BrokenMidBody(ConnectionResetError()), str(len(body))
    result = world.client.simulate_request(
        "POST",
        "/v1/dms",
        params={"group": "builders-club"},
        headers=headers,
        # Without a length, the body is chunked and the server ends the stream (PEP 3333).
        extras={"wsgi.input": stream, "wsgi.input_terminated": "Content-Length" not in headers},
    )
    assert_error(result, 400, "invalid_request")
    assert "did not arrive whole" in result.json["error"]["message"]
    assert world.gateway.sent_messages() == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "title"),
        ({"title": ""}, "title"),
        ({"title": "   "}, "title"),
        ({"title": 5}, "title"),
        ({"title": None}, "title"),
        ({"title": ["x"]}, "title"),
        ({"title": "x", "content": {"a": 1}}, "content"),
        ({"title": "x", "label": 3}, "label"),
        ({"title": "x" * 301}, "title"),
    ],
)
def test_post_body_validation(ready: Ready, body: dict, field: str) -> None:
    result = ready.world.post("/v1/groups/builders-club/posts", ready.key, body)
    assert_error(result, 400, "invalid_request")
    assert result.json["error"]["details"]["field"] == field


def test_unknown_body_fields_are_refused(ready: Ready) -> None:
    result = ready.world.post("/v1/groups/builders-club/posts", ready.key, {"title": "x", "titel": "y"})
    assert_error(result, 400, "invalid_request")
    assert result.json["error"]["details"]["unknown"] == ["titel"]


def test_unknown_query_parameters_are_refused(ready: Ready) -> None:
    result = ready.world.get("/v1/groups/builders-club/posts", ready.key, params={"page": "2"})
    assert_error(result, 400, "invalid_request")
    # The MCP argument that REST takes as the Idempotency-Key header is not a query parameter: a client that
    # put it there would believe its retry safe, and post twice.
    posted = ready.world.post(
        "/v1/groups/builders-club/posts", ready.key, {"title": "x"}, params={"idempotencyKey": "k1"}
    )
    assert_error(posted, 400, "invalid_request")
    assert posted.json["error"]["message"] == "unknown query parameter: idempotencyKey"
    assert ready.world.get("/v1/groups/builders-club/posts", ready.key).json["posts"][0]["title"] != "x"


def test_unexpected_failure_is_a_plain_500(ready: Ready) -> None:
    ready.world.gateway.fail_next("whoami", RuntimeError("boom: internal detail"))
    result = ready.world.get("/v1/whoami", ready.key)
    assert_error(result, 500, "internal_error")
    assert "boom" not in result.text


@pytest.mark.parametrize(
    ("error_name", "status", "code"),
    [
        ("PlatformError", 502, "platform_error"),
        ("PlatformUnavailable", 503, "platform_unavailable"),
        ("ConnectionExpired", 409, "connection_expired"),
        ("NotFound", 404, "not_found"),
    ],
)
def test_platform_errors_map_to_statuses(ready: Ready, error_name: str, status: int, code: str) -> None:
    from community_api import errors

    ready.world.gateway.fail_next("list_groups", getattr(errors, error_name)("the platform said no"))
    assert_error(ready.world.get("/v1/groups", ready.key), status, code)


def test_expired_platform_session_marks_the_connection(ready: Ready) -> None:
    world = ready.world
    world.gateway.expire_sessions(ready.connection["platformUserId"])
    first = world.get("/v1/groups", ready.key)
    assert_error(first, 409, "connection_expired")
    assert first.json["error"]["details"]["connectionId"] == ready.connection["id"]
    listed = world.client.simulate_get("/v1/connections", headers=ready.browser.headers()).json
    assert listed["connections"][0]["status"] == "expired"
    assert_error(world.get("/v1/whoami", ready.key), 409, "connection_expired")  # at once, the platform unasked
    # The account's activity says it once, naming the platform account (the Account page shows it).
    ended = (
        "The platform ended the session of “alice”: requests through it answer connection_expired until it is "
        "linked again"
    )
    activity = recent_activity(world.store, ready.browser.account["id"])
    assert [(line.text, line.times) for line in activity if "session" in line.text] == [(ended, 1)]
    # Re-linking refreshes the same connection in place and it works again.
    again = world.link(ready.browser)
    assert again["id"] == ready.connection["id"] and again["status"] == "active"
    assert world.get("/v1/groups", ready.key).status_code == 200


def test_calls_that_met_the_sessions_end_at_once_write_one_line_between_them(ready: Ready) -> None:
    """Two calls through one connection were on their way when the platform ended its session: each
    meets the end, but the account's activity says it once. (Each call loaded the connection while it was
    still active, so each goes to mark it.)"""
    from community_api.deps import on_platform
    from community_api.errors import ConnectionExpired

    world = ready.world
    loaded = world.store.get_connection(ready.connection["id"])
    assert loaded is not None and loaded.status == "active"
    for _ in range(2):
        with pytest.raises(ConnectionExpired), on_platform(world.deps, loaded, reads=1):
            raise ConnectionExpired("the platform session expired")
    activity = recent_activity(world.store, ready.browser.account["id"])
    assert [line.times for line in activity if "ended the session" in line.text] == [1]
    assert world.store.get_connection(ready.connection["id"]).status == "expired"  # type: ignore[union-attr]
