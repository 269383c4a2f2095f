"""A route that takes no body (every GET and DELETE but the account's deletion, and a key's rotation) refuses
one that holds something, as an unknown field is refused where a body is taken, and does nothing: a rotation
sent ``{"grace": "0"}`` used to rotate with the 24 hours' grace, leaving a leaked key working a day more, and
a feed sent ``{"pages": 3}`` read one page (``adapters/http/body.refuse_body``)."""

from __future__ import annotations

from typing import Any

import falcon
import falcon.testing
import pytest

from adapters.http.body import refuse_body
from adapters.operations import OPERATIONS
from community_api.errors import InvalidRequest
from tests.unit.world_support import Ready

FEED = "/v1/groups/builders-club/posts"

# (what is sent, the Content-Type it is sent with, the message's start)
REFUSED_BODIES = [
    (b'{"x": 1}', "application/json", "this route takes no request body; unknown field: x"),
    (b"[1, 2]", "application/json", "this route takes no request body"),
    (b'"text"', "application/json", "this route takes no request body"),
    (b"not json at all", "text/plain", "this route takes no request body"),
    (b"pages=3", "application/x-www-form-urlencoded", "this route takes no request body"),
]
# What some clients send with every request, and is no body.
NO_BODIES = [
    (b"", None),
    (b"  \r\n", "application/json"),
    (b"{}", "application/json"),
    (b"{ }", None),
    (b"null", "application/json"),  # a client's wrapper sending JSON.stringify(null)
]


def _send(ready: Ready, method: str, path: str, body: bytes, content_type: str | None, **kwargs: Any) -> Any:
    headers = {"Authorization": f"Bearer {ready.key}"}
    if content_type:
        headers["Content-Type"] = content_type
    return ready.world.client.simulate_request(method, path, headers=headers, body=body, **kwargs)


def _data_routes(ready: Ready) -> dict[str, tuple[str, str]]:
    """Every data operation that takes no body, at a path it answers 2xx on."""
    world, key = ready.world, ready.key
    post = world.post(FEED, key, {"title": "Kept"}).json["id"]
    comment = world.post(f"/v1/posts/{post}/comments", key, {"content": "Kept too"}).json["id"]
    conversation = world.get("/v1/dms", key).json["conversations"][0]["id"]
    routes = {
        "whoami": ("GET", "/v1/whoami"),
        "list_groups": ("GET", "/v1/groups"),
        "get_group": ("GET", "/v1/groups/builders-club"),
        "get_feed": ("GET", FEED),
        "get_post": ("GET", f"/v1/posts/{post}"),
        "list_comments": ("GET", f"/v1/posts/{post}/comments"),
        "delete_comment": ("DELETE", f"/v1/comments/{comment}"),
        "delete_post": ("DELETE", f"/v1/posts/{post}"),
        "list_dms": ("GET", "/v1/dms"),
        "get_dm_thread": ("GET", f"/v1/dms/{conversation}"),
    }
    # A new operation without a body joins this list.
    assert set(routes) == {op.name for op in OPERATIONS if op.http.method != "POST"}
    return routes


@pytest.mark.parametrize(("body", "content_type", "message"), REFUSED_BODIES)
def test_every_data_route_without_a_body_refuses_one_and_does_nothing(
    ready: Ready, body: bytes, content_type: str, message: str
) -> None:
    routes = _data_routes(ready)
    for name, (method, path) in routes.items():
        refused = _send(ready, method, path, body, content_type)
        assert refused.status_code == 400, (name, refused.text)
        assert refused.json["error"]["code"] == "invalid_request"
        assert refused.json["error"]["message"] == message, name
        if message.endswith("unknown field: x"):
            assert refused.json["error"]["details"] == {"unknown": ["x"], "allowed": []}
    # Nothing was deleted: the post and its comment are still there, and go with no body.
    _, comment_path = routes["delete_comment"]
    _, post_path = routes["delete_post"]
    assert ready.world.get(post_path, ready.key).json["comments"][0]["content"] == "Kept too"
    assert ready.world.delete(comment_path, ready.key).status_code == 204
    assert ready.world.delete(post_path, ready.key).status_code == 204


@pytest.mark.parametrize(("body", "content_type"), NO_BODIES)
def test_no_body_white_space_and_an_empty_object_are_no_body(
    ready: Ready, body: bytes, content_type: str | None
) -> None:
    for name, (method, path) in _data_routes(ready).items():
        answer = _send(ready, method, path, body, content_type)
        assert answer.status_code < 300, (name, answer.text)


def test_a_feed_sent_its_options_in_a_body_says_they_go_in_the_query(ready: Ready) -> None:
    refused = _send(ready, "GET", FEED, b'{"pages": 3, "sort": "best"}', "application/json")
    assert refused.status_code == 400
    assert refused.json["error"]["message"] == (
        "this route takes no request body: pages, sort are query parameters here (?pages=…)"
    )
    assert refused.json["error"]["details"] == {"unknown": ["pages", "sort"], "allowed": []}


def _request(headers: dict[str, str], body: bytes, *, length: bool) -> falcon.Request:
    env = falcon.testing.create_environ(method="DELETE", path="/v1/posts/" + "a" * 32, headers=headers, body=body)
    if not length:  # as gunicorn gives a chunked body: no length, and a stream that ends by itself
        del env["CONTENT_LENGTH"]
        env["wsgi.input_terminated"] = True
    return falcon.Request(env)


def test_a_chunked_body_without_a_length_is_read_and_refused() -> None:
    """A body sent chunked announces no Content-Length: its Transfer-Encoding says one comes."""
    request = _request({"Transfer-Encoding": "chunked"}, b'{"x": 1}', length=False)
    with pytest.raises(InvalidRequest, match="unknown field: x"):
        refuse_body(request)
    refuse_body(_request({"Transfer-Encoding": "chunked"}, b"{}", length=False))


def test_a_request_that_announces_no_body_is_not_read() -> None:
    """Every GET a client usually sends: nothing is read (the stream of a request with neither a length nor a
    Transfer-Encoding is empty to gunicorn; here it is not, to show it is left alone)."""
    refuse_body(_request({}, b'{"x": 1}', length=False))
    refuse_body(_request({"Content-Length": "0"}, b"", length=True))


def test_a_rotation_sent_grace_in_its_body_is_refused_and_rotates_nothing(ready: Ready) -> None:
    world = ready.world
    minted = world.mint(ready.browser)
    refused = world.client.simulate_post(
        f"/v1/keys/{minted['id']}/rotate", json={"grace": "0"}, headers=ready.browser.headers()
    )
    assert refused.status_code == 400
    assert refused.json["error"] == {
        "code": "invalid_request",
        "message": "this route takes no request body: grace is a query parameter here (?grace=…)",
        "details": {"unknown": ["grace"], "allowed": []},
    }
    # Nothing rotated: the key works, and is rotated (once) as the query asks.
    assert world.get("/v1/whoami", minted["secret"]).status_code == 200
    rotated = world.client.simulate_post(
        f"/v1/keys/{minted['id']}/rotate", params={"grace": "0"}, json={}, headers=ready.browser.headers()
    )
    assert rotated.status_code == 201, rotated.text
    assert world.get("/v1/whoami", minted["secret"]).status_code == 401


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/connections"),
        ("GET", "/v1/me"),
        ("DELETE", "/v1/keys/{key}"),
        ("DELETE", "/v1/connections/{connection}"),
        ("DELETE", "/v1/sessions"),
        ("DELETE", "/v1/session"),
    ],
)
def test_management_routes_without_a_body_refuse_one_and_do_nothing(ready: Ready, method: str, path: str) -> None:
    world = ready.world
    minted = world.mint(ready.browser)
    path = path.format(key=minted["id"], connection=ready.connection["id"])
    refused = world.client.simulate_request(method, path, json={"confirm": True}, headers=ready.browser.headers())
    assert refused.status_code == 400, refused.text
    assert refused.json["error"]["message"] == "this route takes no request body; unknown field: confirm"
    # The session, the key and the connection are all still there.
    me = world.client.simulate_get("/v1/me", headers=ready.browser.headers())
    assert me.status_code == 200
    assert [c["id"] for c in me.json["connections"]] == [ready.connection["id"]]
    assert world.get("/v1/whoami", minted["secret"]).status_code == 200
