"""A JSON object that names one member twice is refused, on REST bodies and MCP messages alike.

RFC 8259 leaves such an object's meaning to the parser: Python's ``json`` and ``orjson`` keep the last
value, other parsers (a proxy's, a gateway's, a logging pipeline's) the first or both. A hand-written
body ``{"content": "draft", "content": "final"}`` then posts what one reader of it saw and not another, and a
request checked in front of us by a parser keeping the first would not be the request we act on. A
client that serializes a dict never sends one: refusing costs no honest client anything.
"""

from __future__ import annotations

import json
from typing import Any


class DuplicateName(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for name, _ in pairs:
        if name in seen:
            raise DuplicateName(name)
        seen.add(name)
    return dict(pairs)


def loads(raw: bytes | str) -> Any:
    """``json.loads``, raising ``DuplicateName`` (a ``ValueError``: catch it first) for an object that
    names a member twice, anywhere in ``raw``."""
    return json.loads(raw, object_pairs_hook=_pairs)


def duplicate_name(raw: bytes | str) -> str | None:
    """The first member name given twice in one object anywhere in ``raw`` (valid JSON), else None."""
    try:
        loads(raw)
    except DuplicateName as duplicate:
        return duplicate.name
    return None


def twice(name: str) -> str:
    """The refusal's words."""
    return f"names {name!r} twice in one object: give each member once"
