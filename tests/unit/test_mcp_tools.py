"""Every MCP tool against the fakes: it answers what the REST route answers (the same use case), and each
failure is a tool error carrying our error body."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client

from adapters.commands import command_fields
from adapters.mcp.server import INSTRUCTIONS
from adapters.version import service_version
from community_api.commands import optional_pattern
from community_api.errors import ConnectionExpired, PlatformUnavailable
from community_api.idempotency import KEY_PATTERN, KEY_PROBLEM
from community_api.platform_ids import GROUP_PATTERN, GROUP_PROBLEM, ID_PROBLEM, PLATFORM_ID_PATTERN
from fakes.platform_seed import platform_id
from tests.unit.test_mcp_world import DM_GAP, LEGACY_VERSION, McpWorld

FEED = "builders-club"


@pytest.fixture
def world() -> Iterator[McpWorld]:
    built = McpWorld.build()
    yield built
    built.close()


def post_with_comments(world: McpWorld) -> dict[str, Any]:
    posts = world.ok("get_feed", {"group": FEED, "pages": 3})["posts"]
    return next(p for p in posts if p["commentCount"] >= 3)


def other_member(world: McpWorld) -> dict[str, Any]:
    inbox = world.ok("list_dms", {})["conversations"]
    return next(c for c in inbox if c["with"]["handle"] == "bob")


# --- reads: the same answer as REST -------------------------------------------------------------


def test_whoami_groups_and_group_answer_as_rest(world: McpWorld) -> None:
    assert (
        world.ok("whoami", {})
        == world.rest("/v1/whoami")
        == {
            "id": world.alice.platform_user_id,
            "handle": "alice",
            "name": world.alice.name,
        }
    )
    assert world.ok("list_groups", {}) == world.rest("/v1/groups")
    assert world.ok("get_group", {"group": FEED}) == world.rest(f"/v1/groups/{FEED}")


def test_feed_answers_as_rest_for_the_same_query(world: McpWorld) -> None:
    args = {"group": FEED, "pages": 2, "sort": "best-1y", "since": "2026-01-01"}
    answer = world.ok("get_feed", args)
    assert answer == world.rest(f"/v1/groups/{FEED}/posts", pages="2", sort="best-1y", since="2026-01-01")
    assert answer["pagesRequested"] == 2 and answer["sort"] == "best-1y" and answer["posts"]
    default = world.ok("get_feed", {"group": FEED})
    assert (default["pagesRequested"], default["sort"], default["since"]) == (1, "newest", None)


def test_an_integer_written_with_a_zero_fraction_is_that_integer(world: McpWorld) -> None:
    """JSON Schema counts 2.0 as an integer (2020-12, "type": "integer"), so a client that checks its
    arguments against the tool's schema sends it: the tool must read it as 2, not refuse it."""
    answer = world.ok("get_feed", {"group": FEED, "pages": 2.0})
    assert answer == world.ok("get_feed", {"group": FEED, "pages": 2}) and answer["pagesRequested"] == 2
    assert world.fail("get_feed", {"group": FEED, "pages": 2.5})["message"] == "pages must be an integer from 1 to 30"
    # Another argument refused: the error is about it, not about the 2.0.
    assert world.fail("get_feed", {"group": FEED, "pages": 2.0, "sort": "top"})["details"]["field"] == "sort"


def test_post_and_comments_answer_as_rest(world: McpWorld) -> None:
    post = post_with_comments(world)
    detail = world.ok("get_post", {"postId": post["id"]})
    assert detail == world.rest(f"/v1/posts/{post['id']}")
    assert sum(c["parentId"] is None for c in detail["comments"]) == post["commentCount"]  # top-level ones
    comments = world.ok("list_comments", {"postId": post["id"], "group": FEED})
    assert comments == world.rest(f"/v1/posts/{post['id']}/comments") == {"comments": detail["comments"]}


def test_inbox_and_thread_answer_as_rest(world: McpWorld) -> None:
    first = world.ok("list_dms", {})
    assert first == world.rest("/v1/dms") and first["nextCursor"] == "30"
    assert world.ok("list_dms", {"cursor": "30"}) == world.rest("/v1/dms", cursor="30")
    awaiting = world.ok("list_dms", {"awaitingReply": True})
    assert awaiting == world.rest("/v1/dms", awaitingReply="true")
    bob = other_member(world)
    thread = world.ok("get_dm_thread", {"conversationId": bob["id"]})
    assert thread == world.rest(f"/v1/dms/{bob['id']}")
    older = world.ok("get_dm_thread", {"conversationId": bob["id"], "cursor": thread["nextCursor"]})
    assert older["messages"][-1]["createdAt"] <= thread["messages"][0]["createdAt"]


def test_a_member_the_platform_names_without_a_handle_answers_as_rest(world: McpWorld) -> None:
    """The platform promises a conversation's member only by name beside their id (PLATFORM.md): an empty
    handle is a valid answer of both transports, the tool's output schema included."""
    world.gateway.members_without_handle.add("alice")
    inbox = world.ok("list_dms", {})
    assert inbox == world.rest("/v1/dms")
    members = [c["with"] for c in inbox["conversations"]]
    assert members and all(m["handle"] == "" and m["id"] and m["name"] for m in members)
    conversation = inbox["conversations"][0]
    thread = world.ok("get_dm_thread", {"conversationId": conversation["id"]})
    assert thread == world.rest(f"/v1/dms/{conversation['id']}")
    assert thread["conversation"]["with"] == conversation["with"]


# --- writes ---------------------------------------------------------------------------------------


def test_create_and_delete_a_post(world: McpWorld) -> None:
    post = world.ok("create_post", {"group": FEED, "title": "Hello", "content": "First!", "label": "Wins"})
    assert post["title"] == "Hello" and post["author"] is None and post["authorId"] is None
    assert [p.id for p in world.gateway.created_posts()] == [post["id"]]
    assert world.ok("delete_post", {"postId": post["id"]}) == {"deleted": True, "postId": post["id"]}
    assert world.fail("get_post", {"postId": post["id"]})["code"] == "not_found"
    assert world.fail("delete_post", {"postId": post["id"]})["code"] == "not_found"


def test_comment_reply_and_delete(world: McpWorld) -> None:
    post = post_with_comments(world)
    comment = world.ok("create_comment", {"postId": post["id"], "content": "Nice"})
    assert comment["postId"] == post["id"] and comment["parentId"] is None
    reply = world.ok("create_comment", {"postId": post["id"], "content": "Me too", "parentId": comment["id"]})
    assert reply["parentId"] == comment["id"]
    assert world.ok("delete_comment", {"commentId": reply["id"]}) == {"deleted": True, "commentId": reply["id"]}
    ids = {c["id"] for c in world.ok("list_comments", {"postId": post["id"]})["comments"]}
    assert comment["id"] in ids and reply["id"] not in ids


def test_send_a_dm_by_recipient_and_by_conversation(world: McpWorld) -> None:
    bob = other_member(world)
    sent = world.ok("send_dm", {"to": bob["with"]["id"], "content": "Hi Bob"})
    assert sent["message"]["content"] == "Hi Bob" and sent["conversation"]["awaitingReply"] is False
    world.clock.advance(seconds=DM_GAP)
    again = world.ok("send_dm", {"conversationId": sent["conversation"]["id"], "content": "Again"})
    assert again["conversation"]["id"] == sent["conversation"]["id"]
    assert [m.content for m in world.gateway.sent_messages()] == ["Hi Bob", "Again"]


def test_a_throttled_dm_is_a_tool_error_with_the_delay(world: McpWorld) -> None:
    bob = other_member(world)
    world.ok("send_dm", {"conversationId": bob["id"], "content": "one"})
    world.clock.advance(seconds=7)
    error = world.fail("send_dm", {"conversationId": bob["id"], "content": "two"})
    assert error["code"] == "rate_limited" and error["details"]["retryAfter"] == DM_GAP - 7
    assert "30" in error["message"]
    assert [m.content for m in world.gateway.sent_messages()] == ["one"]
    world.clock.advance(seconds=DM_GAP - 7)
    world.ok("send_dm", {"conversationId": bob["id"], "content": "two"})


def test_idempotency_key_acts_once(world: McpWorld) -> None:
    args = {"group": FEED, "title": "Once", "idempotencyKey": "retry-1"}
    first, second = world.ok("create_post", args), world.ok("create_post", args)
    assert first == second and len(world.gateway.created_posts()) == 1
    other = world.fail("create_post", {**args, "title": "Different"})
    assert other["code"] == "conflict"
    unknown = PlatformUnavailable("the platform did not answer in time")
    world.gateway.fail_next("create_post", unknown)
    kept = {"group": FEED, "title": "Maybe", "idempotencyKey": "retry-2"}
    assert world.fail("create_post", kept)["code"] == "platform_unavailable"
    # The platform may have acted: the retry gets the same answer rather than a second post.
    assert world.fail("create_post", kept)["code"] == "platform_unavailable"
    assert len(world.gateway.created_posts()) == 1


def test_a_retry_with_its_arguments_in_another_order_is_the_same_call(world: McpWorld) -> None:
    """A JSON object's members have no order: an agent that rebuilds its arguments for a retry may write them
    in another one, and is answered the post it made, not a conflict."""
    first = world.ok("create_post", {"group": FEED, "title": "Ordered", "content": "x", "idempotencyKey": "any-order"})
    again = world.ok("create_post", {"idempotencyKey": "any-order", "content": "x", "title": "Ordered", "group": FEED})
    assert again == first and len(world.gateway.created_posts()) == 1


def test_a_call_without_arguments_is_a_call_with_none(world: McpWorld) -> None:
    """``arguments`` is optional in a tools/call request: a tool that takes none is called without it."""
    answer = world.rpc("tools/call", {"name": "whoami"})
    assert answer.status_code == 200 and answer.json["result"]["isError"] is False
    assert answer.json["result"]["structuredContent"]["handle"] == "alice"


def test_initialize_names_the_service_and_tells_an_agent_how_to_use_it(world: McpWorld) -> None:
    hello = {"protocolVersion": LEGACY_VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    result = world.rpc("initialize", hello).json["result"]
    assert result["serverInfo"] == {
        "name": "community-api",
        "title": "Community Data API",
        "version": service_version(),
    }
    assert result["instructions"] == INSTRUCTIONS


def test_an_idempotency_key_used_again_on_another_connection_is_a_different_call(world: McpWorld) -> None:
    """The key is the account's, the post is a connection's: the same arguments on bob's connection are not
    a retry of alice's post. Answering alice's post back would tell the agent that bob had posted it."""
    args = {"group": FEED, "title": "Mine", "idempotencyKey": "per-connection"}
    alices = world.ok("create_post", args)
    bobs = world.fail("create_post", args, headers={"X-Community-Connection": world.bob.id})
    assert bobs["code"] == "conflict" and bobs["details"] == {"reason": "different_request"}
    assert [post.id for post in world.gateway.created_posts()] == [alices["id"]]


def test_a_call_with_no_browser_free_says_when_to_call_again(world: McpWorld) -> None:
    world.gateway.fail_next(
        "feed_pages", PlatformUnavailable("no browser is free: all 4 browsers are busy", retryAfter=5)
    )
    refused = world.fail("get_feed", {"group": FEED})
    assert refused["code"] == "platform_unavailable" and refused["details"] == {"retryAfter": 5}


# --- refusals -------------------------------------------------------------------------------------

BAD_ARGUMENTS = [
    ("get_feed", {"group": FEED, "pages": 0}, "pages"),
    ("get_feed", {"group": FEED, "pages": 31}, "pages"),
    ("get_feed", {"group": FEED, "pages": "2"}, "pages"),
    ("get_feed", {"group": FEED, "pages": True}, "pages"),
    ("get_feed", {"group": FEED, "sort": "oldest"}, "sort"),
    ("get_feed", {"group": FEED, "since": "yesterday"}, "since"),
    ("get_feed", {"group": FEED, "since": "2026-13-45"}, "since"),  # the pattern holds; the core refuses
    ("get_feed", {"group": FEED, "page": 2}, "page"),
    ("get_feed", {}, "group"),
    ("get_group", {"group": ""}, "group"),
    ("create_post", {"group": FEED}, "title"),
    ("create_post", {"group": FEED, "title": "x" * 301}, "title"),
    ("create_post", {"group": FEED, "title": "x", "label": "Nope"}, "label"),
    ("create_comment", {"postId": platform_id("pst-00001"), "content": 3}, "content"),
    ("create_comment", {"postId": "../self", "content": "hi"}, "postId"),
    ("list_dms", {"awaitingReply": "yes"}, "awaitingReply"),
    ("list_dms", {"cursor": "abc"}, "cursor"),
    ("send_dm", {"content": "hi"}, None),
    ("send_dm", {"to": platform_id("usr-bob"), "conversationId": platform_id("cnv-00001"), "content": "hi"}, None),
    ("send_dm", {"to": platform_id("usr-bob"), "content": ""}, "content"),
    ("send_dm", {"to": platform_id("usr-bob"), "content": "hi", "idempotencyKey": "has space"}, "idempotencyKey"),
    ("send_dm", {"to": platform_id("usr-bob"), "content": "hi", "idempotencyKey": "a,b"}, "idempotencyKey"),
    # A regular expression's "$" also matches before a final newline: the key is held to the whole value.
    ("send_dm", {"to": platform_id("usr-bob"), "content": "hi", "idempotencyKey": "retry-1\n"}, "idempotencyKey"),
    ("get_post", {"postId": platform_id("pst-00001") + "\n"}, "postId"),
    ("get_feed", {"group": "builders-club\n"}, "group"),
]


@pytest.mark.parametrize(("tool", "args", "field"), BAD_ARGUMENTS)
def test_bad_arguments_are_invalid_request_tool_errors(
    world: McpWorld, tool: str, args: dict[str, Any], field: str | None
) -> None:
    error = world.fail(tool, args)
    assert error["code"] == "invalid_request", error
    details = error["details"]
    if field is not None:
        assert field in error["message"], error
        assert field in (details.get("field"), details.get("parameter")) or details.get("unknown") == [field]
    else:
        assert error["message"] == "give exactly one of to and conversationId"
        assert details == {"fields": ["to", "conversationId"]}
    assert len(error["message"]) < 150  # a refused value is never echoed back
    assert world.gateway.created_posts() == [] and world.gateway.sent_messages() == []


# The same mistake through REST and through a tool: (tool, arguments, REST method, path, query, body).
SAME_MISTAKES = [
    (
        "get_feed",
        {"group": FEED, "since": "yesterday"},
        "GET",
        f"/v1/groups/{FEED}/posts",
        {"since": "yesterday"},
        None,
    ),
    (
        "get_feed",
        {"group": FEED, "since": "2026-02-30"},
        "GET",
        f"/v1/groups/{FEED}/posts",
        {"since": "2026-02-30"},
        None,
    ),
    ("get_feed", {"group": FEED, "pages": 31}, "GET", f"/v1/groups/{FEED}/posts", {"pages": "31"}, None),
    ("get_feed", {"group": FEED, "sort": "top"}, "GET", f"/v1/groups/{FEED}/posts", {"sort": "top"}, None),
    ("get_feed", {"group": FEED, "pages": "2"}, "GET", f"/v1/groups/{FEED}/posts", {"pages": "abc"}, None),
    ("list_dms", {"cursor": "abc"}, "GET", "/v1/dms", {"cursor": "abc"}, None),
    ("list_dms", {"awaitingReply": "yes"}, "GET", "/v1/dms", {"awaitingReply": "yes"}, None),
    (
        "get_dm_thread",
        {"conversationId": "{convo}", "cursor": "../x"},
        "GET",
        "/v1/dms/{convo}",
        {"cursor": "../x"},
        None,
    ),
    (
        "get_post",
        {"postId": "{post}", "group": "Builders Club"},
        "GET",
        "/v1/posts/{post}",
        {"group": "Builders Club"},
        None,
    ),
    (
        "create_comment",
        {"postId": "{post}", "content": "hi", "parentId": "../x"},
        "POST",
        "/v1/posts/{post}/comments",
        None,
        {"content": "hi", "parentId": "../x"},
    ),
    (
        "create_post",
        {"group": FEED, "title": "t", "label": "a\u202eb"},
        "POST",
        f"/v1/groups/{FEED}/posts",
        None,
        {"title": "t", "label": "a\u202eb"},
    ),
    (
        "create_post",
        {"group": FEED, "title": "t", "label": "x" * 101},
        "POST",
        f"/v1/groups/{FEED}/posts",
        None,
        {"title": "t", "label": "x" * 101},
    ),
    ("send_dm", {"to": "../self", "content": "hi"}, "POST", "/v1/dms", None, {"to": "../self", "content": "hi"}),
    (
        "send_dm",
        {"to": "{post}", "content": "hi", "group": "-x-"},
        "POST",
        "/v1/dms",
        {"group": "-x-"},
        {"to": "{post}", "content": "hi"},
    ),
]


@pytest.mark.parametrize(("tool", "args", "method", "path", "params", "body"), SAME_MISTAKES)
def test_a_tool_refuses_a_value_in_the_words_rest_uses(
    world: McpWorld,
    tool: str,
    args: dict[str, Any],
    method: str,
    path: str,
    params: dict[str, str] | None,
    body: dict[str, Any] | None,
) -> None:
    """An agent is told what a value must be as a REST client is ("since must be 24h, 7d or a date
    YYYY-MM-DD"), not the pattern that says it; and a tool's argument is always named in details.field."""
    ids = {"{post}": post_with_comments(world)["id"], "{convo}": other_member(world)["id"]}

    def filled(value: Any) -> Any:
        if isinstance(value, dict):
            return {name: filled(item) for name, item in value.items()}
        return ids.get(value, value) if isinstance(value, str) else value

    for placeholder, real in ids.items():
        path = path.replace(placeholder, real)
    headers = {"Authorization": f"Bearer {world.all_key.secret}"}
    rest = world.client.simulate_request(method, path, headers=headers, params=params, json=filled(body))
    assert rest.status_code == 400, rest.text
    error = world.fail(tool, filled(args))
    assert error["message"] == rest.json["error"]["message"]
    assert "must match" not in error["message"]
    named = rest.json["error"]["details"]
    assert error["details"]["field"] == named.get("field", named.get("parameter"))
    assert "parameter" not in error["details"]
    assert world.gateway.created_posts() == [] and world.gateway.sent_messages() == []


def test_every_pattern_a_tool_publishes_is_refused_in_the_cores_words() -> None:
    """A pattern the core does not check itself (a path id, the group, the idempotency key) has the
    core's sentence, so no refusal quotes a regular expression at an agent."""
    from adapters.mcp.arguments import PATTERN_PROBLEMS
    from adapters.operations import OPERATIONS
    from community_api.commands import FILLED_PATTERN

    for operation in OPERATIONS:
        fields = command_fields(operation.command) if operation.command else frozenset()
        for name, schema in operation.input_schema["properties"].items():
            pattern = schema.get("pattern")
            if pattern is not None and name not in fields:
                assert pattern in PATTERN_PROBLEMS or pattern == FILLED_PATTERN, (operation.name, name)


def test_an_idempotency_key_is_refused_in_the_words_of_the_header(world: McpWorld) -> None:
    error = world.fail("send_dm", {"to": platform_id("usr-bob"), "content": "hi", "idempotencyKey": "has space"})
    assert error["message"] == "idempotencyKey must be 1 to 255 visible ASCII characters, without a comma"
    assert error["details"]["field"] == "idempotencyKey"


A_POST = "a" * 32  # well-formed, where another argument is the one refused


@pytest.mark.parametrize(
    ("tool", "args", "message", "details"),
    [
        ("get_post", {"postId": ""}, "postId must not be empty", {"field": "postId"}),
        ("get_post", {"postId": "a" * 33}, "postId is longer than 32 characters", {"field": "postId", "maxLength": 32}),
        ("get_post", {"postId": "../x"}, f"postId {ID_PROBLEM}", {"field": "postId", "pattern": PLATFORM_ID_PATTERN}),
        (
            "delete_comment",
            {"commentId": "X" * 32},
            f"commentId {ID_PROBLEM}",
            {"field": "commentId", "pattern": PLATFORM_ID_PATTERN},
        ),
        (
            "get_dm_thread",
            {"conversationId": "1e3"},
            f"conversationId {ID_PROBLEM}",
            {"field": "conversationId", "pattern": PLATFORM_ID_PATTERN},
        ),
        (
            "get_group",
            {"group": "Builders Club"},
            f"group {GROUP_PROBLEM}",
            {"field": "group", "pattern": GROUP_PATTERN},
        ),
        (
            "get_group",
            {"group": "x" * 101},
            "group is longer than 100 characters",
            {"field": "group", "maxLength": 100},
        ),
        (
            "get_post",
            {"postId": A_POST, "group": "-x-"},
            f"group {GROUP_PROBLEM}",
            {"field": "group", "pattern": optional_pattern(GROUP_PATTERN)},
        ),
        (
            "send_dm",
            {"to": A_POST, "content": "hi", "idempotencyKey": "a,b"},
            f"idempotencyKey {KEY_PROBLEM}",
            {"field": "idempotencyKey", "pattern": KEY_PATTERN},
        ),
    ],
)
def test_a_value_the_core_does_not_structure_is_refused_with_the_rule_it_breaks(
    world: McpWorld, tool: str, args: dict[str, Any], message: str, details: dict[str, Any]
) -> None:
    """A path id, the group or the idempotency key is held to the tool's published schema: the refusal
    names the field and the rule from that schema (its pattern, its length) that the value breaks, so a
    client can check the next value itself; nothing reaches the platform."""
    assert world.fail(tool, args) == {"code": "invalid_request", "message": message, "details": details}
    assert world.gateway.created_posts() == [] and world.gateway.sent_messages() == []


@pytest.mark.parametrize(
    ("tool", "args", "field"),
    [
        ("get_post", {"postId": 5}, "postId"),
        ("get_group", {"group": 7}, "group"),
        ("get_feed", {"group": ["builders-club"]}, "group"),
        ("send_dm", {"to": 5, "content": "hi"}, "to"),
        ("list_dms", {"cursor": 30}, "cursor"),
        ("create_post", {"group": FEED, "title": "x", "idempotencyKey": 5}, "idempotencyKey"),
    ],
)
def test_a_value_of_the_wrong_type_the_core_does_not_read_is_named_with_its_type(
    world: McpWorld, tool: str, args: dict[str, Any], field: str
) -> None:
    """Path ids, the group, the cursor and the idempotency key are checked against the tool's schema before
    the core sees them: a number where a string belongs is said so, naming the field, never the value."""
    error = world.fail(tool, args)
    assert error == {"code": "invalid_request", "message": f"{field} must be a string", "details": {"field": field}}


def test_arguments_of_the_wrong_shape_never_give_a_500(world: McpWorld) -> None:
    for params in ({"name": "whoami", "arguments": [1]}, {"name": 3}, {}):
        result = world.rpc("tools/call", params)
        assert result.status_code < 500 and "error" in result.json, result.text
    # A typo is mended from the answer alone: it names every tool there is.
    assert world.fail("send_dms", {}) == {
        "code": "not_found",
        "message": "no tool named send_dms",
        "details": {"allowed": sorted(tool["name"] for tool in world.rpc("tools/list", {}).json["result"]["tools"])},
    }
    for name in ("x" * 100_000, "who\nami\u202e"):  # never repeated: a transcript would carry it
        error = world.fail(name, {})
        assert (error["code"], error["message"]) == ("not_found", "no such tool")


def test_each_tool_tells_an_agent_what_calling_it_does(world: McpWorld) -> None:
    """The annotations a client reads to decide whether to ask the person first: reads change nothing;
    deletes are destructive (and idempotent: deleting again changes nothing more); posting, commenting and
    sending are not idempotent (called twice, they act twice) nor destructive; every tool reaches the
    platform, a world outside the service."""
    tools = world.rpc("tools/list", {}).json["result"]["tools"]
    hints = {
        tool["name"]: tuple(
            tool["annotations"].get(hint) for hint in ("readOnlyHint", "destructiveHint", "idempotentHint")
        )
        for tool in tools
    }
    reads = ("whoami", "list_groups", "get_group", "get_feed", "get_post", "list_comments", "list_dms")
    assert hints == {
        **dict.fromkeys((*reads, "get_dm_thread"), (True, None, None)),
        **dict.fromkeys(("create_post", "create_comment", "send_dm"), (False, False, False)),
        **dict.fromkeys(("delete_post", "delete_comment"), (False, True, True)),
    }
    assert all(tool["annotations"]["openWorldHint"] is True for tool in tools)
    assert all(tool["annotations"]["title"] for tool in tools)


def test_a_tool_outside_the_keys_scopes_is_refused_naming_the_scope(world: McpWorld) -> None:
    for tool, args, scope in [
        ("create_post", {"group": FEED, "title": "x"}, "posts:write"),
        ("delete_comment", {"commentId": "c"}, "comments:write"),
        ("list_dms", {}, "dms:read"),
        ("send_dm", {"to": platform_id("usr-bob"), "content": "hi"}, "dms:write"),
    ]:
        error = world.fail(tool, args, key=world.read_key)
        assert error["code"] == "forbidden" and scope in error["message"]
        assert error["details"]["requiredScope"] == scope
    assert world.gateway.created_posts() == [] and world.gateway.sent_messages() == []


def test_connection_header_and_bound_keys_behave_as_on_rest(world: McpWorld) -> None:
    header = {"X-Community-Connection": world.bob.id}
    assert world.ok("whoami", {}, headers=header)["handle"] == "bob"
    assert world.ok("whoami", {}, key=world.bound_key)["handle"] == "alice"
    same = {"X-Community-Connection": world.alice.id}
    assert world.ok("whoami", {}, key=world.bound_key, headers=same)["handle"] == "alice"
    mismatch = world.fail("whoami", {}, key=world.bound_key, headers=header)
    assert mismatch["code"] == "connection_mismatch"
    assert mismatch["details"]["boundConnectionId"] == world.alice.id
    carol = platform_id("usr-carol")
    refused = world.fail("send_dm", {"to": carol, "content": "hi"}, key=world.bound_key, headers=header)
    assert refused["code"] == "connection_mismatch"
    assert world.fail("whoami", {}, headers={"X-Community-Connection": "con_other"})["code"] == "not_found"
    assert world.gateway.sent_messages() == []


def test_platform_failures_are_tool_errors(world: McpWorld) -> None:
    world.gateway.fail_next("whoami", PlatformUnavailable("the platform did not answer in time"))
    assert world.fail("whoami", {})["code"] == "platform_unavailable"
    world.gateway.fail_next("list_groups", ConnectionExpired("session expired"))
    assert world.fail("list_groups", {})["code"] == "connection_expired"
    # The connection is now marked expired: the next call answers so at once.
    assert world.fail("whoami", {})["code"] == "connection_expired"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_official_client_calls_tools_and_validates_their_output(world: McpWorld, mode: str) -> None:
    async def session(client: Client) -> None:
        me = await client.call_tool("whoami", {})
        assert me.is_error is False and me.structured_content == world.rest("/v1/whoami")
        feed = await client.call_tool("get_feed", {"group": FEED, "pages": 2})
        assert feed.structured_content is not None and len(feed.structured_content["posts"]) > 30
        bad = await client.call_tool("get_feed", {"group": FEED, "pages": 99})
        assert bad.is_error is True and "invalid_request" in bad.content[0].text  # type: ignore[union-attr]
        post = await client.call_tool("create_post", {"group": FEED, "title": f"via {mode}"})
        assert post.structured_content is not None and post.structured_content["title"] == f"via {mode}"

    world.with_client(world.all_key, mode, session)


def test_past_the_write_pace_a_write_tool_is_a_tool_error_with_the_wait(world: McpWorld) -> None:
    """An agent in a loop of writes meets the same pace as a script: 20 platform writes a minute, then a
    tool error naming the reason and the seconds to wait, with nothing created."""
    post = world.ok("get_feed", {"group": "builders-club"})["posts"][0]
    for n in range(20):
        world.ok("create_comment", {"postId": post["id"], "content": f"comment {n}"})
    before = len(world.gateway.created_comments())
    world.clock.advance(seconds=0.5)  # the 20 writes are half a second old: they leave the window in 59.5 s
    error = world.fail("create_comment", {"postId": post["id"], "content": "one too many"})
    assert error["code"] == "rate_limited" and error["details"]["reason"] == "write_pace"
    assert error["details"]["retryAfter"] == 60 and "20 platform writes a minute" in error["message"]
    assert len(world.gateway.created_comments()) == before
    assert world.ok("get_post", {"postId": post["id"]})["post"]["id"] == post["id"]  # reads go on
    world.clock.advance(seconds=60)
    world.ok("create_comment", {"postId": post["id"], "content": "later"})
