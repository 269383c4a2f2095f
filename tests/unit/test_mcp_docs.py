"""``docs/mcp.md``: its configuration snippets parse, point at ``/v1/mcp`` and send the key as a Bearer
header; the tool table names exactly the tools the server has."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from adapters.operations import OPERATIONS_BY_NAME

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "mcp.md"
README = ROOT / "README.md"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks(language: str, doc: Path = README) -> list[str]:
    """The snippets a user copies: the README carries the client configurations."""
    return [body for lang, body in FENCE.findall(doc.read_text()) if lang == language]


def servers(config: dict[str, Any]) -> list[dict[str, Any]]:
    """The server entries of a client configuration, whatever the client calls the table."""
    for table in ("mcpServers", "mcp_servers", "servers"):
        if table in config:
            return list(config[table].values())
    raise AssertionError(f"no server table in {sorted(config)}")


def check_entry(entry: dict[str, Any]) -> None:
    assert urlsplit(entry["url"]).path == "/v1/mcp"
    headers = entry.get("headers") or entry.get("http_headers")
    assert headers is not None, entry
    assert re.fullmatch(r"Bearer cda_\S+", headers["Authorization"])


def test_desktop_agent_snippet_is_json_with_url_and_bearer_header() -> None:
    found = blocks("json")
    assert found
    for body in found:
        for entry in servers(json.loads(body)):
            check_entry(entry)


def test_command_line_agent_snippet_is_toml_with_url_and_bearer_header() -> None:
    found = blocks("toml")
    assert found
    for body in found:
        for entry in servers(tomllib.loads(body)):
            check_entry(entry)


def test_python_snippet_compiles_and_uses_the_endpoint() -> None:
    (body,) = blocks("python", DOC)
    compile(body, "docs/mcp.md", "exec")
    assert "/v1/mcp" in body and '"Authorization": "Bearer ' in body


def test_tool_table_lists_every_tool() -> None:
    documented = set(re.findall(r"`([a-z_]+)`", DOC.read_text())) & set(OPERATIONS_BY_NAME)
    assert documented == set(OPERATIONS_BY_NAME)
