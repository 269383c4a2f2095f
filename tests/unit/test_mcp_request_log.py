"""An MCP request's log lines tell an operator what REST's tell: its request line names the connection it
acted as and the tool it called, and a tool call that failed on the platform, or on a fault of ours, gets
the error line with its cause — although the HTTP answer is 200, carrying a tool error."""

from __future__ import annotations

import errno
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from community_api.errors import PlatformUnavailable
from tests.unit.test_mcp_world import McpWorld


@pytest.fixture
def world() -> Iterator[McpWorld]:
    built = McpWorld.build()
    yield built
    built.close()


def lines(caplog: pytest.LogCaptureFixture, logger: str) -> list[dict[str, Any]]:
    return [json.loads(record.getMessage()) for record in caplog.records if record.name == logger]


def test_the_request_line_names_the_tool_and_the_connection(world: McpWorld, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    world.ok("whoami", {}, headers={"X-Request-Id": "mcp-1"})
    [line] = lines(caplog, "community_api.requests")
    assert line["requestId"] == "mcp-1" and line["route"] == "/v1/mcp" and line["status"] == 200
    assert line["keyId"] == world.all_key.key.id
    assert line["connectionId"] == world.alice.id and line["tool"] == "whoami"
    assert lines(caplog, "community_api.errors") == []


def test_a_made_up_tool_name_is_not_written(world: McpWorld, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    world.fail("who\nami" * 1000, {})
    [line] = lines(caplog, "community_api.requests")
    assert line["tool"] == "unknown"


def test_a_tool_call_failed_by_the_platform_gets_the_error_line(
    world: McpWorld, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    error = PlatformUnavailable("the platform did not answer in 20 s")
    error.__cause__ = TimeoutError("script timeout after 20000 ms")
    world.gateway.fail_next("whoami", error)
    assert world.fail("whoami", {}, headers={"X-Request-Id": "mcp-2"})["code"] == "platform_unavailable"
    [line] = lines(caplog, "community_api.errors")
    assert line["requestId"] == "mcp-2" and line["route"] == "/v1/mcp" and line["tool"] == "whoami"
    assert line["status"] == 503 and line["code"] == "platform_unavailable" and line["viaPlatform"] is True
    assert line["cause"] == "TimeoutError: script timeout after 20000 ms"


def test_a_bug_in_a_tool_call_gets_the_error_line_and_shows_nothing_of_it(
    world: McpWorld, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    world.gateway.fail_next("whoami", KeyError("secret-internal-name"))
    error = world.fail("whoami", {}, headers={"X-Request-Id": "mcp-3"})
    assert error["code"] == "internal_error" and "secret-internal-name" not in json.dumps(error)
    [line] = lines(caplog, "community_api.errors")
    assert line["requestId"] == "mcp-3" and line["tool"] == "whoami" and line["status"] == 500
    assert line["cause"] == "KeyError: 'secret-internal-name'"
    # The traceback goes to the log, as REST's for its 500s: the one place a bug's whereabouts are kept.
    [traced] = [record for record in caplog.records if record.exc_info]
    assert traced.exc_info is not None and traced.exc_info[0] is KeyError


def test_a_tool_call_the_storage_failed_gets_the_error_line(world: McpWorld, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    world.gateway.fail_next("whoami", OSError(errno.ENOSPC, "No space left on device"))
    error = world.fail("whoami", {}, headers={"X-Request-Id": "mcp-4"})
    assert error["code"] == "service_unavailable" and error["details"] == {"retryAfter": 30}
    [line] = lines(caplog, "community_api.errors")
    assert line["requestId"] == "mcp-4" and line["tool"] == "whoami" and line["status"] == 503
    assert line["code"] == "service_unavailable" and line["message"] == error["message"]
    assert line["cause"] == "OSError: [Errno 28] No space left on device"


def test_a_refused_argument_gets_no_error_line(world: McpWorld, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    world.fail("get_feed", {"group": "builders-club", "pages": 0})
    assert lines(caplog, "community_api.errors") == []


def test_a_create_whose_outcome_is_unknown_gets_the_error_line(
    world: McpWorld, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    world.gateway.fail_next("create_post", PlatformUnavailable("the platform did not answer in 20 s"))
    error = world.fail("create_post", {"group": "builders-club", "title": "t", "idempotencyKey": "k1"})
    assert error["code"] == "platform_unavailable" and error["details"]["outcomeUnknown"] is True
    [line] = lines(caplog, "community_api.errors")
    assert line["tool"] == "create_post" and line["status"] == 503
    world.fail("create_post", {"group": "builders-club", "title": "t", "idempotencyKey": "k1"})  # replayed
    assert len(lines(caplog, "community_api.errors")) == 1  # the kept answer is not a new failure
