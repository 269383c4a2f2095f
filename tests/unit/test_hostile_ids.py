"""Caller input never steers the platform: every id, group, label and cursor a client sends, through REST
or an MCP tool, is checked against the platform's shapes before any gateway sees it.

A table of hostile values goes to every route and tool that takes one; each answers 400 or 404 with the
error body, and nothing is created, sent or deleted. (The same table runs through gunicorn, Chromium and
the stand-in in ``tests/integration/test_hostile_ids_platform.py``, where the stand-in's request log shows
that the platform saw no request outside the route's own.)"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest

from adapters.http.encoded_slash import ENCODED_SLASH, has_encoded_slash
from fakes.platform_seed import platform_id
from tests.unit.test_mcp_world import McpWorld
from tests.unit.world_support import Ready

REAL = platform_id("pst-00001")
OTHER_KIND = platform_id("cnv-00001")  # a conversation's id given where a post's is wanted
HOSTILE = [
    "..",
    ".",
    "../self",
    "x/../../self/chat-channels",
    f"{REAL}?x=1",
    f"{REAL}#x",
    f"{REAL}&limit=999",
    f"{REAL}/comments",
    "%2e%2e",
    "line\nbreak",
    "a" * 300,
    "Grüße",
    REAL.upper(),
    f" {REAL}",
]
# Values that reach the gateway for a path id: well-formed, but naming nothing of that kind. (An empty
# optional field counts as absent, as the platform's own ``parent_id: ""`` means top level.)
WELL_FORMED_WRONG = ["wrong-kind", "0" * 32]


def wrong_kind(path: str) -> str:
    """A real id of another kind: a conversation's where a post or comment is wanted, a post's elsewhere."""
    return REAL if path.startswith(("/v1/dms", "/v1/groups")) else OTHER_KIND


def world_state(ready: Ready) -> tuple[Any, ...]:
    gateway = ready.world.gateway
    deleted = sum(p.deleted for p in gateway.world.posts.values()) + sum(
        c.deleted for c in gateway.world.comments.values()
    )
    return (len(gateway.created_posts()), len(gateway.created_comments()), len(gateway.sent_messages()), deleted)


def assert_refused(result: Any, statuses: tuple[int, ...] = (400, 404)) -> None:
    assert result.status_code in statuses, (result.status_code, result.text)
    error = result.json["error"]
    assert error["code"] in ("invalid_request", "not_found") and error["message"]


@pytest.mark.parametrize("value", HOSTILE + WELL_FORMED_WRONG)
def test_path_ids_that_name_nothing_answer_404(ready: Ready, value: str) -> None:
    world, key, before = ready.world, ready.key, world_state(ready)
    for method, template in [
        ("GET", "/v1/posts/{}"),
        ("GET", "/v1/posts/{}/comments"),
        ("DELETE", "/v1/posts/{}"),
        ("DELETE", "/v1/comments/{}"),
        ("GET", "/v1/dms/{}"),
        ("GET", "/v1/groups/{}"),
        ("GET", "/v1/groups/{}/posts"),
    ]:
        given = wrong_kind(template) if value == "wrong-kind" else value
        path = template.format(quote(given, safe=""))
        # RAW_URI: the path as sent, as gunicorn gives it beside the decoded PATH_INFO.
        result = world.client.simulate_request(
            method, path, headers={"Authorization": f"Bearer {key}"}, extras={"RAW_URI": path}
        )
        if "/" in value:
            # The server decodes %2F before routing (as gunicorn does): the request would be for another of
            # our own routes, chosen by the id (until session 44). It is no route.
            assert_refused(result, (404,))
            assert result.json["error"]["message"] == ENCODED_SLASH
            continue
        if value == "wrong-kind" and template.startswith("/v1/groups"):
            assert_refused(result, (404,))  # a post's id is a slug-shaped name no group has
            continue
        assert_refused(result, (404,))
    for template, body in [("/v1/posts/{}/comments", {"content": "hi"}), ("/v1/groups/{}/posts", {"title": "hi"})]:
        given = wrong_kind(template) if value == "wrong-kind" else value
        path = template.format(quote(given, safe=""))
        assert_refused(world.post(path, key, body, extras={"RAW_URI": path}), (404,))
    assert world_state(ready) == before


@pytest.mark.parametrize("value", HOSTILE)
def test_body_and_query_fields_that_cannot_be_ids_answer_400_naming_the_field(ready: Ready, value: str) -> None:
    world, key, before = ready.world, ready.key, world_state(ready)
    post = world.get("/v1/groups/builders-club/posts", key).json["posts"][0]["id"]
    for path, body, field in [
        (f"/v1/posts/{post}/comments", {"content": "hi", "parentId": value}, "parentId"),
        ("/v1/dms", {"to": value, "content": "hi"}, "to"),
        ("/v1/dms", {"conversationId": value, "content": "hi"}, "conversationId"),
    ]:
        result = world.post(path, key, body)
        assert result.status_code == 400, (field, result.text)
        assert result.json["error"]["details"]["field"] == field
    # A query's value is named as every refusal of a query value names it: details.parameter.
    for path in (f"/v1/posts/{post}", f"/v1/posts/{post}/comments"):
        result = world.get(path, key, params={"group": value})
        assert result.status_code == 400 and result.json["error"]["details"]["parameter"] == "group", result.text
    result = world.post("/v1/dms", key, {"to": post, "content": "hi"}, params={"group": value})
    assert result.status_code == 400 and result.json["error"]["details"]["parameter"] == "group", result.text
    convo = world.get("/v1/dms", key).json["conversations"][0]["id"]
    result = world.get(f"/v1/dms/{convo}", key, params={"cursor": value})
    assert result.status_code == 400 and result.json["error"]["details"]["parameter"] == "cursor"
    assert world_state(ready) == before


def test_a_label_name_is_matched_never_used_as_a_path(ready: Ready) -> None:
    world, key = ready.world, ready.key
    for label in ("../../self", "Wins\n", "\u202eWins", "x" * 101):
        result = world.post("/v1/groups/builders-club/posts", key, {"title": "hi", "label": label})
        assert result.status_code == 400 and result.json["error"]["details"]["field"] == "label"
    assert world.gateway.created_posts() == []


# --- the same through the MCP tools ------------------------------------------------------------------------


@pytest.mark.parametrize("value", HOSTILE + WELL_FORMED_WRONG)
def test_mcp_tools_refuse_what_cannot_name_a_platform_thing(mcp: McpWorld, value: str) -> None:
    before = (len(mcp.gateway.created_posts()), len(mcp.gateway.created_comments()), len(mcp.gateway.sent_messages()))
    post = mcp.ok("get_feed", {"group": "builders-club"})["posts"][0]["id"]
    calls = [
        ("get_post", {"postId": value}),
        ("list_comments", {"postId": value}),
        ("delete_post", {"postId": value}),
        ("delete_comment", {"commentId": value}),
        ("get_dm_thread", {"conversationId": value}),
        ("get_group", {"group": value}),
        ("get_feed", {"group": value}),
        ("create_post", {"group": value, "title": "hi"}),
        ("create_comment", {"postId": value, "content": "hi"}),
        ("create_comment", {"postId": post, "content": "hi", "parentId": value}),
        ("send_dm", {"to": value, "content": "hi"}),
        ("send_dm", {"conversationId": value, "content": "hi"}),
        ("get_post", {"postId": post, "group": value}),
    ]
    for tool, args in calls:
        if value == "wrong-kind":
            args = {
                name: (REAL if name == "conversationId" else OTHER_KIND) if given == value else given
                for name, given in args.items()
            }
        error = mcp.fail(tool, args)
        assert error["code"] in ("invalid_request", "not_found"), (tool, error)
    after = (len(mcp.gateway.created_posts()), len(mcp.gateway.created_comments()), len(mcp.gateway.sent_messages()))
    assert after == before


# --- the service's own ids (connections, keys): named back only when they could be one -------------------

OWN_ID_HOSTILE = ["con_" + "A" * 5000, "key_x\nInjected: yes", "con_ABC\u202eDEF", "con_" + "é" * 16, "key_" + "x" * 17]


@pytest.mark.parametrize("value", OWN_ID_HOSTILE, ids=lambda value: repr(value)[:24])
def test_an_own_id_that_names_nothing_is_never_repeated_unless_it_could_be_one(ready: Ready, value: str) -> None:
    """Through the connection header, a key's or a connection's path, and a new key's connectionId: 404
    "no such …", with nothing of the value in the answer. A well-formed id that names nothing is repeated."""
    world, browser = ready.world, ready.browser
    answers = [
        world.get("/v1/whoami", ready.key, headers={"X-Community-Connection": value.replace("\n", " ")}),
        world.client.simulate_delete(f"/v1/keys/{quote(value, safe='')}", headers=browser.headers()),
        world.client.simulate_post(f"/v1/keys/{quote(value, safe='')}/rotate", headers=browser.headers()),
        world.client.simulate_delete(f"/v1/connections/{quote(value, safe='')}", headers=browser.headers()),
        world.client.simulate_post("/v1/keys", json={"connectionId": value}, headers=browser.headers()),
    ]
    for answer in answers:
        assert answer.status_code in (400, 404), answer.text
        message = answer.json["error"]["message"]
        assert value not in message and value.replace("\n", " ") not in message and len(answer.content) < 512
        if answer.status_code == 404:
            assert message.startswith("no such "), message
    named = world.client.simulate_delete("/v1/keys/key_" + "Z" * 16, headers=browser.headers())
    assert named.json["error"]["message"] == "no key key_" + "Z" * 16


@pytest.mark.parametrize(
    ("path", "said"),
    [
        ("/v1/key", "no route GET /v1/key"),
        ("/v1/" + "a" * 3000, "no route GET this path"),
        ("/v1/keys%0AInjected:%20yes", "no route GET this path"),
        ("/v1/%E2%80%AEkeys", "no route GET this path"),
    ],
)
def test_no_route_repeats_a_path_only_when_it_could_be_a_typo(ready: Ready, path: str, said: str) -> None:
    answer = ready.world.get(path, ready.key)
    assert answer.status_code == 404 and answer.json["error"]["message"] == said


@pytest.mark.parametrize(
    ("raw", "refused"),
    [
        ("/v1/posts/abc%2Fcomments", True),
        ("/v1/posts/abc%2fcomments", True),
        ("http://host/v1/posts/abc%2Fcomments", True),  # a request target in absolute form
        ("/v1/posts/abc/comments", False),
        ("/v1/dms?cursor=%2F", False),  # the query is data, never routed
        ("/v1/posts/abc%252Fcomments", False),  # decoded once: a literal %2F in an id, refused as one
        ("", False),  # a server that does not give RAW_URI
    ],
)
def test_an_encoded_slash_is_found_in_the_path_alone(raw: str, refused: bool) -> None:
    assert has_encoded_slash(raw) is refused


def test_an_encoded_slash_is_no_route_in_the_api_and_no_page_on_the_dashboard(ready: Ready) -> None:
    """``PATH_INFO`` comes decoded; the request target as sent (gunicorn's ``RAW_URI``) shows the ``%2F``."""
    client = ready.world.client
    api = "/v1/posts/" + "a" * 32 + "%2Fcomments"
    refused = client.simulate_get(api, extras={"RAW_URI": api}, headers={"Authorization": f"Bearer {ready.key}"})
    assert refused.status_code == 404 and refused.json["error"]["message"] == ENCODED_SLASH
    # A dashboard address opened in a browser: the dashboard's own "no page" page, as for any address it
    # does not have (without the slash, this one is a form's target, which sends a visitor to sign in).
    page = "/keys/x%2Frevoke"
    answer = client.simulate_get(page, extras={"RAW_URI": page}, headers={"Accept": "text/html"})
    assert answer.status_code == 404 and answer.headers["content-type"].startswith("text/html")
    assert "<title>Page not found" in answer.text
