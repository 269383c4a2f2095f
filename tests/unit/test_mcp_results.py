"""Tool results are built as plain dicts in their wire form (``server.ToolResult``): they must be what the
``CallToolResult`` model would dump, and pass the result schema of every protocol version we serve."""

from __future__ import annotations

import mcp_types as types
import pytest
from mcp_types import methods
from mcp_types.version import SUPPORTED_PROTOCOL_VERSIONS

from adapters.mcp.server import ToolResult, error_result, success_result

PAYLOAD = {"id": "usr-alice", "handle": "alice", "name": 'Älice "A" Andersen', "tags": [1, None, True]}


def model_dump(result: types.CallToolResult) -> ToolResult:
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


def test_a_success_is_what_the_model_dumps() -> None:
    expected = types.CallToolResult(
        content=[types.TextContent(type="text", text=success_result(PAYLOAD)["content"][0]["text"])],
        structured_content=PAYLOAD,
    )
    assert success_result(PAYLOAD) == model_dump(expected)


def test_an_error_is_what_the_model_dumps() -> None:
    result = error_result("forbidden", "no", {"requiredScope": "dms:write"})
    expected = types.CallToolResult(
        content=[types.TextContent(type="text", text=result["content"][0]["text"])], is_error=True
    )
    assert result == model_dump(expected)


@pytest.mark.parametrize("version", SUPPORTED_PROTOCOL_VERSIONS)
def test_results_pass_every_version_result_schema(version: str) -> None:
    for result in (success_result(PAYLOAD), error_result("not_found", "gone")):
        shaped = methods.serialize_server_result("tools/call", version, result)
        assert shaped["content"] == result["content"] and shaped["isError"] == result["isError"]
        assert shaped.get("structuredContent") == result.get("structuredContent")
