"""Every optional argument of every data operation given as ``null``, ``""`` or white space, and every
body field given a value of another type, through REST and through the operation's MCP tool: both take
it, or both refuse it — the same operation, the same command. The differences that are meant are listed
with their reason (``MEANT``). On session 22's first tree, 21 of
these cases failed: a blank ``to`` beside a conversation, a post's blank ``content`` and ``label``, a
blank ``parentId`` and every ``null`` were refused by the tools only."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import falcon.testing
import pytest

from adapters.operation import Operation
from adapters.operations import OPERATIONS
from fakes.platform_seed import platform_id
from tests.unit.test_mcp_world import McpWorld
from tests.unit.world_support import Ready

A_POST = platform_id("pst-00001")
CONVERSATION = "<the first conversation of the inbox>"
BASE: dict[str, dict[str, Any]] = {
    "get_feed": {"group": "builders-club"},
    "get_post": {"postId": A_POST},
    "list_comments": {"postId": A_POST},
    "create_post": {"group": "builders-club", "title": "Alike"},
    "create_comment": {"postId": A_POST, "content": "Alike"},
    "list_dms": {},
    "get_dm_thread": {"conversationId": CONVERSATION},
    "send_dm": {"content": "Alike", "conversationId": CONVERSATION},
}
# A query string cannot say which type an empty value was meant to have: REST reads ``?sort=`` as not
# given (``structure_query``), where a tool's "" is a string, which is no sort, no page count, no window
# and no truth value (each refusal says what to send). White space is a value in both, refused alike.
MEANT = {("get_feed", "sort"), ("get_feed", "pages"), ("get_feed", "since"), ("list_dms", "awaitingReply")}
CASES = [
    pytest.param(operation, name, value, id=f"{operation.name}-{name}-{value!r}")
    for operation in OPERATIONS
    if operation.name in BASE
    for name in operation.input_schema["properties"]
    if name not in operation.input_schema.get("required", ())
    for value in (None, "", "   ")
]


def _args(operation: Operation, name: str, value: Any, inbox: dict[str, Any]) -> dict[str, Any]:
    """The operation's base arguments, the conversation taken from ``inbox`` (a ``list_dms`` answer), and
    ``name`` given ``value``."""
    conversation = str(inbox["conversations"][0]["id"])
    base = {k: conversation if v == CONVERSATION else v for k, v in BASE[operation.name].items()}
    return {**base, name: value}


def _rest(ready: Ready, operation: Operation, args: dict[str, Any]) -> bool:
    """Whether REST took the call."""
    answer = _rest_answer(ready, operation, args)
    assert answer.status_code < 500, answer.text
    return answer.status_code < 400


def _rest_answer(ready: Ready, operation: Operation, args: dict[str, Any]) -> falcon.testing.Result:
    """REST's answer to the call: the arguments placed as the route places them."""
    path = operation.http.path
    for name, field in operation.path_args():
        path = path.replace("{" + field + "}", str(args[name]))
    query = "&".join(f"{param}={quote(str(args[name]))}" for name, param in operation.query_args() if name in args)
    headers = {"Idempotency-Key": args["idempotencyKey"]} if "idempotencyKey" in args else {}
    world, key = ready.world, ready.key
    if operation.http.method == "POST":
        body = {name: args[name] for name in operation.body_fields() if name in args}
        return world.post(path, key, body, query_string=query, headers=headers)
    return world.get(path, key, query_string=query)


@pytest.mark.parametrize(("operation", "name", "value"), CASES)
def test_an_optional_argument_given_null_or_empty_is_taken_alike(
    ready: Ready, mcp: McpWorld, operation: Operation, name: str, value: Any
) -> None:
    answer = mcp.call(operation.name, _args(operation, name, value, mcp.ok("list_dms", {})))
    mcp_took = not answer["isError"]
    if value is None:
        # null is not given, as a REST body's null is: the call works unless the base needed the argument
        # (send_dm's conversationId, its only recipient).
        needed = name in BASE[operation.name]
        assert mcp_took is not needed, answer
        if name in operation.body_fields():
            rest_took = _rest(
                ready, operation, _args(operation, name, value, ready.world.get("/v1/dms", ready.key).json)
            )
            assert rest_took is not needed
        return
    rest_took = _rest(ready, operation, _args(operation, name, value, ready.world.get("/v1/dms", ready.key).json))
    if value == "" and (operation.name, name) in MEANT:
        assert rest_took and not mcp_took, answer
    else:
        assert rest_took == mcp_took, (rest_took, answer)


WRONG_TYPES = [
    pytest.param(operation, name, value, id=f"{operation.name}-{name}-{value!r}")
    for operation in OPERATIONS
    if operation.name in BASE
    for name in operation.body_fields()
    for value in (7, True, ["Alike"], {"text": "Alike"})
]


@pytest.mark.parametrize(("operation", "name", "value"), WRONG_TYPES)
def test_a_body_field_of_another_type_is_refused_alike(
    ready: Ready, mcp: McpWorld, operation: Operation, name: str, value: Any
) -> None:
    """REST's body and the tool's arguments are the same JSON: a number, a truth value, a list or an object
    where text belongs is refused by both, each naming the field, and nothing is sent."""
    platform = ready.world.gateway.world
    made_before = dict(platform.counters)

    answer = mcp.call(operation.name, _args(operation, name, value, mcp.ok("list_dms", {})))
    assert answer["isError"], answer
    assert json.loads(answer["content"][0]["text"])["error"]["details"]["field"] == name, answer
    refused = _rest_answer(ready, operation, _args(operation, name, value, ready.world.get("/v1/dms", ready.key).json))
    assert refused.status_code == 400, refused.text
    assert refused.json["error"]["details"]["field"] == name, refused.text
    assert platform.counters == made_before
