"""Typed commands at the edge (issue 15): a REST body or query, and an MCP tool's arguments, become the same
core command (``adapters/commands.py``), and a bad one is refused with ``invalid_request`` naming the field
as the caller spelled it, whichever rule it broke."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
import pytest

from adapters.commands import command_fields, structure_body, structure_query
from adapters.operations import OPERATIONS
from community_api import dms, feed, posts
from community_api.commands import BadField, Matches, at_least, at_most, label_name
from community_api.errors import InvalidRequest
from community_api.platform_ids import PLATFORM_ID_PATTERN
from community_api.scopes import ALL_SCOPES
from fakes.platform_seed import platform_id
from tests.unit.test_mcp_world import McpWorld
from tests.unit.world_support import Ready

FEED = "/v1/groups/builders-club/posts"
ID_RULE = "must be an id of 32 lowercase hexadecimal characters"
A_POST = platform_id("pst-00001")

# (path, body, status, message, details): what a REST client reads for each bad body.
BAD_BODIES: list[tuple[str, Any, str, dict[str, Any]]] = [
    (FEED, [], "the request body must be a JSON object", {}),
    (FEED, "title", "the request body must be a JSON object", {}),
    (
        FEED,
        {"title": "x", "titel": "y", "Label": 1},
        "unknown field: Label, titel",
        {"unknown": ["Label", "titel"], "allowed": ["content", "label", "title"]},
    ),
    (FEED, {}, "title is required", {"field": "title"}),
    (FEED, {"title": None}, "title is required", {"field": "title"}),
    (FEED, {"title": 5}, "title must be a string", {"field": "title"}),
    (FEED, {"title": ["x"]}, "title must be a string", {"field": "title"}),
    (FEED, {"title": " \n "}, "title must not be empty", {"field": "title"}),
    (FEED, {"title": "x" * 301}, "title is longer than 300 characters", {"field": "title", "maxLength": 300}),
    (FEED, {"title": "x", "content": True}, "content must be a string", {"field": "content"}),
    (
        FEED,
        {"title": "x", "content": "y" * 20_001},
        "content is longer than 20000 characters",
        {"field": "content", "maxLength": 20_000},
    ),
    (
        FEED,
        {"title": "x", "label": "l" * 101},
        "label must be a label id or a label name of at most 100 readable characters",
        {"field": "label"},
    ),
    (
        f"/v1/posts/{A_POST}/comments",
        {"content": "hi", "parentId": "../self"},
        f"parentId {ID_RULE}",
        {"field": "parentId", "pattern": PLATFORM_ID_PATTERN},
    ),
    (
        f"/v1/posts/{A_POST}/comments",
        {"content": "hi", "parent_id": A_POST},
        "unknown field: parent_id",
        {"unknown": ["parent_id"], "allowed": ["content", "parentId"]},
    ),
    (f"/v1/posts/{A_POST}/comments", {"parentId": A_POST}, "content is required", {"field": "content"}),
    ("/v1/dms", {"content": "hi", "conversationId": 5}, "conversationId must be a string", {"field": "conversationId"}),
    (
        "/v1/dms",
        {"content": "hi", "to": "x/../../self"},
        f"to {ID_RULE}",
        {"field": "to", "pattern": PLATFORM_ID_PATTERN},
    ),
    (
        "/v1/dms",
        {"content": "hi", "conversationID": A_POST},
        "unknown field: conversationID",
        {"unknown": ["conversationID"], "allowed": ["content", "conversationId", "to"]},
    ),
    ("/v1/dms", {"content": "hi"}, "give exactly one of to and conversationId", {"fields": ["to", "conversationId"]}),
    (
        "/v1/dms",
        {"content": "hi", "to": " ", "conversationId": ""},
        "give exactly one of to and conversationId",
        {"fields": ["to", "conversationId"]},
    ),
    (
        "/v1/dms",
        {"content": "x" * 10_001, "to": A_POST},
        "content is longer than 10000 characters",
        {"field": "content", "maxLength": 10_000},
    ),
]


@pytest.mark.parametrize(("path", "body", "message", "details"), BAD_BODIES)
def test_a_bad_body_is_refused_naming_the_field_as_sent(
    ready: Ready, path: str, body: Any, message: str, details: dict[str, Any]
) -> None:
    answer = ready.world.post(path, ready.key, body)
    assert answer.status_code == 400, answer.text
    assert answer.json["error"] == {"code": "invalid_request", "message": message, "details": details}
    assert ready.world.gateway.created_posts() == [] and ready.world.gateway.sent_messages() == []


BAD_QUERIES: list[tuple[str, dict[str, str], str, dict[str, Any]]] = [
    (FEED, {"pages": "0"}, "pages must be an integer from 1 to 30", {"parameter": "pages"}),
    (FEED, {"pages": "31"}, "pages must be an integer from 1 to 30", {"parameter": "pages"}),
    (FEED, {"pages": "2.5"}, "pages must be an integer from 1 to 30", {"parameter": "pages"}),
    (FEED, {"pages": "-1"}, "pages must be an integer from 1 to 30", {"parameter": "pages"}),
    (FEED, {"pages": "1000"}, "pages must be an integer from 1 to 30", {"parameter": "pages"}),
    (
        FEED,
        {"sort": "top"},
        f"sort must be one of: {', '.join(feed.SORTS)}",
        {"parameter": "sort", "allowed": list(feed.SORTS)},
    ),
    (FEED, {"since": "yesterday"}, "since must be 24h, 7d or a date YYYY-MM-DD", {"parameter": "since"}),
    (
        FEED,
        {"since": "2026-02-30"},
        "since must be 24h, 7d or a date YYYY-MM-DD (2026-02-30 is no day of the calendar)",
        {"parameter": "since"},
    ),
    ("/v1/dms", {"awaitingReply": "maybe"}, "awaitingReply must be true or false", {"parameter": "awaitingReply"}),
    ("/v1/dms", {"awaitingReply": "True"}, "awaitingReply must be true or false", {"parameter": "awaitingReply"}),
    ("/v1/dms", {"cursor": "\u00ae"}, "cursor must be an offset returned as nextCursor", {"parameter": "cursor"}),
    ("/v1/dms", {"cursor": "-1"}, "cursor must be an offset returned as nextCursor", {"parameter": "cursor"}),
    ("/v1/dms", {"cursor": "12345678"}, "cursor must be an offset returned as nextCursor", {"parameter": "cursor"}),
]


@pytest.mark.parametrize(("path", "params", "message", "details"), BAD_QUERIES)
def test_a_bad_query_is_refused_naming_the_parameter_as_sent(
    ready: Ready, path: str, params: dict[str, str], message: str, details: dict[str, Any]
) -> None:
    answer = ready.world.get(path, ready.key, params=params)
    assert answer.status_code == 400, answer.text
    assert answer.json["error"] == {"code": "invalid_request", "message": message, "details": details}


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, (1, "newest", None)),
        ({"pages": "", "sort": "", "since": ""}, (1, "newest", None)),  # empty means not given
        ({"pages": "07", "sort": "best-1w", "since": "7d"}, (7, "best-1w", "7d")),
    ],
)
def test_a_query_string_is_read_as_its_fields_types(
    ready: Ready, params: dict[str, str], expected: tuple[Any, ...]
) -> None:
    answer = ready.world.get(FEED, ready.key, params=params).json
    assert (answer["pagesRequested"], answer["sort"], answer["since"]) == expected


# --- the same command from MCP ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "args", "message"),
    [
        # Refused with the words REST uses (the schema's pattern and the command's own rule agree).
        ("create_post", {"group": "builders-club", "title": "   "}, "title must not be empty"),
        ("create_comment", {"postId": A_POST, "content": "\t"}, "content must not be empty"),
        (
            "send_dm",
            {"content": "hi", "to": A_POST, "conversationId": A_POST},
            "give exactly one of to and conversationId",
        ),
    ],
)
def test_mcp_arguments_become_the_same_command(mcp: McpWorld, tool: str, args: dict[str, Any], message: str) -> None:
    error = mcp.fail(tool, args)
    assert (error["code"], error["message"]) == ("invalid_request", message)


# Texts around the edge of "empty": Python's white space (what the core strips), ECMA's (what a client's
# JSON-schema validator knows as ``\s``), and characters that look blank but are neither.
EDGE_TEXTS = ["\u00a0", "\u001d", "\u0085", "\u3000", " \u2028\t", "\ufeff", "\u200b", "\u180e", " x "]


@pytest.mark.parametrize("text", EDGE_TEXTS, ids=lambda text: repr(text))
def test_the_published_schema_refuses_exactly_the_texts_the_service_refuses(
    ready: Ready, mcp: McpWorld, text: str
) -> None:
    """A client that checks a body against the OpenAPI document (or an agent against the tool's schema)
    must not send what the service refuses, nor hold back what it accepts."""
    import jsonschema

    from adapters.http.openapi import document

    body_schema = document()["paths"]["/v1/posts/{post_id}/comments"]["post"]["requestBody"]["content"]
    schema = body_schema["application/json"]["schema"]["properties"]["content"]
    tool = next(op for op in OPERATIONS if op.name == "create_comment").input_schema["properties"]["content"]
    assert {k: v for k, v in schema.items() if k != "description"} == {
        k: v for k, v in tool.items() if k != "description"
    }
    published = jsonschema.Draft202012Validator(schema).is_valid(text)
    rest = ready.world.post(f"/v1/posts/{A_POST}/comments", ready.key, {"content": text})
    assert (rest.status_code == 201) is published, (rest.status_code, rest.text)
    answer = mcp.call("create_comment", {"postId": A_POST, "content": text})
    assert (not answer.get("isError")) is published, answer
    if not published:
        assert rest.json["error"]["message"] == "content must not be empty"
        assert mcp.fail("create_comment", {"postId": A_POST, "content": text})["message"] == "content must not be empty"


def test_an_empty_cursor_is_the_first_page_on_rest_and_mcp_and_in_the_schemas(ready: Ready, mcp: McpWorld) -> None:
    """``?cursor=`` (a client templating its next request) and an agent's ``"cursor": ""`` both read the
    first page, and the published schemas (the tool's and the document's) let an empty cursor through."""
    import jsonschema

    from adapters.http.openapi import document

    paths = document()["paths"]
    first = mcp.ok("list_dms", {})
    assert mcp.ok("list_dms", {"cursor": ""}) == first
    conversation = first["conversations"][0]["id"]
    thread = mcp.ok("get_dm_thread", {"conversationId": conversation})
    assert mcp.ok("get_dm_thread", {"conversationId": conversation, "cursor": ""}) == thread
    for name, path in (("list_dms", "/v1/dms"), ("get_dm_thread", "/v1/dms/{conversation_id}")):
        tool = next(op for op in OPERATIONS if op.name == name).input_schema["properties"]["cursor"]
        (published,) = [p["schema"] for p in paths[path]["get"]["parameters"] if p["name"] == "cursor"]
        for schema in (tool, published):
            assert jsonschema.Draft202012Validator(schema).is_valid("")
            assert not jsonschema.Draft202012Validator(schema).is_valid("../self")
    world, key = ready.world, ready.key
    inbox = world.get("/v1/dms", key)
    assert world.get("/v1/dms", key, query_string="cursor=").json == inbox.json
    conversation = inbox.json["conversations"][0]["id"]
    messages = world.get(f"/v1/dms/{conversation}", key)
    again = world.get(f"/v1/dms/{conversation}", key, query_string="cursor=")
    assert again.status_code == 200 and again.json == messages.json


# An optional field given blank: the core reads it as not given (``blank_as_none``), and so must the
# published schemas (the document's, which a REST client may check a body against, and the tool's, which
# the MCP endpoint itself checks arguments against: the tool refused what REST accepted, "to must not be
# empty"). (operation, REST path, arguments of the tool, the REST body).
BLANK_OPTIONALS = [
    ("create_post", FEED, {"group": "builders-club"}, {"title": "No body", "content": "", "label": " "}),
    ("create_comment", f"/v1/posts/{A_POST}/comments", {"postId": A_POST}, {"content": "Top level", "parentId": ""}),
    ("send_dm", "/v1/dms", {}, {"content": "hi", "to": "", "conversationId": None}),
]


@pytest.mark.parametrize(("tool", "path", "where", "body"), BLANK_OPTIONALS, ids=lambda value: str(value)[:20])
def test_a_blank_optional_field_is_not_given_on_rest_and_mcp_and_in_the_schemas(
    ready: Ready, mcp: McpWorld, tool: str, path: str, where: dict[str, Any], body: dict[str, Any]
) -> None:
    import jsonschema

    from adapters.http.openapi import document

    if tool == "send_dm":  # an open conversation of the seed, named beside a blank "to"
        body = {**body, "conversationId": ready.world.get("/v1/dms", ready.key).json["conversations"][0]["id"]}
    rest = ready.world.post(path, ready.key, body)
    assert rest.status_code == 201, rest.text
    if tool == "send_dm":
        ready.world.clock.advance(seconds=3600)  # past the DM pace, for the tool's send below
    answer = mcp.call(tool, {**where, **body})
    assert not answer.get("isError"), answer
    operation = next(op for op in OPERATIONS if op.name == tool)
    assert operation.http is not None
    published = document()["paths"][operation.http.path]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert jsonschema.Draft202012Validator(operation.input_schema).is_valid({**where, **body})
    assert jsonschema.Draft202012Validator(published).is_valid(body)


def test_an_empty_group_hint_is_no_hint_on_rest_and_mcp_and_in_the_schemas(ready: Ready, mcp: McpWorld) -> None:
    """An empty optional group is no group, as a query's empty value is under the commands' rule. The group
    is read outside the command, so the rule missed it: ``?group=`` answered 400 on REST, and the tools'
    optional ``group`` said "group must not be empty" for the "" an agent fills an optional argument with."""
    import jsonschema

    from adapters.http.openapi import document

    assert mcp.ok("get_post", {"postId": A_POST, "group": ""}) == mcp.ok("get_post", {"postId": A_POST})
    assert mcp.ok("list_comments", {"postId": A_POST, "group": ""}) == mcp.ok("list_comments", {"postId": A_POST})
    mcp.ok("create_comment", {"postId": A_POST, "content": "Hinted with nothing", "group": ""})
    rest = ready.world.get(f"/v1/posts/{A_POST}", ready.key, query_string="group=")
    assert rest.status_code == 200 and rest.json == ready.world.get(f"/v1/posts/{A_POST}", ready.key).json
    paths = document()["paths"]
    for name in ("get_post", "list_comments", "create_comment", "send_dm"):
        operation = next(op for op in OPERATIONS if op.name == name)
        assert operation.http is not None
        (published,) = [
            p["schema"]
            for p in paths[operation.http.path][operation.http.method.lower()]["parameters"]
            if p["name"] == "group"
        ]
        for schema in (operation.input_schema["properties"]["group"], published):
            assert jsonschema.Draft202012Validator(schema).is_valid("")
            assert not jsonschema.Draft202012Validator(schema).is_valid("../self")


def test_a_null_argument_is_not_given_on_mcp_as_in_a_rest_body(ready: Ready, mcp: McpWorld) -> None:
    """A REST body's null is a field not given (``structure_body``); the same operation's tool answered
    "parentId must be a string" — and agents send null for the optional arguments they leave out (a
    function-calling client in strict mode sends every argument, null when unused)."""
    comment = mcp.ok("create_comment", {"postId": A_POST, "content": "Null parent", "parentId": None, "group": None})
    assert comment["parentId"] is None
    rest = ready.world.post(f"/v1/posts/{A_POST}/comments", ready.key, {"content": "Null parent", "parentId": None})
    assert rest.status_code == 201 and rest.json["parentId"] is None
    feed = mcp.ok("get_feed", {"group": "builders-club", "sort": None, "since": None, "pages": None})
    assert feed == mcp.ok("get_feed", {"group": "builders-club"})
    assert mcp.ok("list_dms", {"cursor": None, "awaitingReply": None}) == mcp.ok("list_dms", {})
    # A required one given null is missing, in REST's words.
    error = mcp.fail("create_post", {"group": "builders-club", "title": None})
    assert (error["message"], error["details"]) == ("title is required", {"field": "title"})
    assert ready.world.post(FEED, ready.key, {"title": None}).json["error"]["message"] == "title is required"
    assert mcp.fail("get_group", {"group": None})["message"] == "group is required"


# Texts published on the platform as the person: a control character other than a tab or a line break is
# refused before anything is sent (a NUL is refused by many a database behind a site, and a 5xx answered to
# a write reads "it may have been done"); tabs and line breaks pass. (text, refused)
SENT_TEXTS = [
    ("nul\x00byte", True),
    ("\x1b[31mred\x1b[0m", True),
    ("bell\x07", True),
    ("form\x0cfeed", True),
    ("vertical\x0btab", True),  # a line break to str.splitlines, as form feed is: neither is typed in a post
    ("del\x7f", True),
    ("tab\tand\nlines\r\nok", False),
    ("\u00e9t\u00e9 \u2014 fine", False),
]
SENDS = [
    ("create_post", FEED, {"group": "builders-club"}, "title", {}),
    ("create_post", FEED, {"group": "builders-club"}, "content", {"title": "Titled"}),
    ("create_comment", f"/v1/posts/{A_POST}/comments", {"postId": A_POST}, "content", {}),
]


@pytest.mark.parametrize(("text", "refused"), SENT_TEXTS, ids=lambda value: repr(value)[:16])
@pytest.mark.parametrize(("tool", "path", "where", "field", "rest_of_body"), SENDS, ids=lambda v: str(v)[:16])
def test_a_control_character_in_a_published_text_is_refused_naming_the_field(
    ready: Ready,
    mcp: McpWorld,
    text: str,
    refused: bool,
    tool: str,
    path: str,
    where: dict[str, Any],
    field: str,
    rest_of_body: dict[str, Any],
) -> None:
    import jsonschema

    body = {**rest_of_body, field: text}
    rest = ready.world.post(path, ready.key, body)
    answer = mcp.call(tool, {**where, **body})
    schema = next(op for op in OPERATIONS if op.name == tool).input_schema["properties"][field]
    assert jsonschema.Draft202012Validator(schema).is_valid(text) is not refused
    if not refused:
        assert rest.status_code == 201 and not answer.get("isError"), (rest.text, answer)
        return
    message = f"{field} may not hold control characters other than tabs and line breaks"
    assert rest.status_code == 400 and rest.json["error"]["message"] == message
    assert rest.json["error"]["details"] == {"field": field}
    assert mcp.fail(tool, {**where, **body})["message"] == message
    assert ready.world.gateway.created_posts() == []


def test_a_dm_with_a_control_character_is_refused_and_not_sent(ready: Ready, mcp: McpWorld) -> None:
    conversation = ready.world.get("/v1/dms", ready.key).json["conversations"][0]["id"]
    body = {"conversationId": conversation, "content": "hi\x00"}
    rest = ready.world.post("/v1/dms", ready.key, body)
    assert rest.status_code == 400 and rest.json["error"]["details"] == {"field": "content"}
    assert mcp.fail("send_dm", body)["details"] == {"field": "content"}
    assert ready.world.gateway.sent_messages() == []


# (unknown names a client sends, what the refusal says of them): at most five repeated, each printable and
# at most 64 characters, the rest counted; the answer stays small whatever the client sent.
UNKNOWN_NAMES = [
    (["titel"], "titel", ["titel"]),
    (
        [f"f{i:04d}" for i in range(3000)],
        "f0000, f0001, f0002, f0003, f0004 and 2995 more",
        [f"f000{i}" for i in range(5)],
    ),
    (["k" * 50_000], "1 not repeated here (too long or not printable)", []),
    (["x" * 64, "y" * 65], "x" * 64 + " and 1 more", ["x" * 64]),
    (["bad\nname", "ok"], "ok and 1 more", ["ok"]),
]


@pytest.mark.parametrize(("names", "said", "listed"), UNKNOWN_NAMES, ids=lambda value: str(value)[:30])
def test_unknown_names_are_repeated_within_bounds(
    ready: Ready, mcp: McpWorld, names: list[str], said: str, listed: list[str]
) -> None:
    extra = dict.fromkeys(names, 1)
    body = ready.world.post(FEED, ready.key, {"title": "x", **extra})
    assert body.status_code == 400 and len(body.content) < 1024
    assert body.json["error"]["message"] == f"unknown field: {said}"
    assert body.json["error"]["details"]["unknown"] == listed
    tool = mcp.fail("create_post", {"group": "builders-club", "title": "x", **extra})
    assert (tool["message"], tool["details"]["unknown"]) == (f"unknown field: {said}", listed)
    from urllib.parse import urlencode

    query = ready.world.get(FEED, ready.key, query_string=urlencode(extra))
    assert query.status_code == 400 and len(query.content) < 1024
    assert query.json["error"]["message"] == f"unknown query parameter: {said}"
    assert query.json["error"]["details"] == {"unknown": listed, "allowed": ["pages", "sort", "since"]}
    assert ready.world.gateway.created_posts() == []


def test_a_tool_and_its_rest_route_build_equal_commands() -> None:
    body = {"content": "hello", "parentId": A_POST}
    assert structure_body(body, posts.NewComment) == posts.NewComment(content="hello", parent_id=A_POST)
    from_text = structure_query({"pages": "3", "since": "24h"}, feed.FeedQuery, text=True)
    from_json = structure_query({"pages": 3, "since": "24h"}, feed.FeedQuery, text=False)
    assert from_text == from_json == feed.FeedQuery(pages=3, sort="newest", since="24h")
    assert structure_query({"awaitingReply": "1"}, dms.InboxQuery, text=True) == dms.InboxQuery(awaiting_reply=True)
    # An empty cursor is the first page on both (a query string's empty value; an agent's "").
    first = dms.InboxQuery(cursor=None)
    assert structure_query({"cursor": ""}, dms.InboxQuery, text=True) == first
    assert structure_query({"cursor": ""}, dms.InboxQuery, text=False) == first
    assert structure_query({"cursor": "30"}, dms.InboxQuery, text=False) == dms.InboxQuery(cursor="30")
    with pytest.raises(InvalidRequest, match="pages must be an integer from 1 to 30"):
        structure_query({"pages": "3"}, feed.FeedQuery, text=False)  # JSON's "3" is not a number


@pytest.mark.parametrize("operation", [op for op in OPERATIONS if op.command is not None], ids=lambda op: op.name)
def test_each_command_has_exactly_the_fields_its_schema_publishes(operation: Any) -> None:
    assert operation.command is not None and attrs.has(operation.command)
    published = set(operation.body_fields()) or {arg for arg, _ in operation.query_args()} - {"group"}
    assert command_fields(operation.command) == published


# --- the management routes: the same commands, and their published bodies read from them ---------


@pytest.mark.parametrize(
    ("method", "path", "body", "message", "details"),
    [
        (
            "POST",
            "/v1/me/password",
            {"currentPassword": "x", "newPassword": "short"},
            "newPassword must have at least 10 characters",
            {"field": "newPassword"},
        ),
        ("POST", "/v1/me/password", {"currentPassword": "x"}, "newPassword is required", {"field": "newPassword"}),
        (
            "POST",
            "/v1/me/password",
            {"current_password": "x", "newPassword": "y" * 12},
            "unknown field: current_password",
            {"unknown": ["current_password"], "allowed": ["currentPassword", "newPassword"]},
        ),
        (
            "POST",
            "/v1/connections",
            {"email": "a@b.c", "password": "x", "active": "yes"},
            "active must be true or false",
            {"field": "active"},
        ),
        ("POST", "/v1/connections", {"sessionToken": 5}, "sessionToken must be a string", {"field": "sessionToken"}),
        ("POST", "/v1/keys", {"scopes": "posts:read"}, "scopes must be a list of scope names", {"field": "scopes"}),
        (
            "POST",
            "/v1/keys",
            {"scopes": ["posts:read", 3]},
            "scopes must be a list of scope names",
            {"field": "scopes"},
        ),
        ("POST", "/v1/keys", {"connectionId": ["x"]}, "connectionId must be a string", {"field": "connectionId"}),
        (
            "POST",
            "/v1/keys",
            {"name": "n" * 101},
            "name is longer than 100 characters",
            {"field": "name", "maxLength": 100},
        ),
        (
            "POST",
            "/v1/keys",
            {"scopes": ["posts:read", "root", "admin"]},
            "unknown scope: admin, root",
            {"field": "scopes", "unknown": ["admin", "root"], "allowed": list(ALL_SCOPES)},
        ),
        (
            "POST",
            "/v1/keys",
            {"scopes": []},
            "scopes must name at least one scope",
            {"field": "scopes", "allowed": list(ALL_SCOPES)},
        ),
    ],
)
def test_a_bad_management_body_is_refused_naming_the_field_as_sent(
    ready: Ready, method: str, path: str, body: Any, message: str, details: dict[str, Any]
) -> None:
    answer = ready.world.client.simulate_request(method, path, json=body, headers=ready.browser.headers())
    assert answer.status_code == 400, answer.text
    assert answer.json["error"] == {"code": "invalid_request", "message": message, "details": details}


def test_the_published_management_bodies_are_the_commands() -> None:
    from adapters.http.openapi import document
    from community_api import account_lifecycle, accounts, keys
    from community_api.scopes import ALL_SCOPES

    paths = document()["paths"]

    def body(method: str, path: str) -> dict[str, Any]:
        return dict(paths[path][method]["requestBody"]["content"]["application/json"]["schema"])

    change = body("post", "/v1/me/password")
    assert change["properties"]["newPassword"]["minLength"] == accounts.MIN_PASSWORD
    assert change["properties"]["currentPassword"]["maxLength"] == accounts.MAX_PASSWORD
    assert set(change["required"]) == command_fields(account_lifecycle.PasswordChange)
    assert body("post", "/v1/accounts")["properties"]["password"]["minLength"] == accounts.MIN_PASSWORD
    assert body("post", "/v1/session")["properties"]["password"]["minLength"] == 1
    mint = body("post", "/v1/keys")
    assert mint["properties"]["scopes"]["items"]["enum"] == list(ALL_SCOPES)
    assert mint["properties"]["name"]["maxLength"] == keys.MAX_NAME_LENGTH and mint["required"] == []
    assert body("delete", "/v1/me")["required"] == ["password"]


def test_a_fault_in_a_command_is_not_blamed_on_the_caller() -> None:
    def broken(instance: object, attribute: Any, value: str) -> None:
        raise RuntimeError("a bug in a validator")

    @attrs.frozen
    class Broken:
        text: str = attrs.field(validator=broken)

    with pytest.raises(Exception, match="Broken") as raised:
        structure_body({"text": "fine"}, Broken)
    assert not isinstance(raised.value, InvalidRequest)  # a 500, logged: not a 400 telling the caller to fix it


@pytest.mark.parametrize("operation", [op for op in OPERATIONS if op.command is not None], ids=lambda op: op.name)
def test_each_commands_limits_are_the_ones_its_tool_publishes(operation: Any) -> None:
    """The MCP tool's (and so OpenAPI's) schema and the command's validators say the same about each text
    field: its pattern when it has one (an id's shape), else its greatest length."""
    from adapters.commands import command_schema

    published = operation.input_schema["properties"]
    for name, checked in command_schema(operation.command)["properties"].items():
        if checked["type"] != "string":
            continue
        if "pattern" in checked:
            assert published[name]["pattern"] == checked["pattern"], name
        elif "maxLength" in checked:
            assert published[name]["maxLength"] == checked["maxLength"], name


def _calendar_texts() -> Iterator[tuple[str, bool]]:
    """Dates in the ``YYYY-MM-DD`` form around every edge of the calendar, each with whether it is a day."""
    from datetime import date

    years = [0, 1, 4, 100, 400, 1900, 1996, 2000, 2023, 2024, 2026, 2100, 2400, 9996, 9999]
    for year in years:
        for month in range(0, 14):
            for day in range(0, 33):
                try:
                    exists = bool(date(year, month, day))
                except ValueError:
                    exists = False
                yield f"{year:04d}-{month:02d}-{day:02d}", exists


def test_the_published_since_pattern_admits_exactly_the_days_of_the_calendar(ready: Ready) -> None:
    """A client (or an agent) that checks ``since`` against the document sends no date the service refuses:
    each month to its last day, 02-29 in leap years only, no year 0000. A day that is not one is refused
    saying so."""
    import jsonschema

    from adapters.http.openapi import document

    parameters = document()["paths"]["/v1/groups/{gid}/posts"]["get"]["parameters"]
    schema = next(p for p in parameters if p["name"] == "since")["schema"]
    tool = next(op for op in OPERATIONS if op.name == "get_feed").input_schema["properties"]["since"]
    assert schema["pattern"] == feed.SINCE_PATTERN and feed.SINCE_PATTERN in str(tool)
    validator = jsonschema.Draft202012Validator(schema)
    wrong = [(text, exists) for text, exists in _calendar_texts() if validator.is_valid(text) is not exists]
    assert wrong == []
    for text in ("2026-02-29", "1900-02-29", "2026-04-31", "0000-01-01"):
        refused = ready.world.get(FEED, ready.key, params={"since": text})
        assert refused.status_code == 400
        assert refused.json["error"]["message"].endswith(f"({text} is no day of the calendar)")
    assert ready.world.get(FEED, ready.key, params={"since": "2024-02-29"}).status_code == 200


@attrs.frozen
class _Ruled:
    """One field per rule of ``community_api.commands``, with small limits."""

    short: str | None = attrs.field(default=None, validator=at_most(3))
    long: str | None = attrs.field(default=None, validator=at_least(2))
    digits: str | None = attrs.field(default=None, validator=Matches("^[0-9]+$", "must be digits"))
    label: str | None = attrs.field(default=None, validator=label_name)


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("short", "abc", None),  # at the limit: allowed
        ("short", "abcd", "is longer than 3 characters"),
        ("long", "ab", None),
        ("long", "a", "must have at least 2 characters"),
        ("digits", "12", None),
        ("digits", "12a", "must be digits"),
        ("digits", "12\n", "must be digits"),  # the whole value: a pattern's $ does not stop before a newline
        ("label", "l" * 100, None),
        ("label", "l" * 101, "must be a label id or a label name of at most 100 readable characters"),
        ("label", "Help\u202e", "must be a label id or a label name of at most 100 readable characters"),
    ],
    ids=lambda value: repr(value)[:20],
)
def test_each_rule_holds_at_its_bound(field: str, value: str, problem: str | None) -> None:
    if problem is None:
        assert getattr(_Ruled(**{field: value}), field) == value
        return
    with pytest.raises(BadField) as refused:
        _Ruled(**{field: value})
    assert (refused.value.field, refused.value.problem) == (field, problem)
