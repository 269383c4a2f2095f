"""The wire format's JSON text: what clients of the REST API and the MCP tools receive."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from adapters.wire import dumps, encode
from community_api.model import PlatformUser, Post


def _post(**changes: object) -> Post:
    fields: dict[str, object] = {
        "id": "p1",
        "group_id": "g1",
        "title": "Hello",
        "content": "Wörld ✓ 🚀",
        "label_id": None,
        "author_id": "u1",
        "author": PlatformUser(id="u1", handle="alice", name="Alice A"),
        "created_at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        "updated_at": None,
        "upvotes": 3,
        "comment_count": 0,
        "pinned": False,
        "url": None,
    }
    fields.update(changes)
    return Post(**fields)  # type: ignore[arg-type]


def test_camel_case_names_and_utc_times() -> None:
    data = json.loads(encode(_post(created_at=datetime(2026, 1, 2, 5, 4, 5, 7, tzinfo=timezone(timedelta(hours=2))))))
    assert data["createdAt"] == "2026-01-02T03:04:05.000007Z"
    assert data["authorId"] == "u1" and data["commentCount"] == 0 and data["updatedAt"] is None
    assert data["author"] == {"id": "u1", "handle": "alice", "name": "Alice A"}


def test_non_ascii_text_is_sent_as_utf8() -> None:
    text = encode(_post())
    assert "Wörld ✓ 🚀".encode() in text
    assert dumps(_post()) == text.decode("utf-8")


@pytest.mark.parametrize("value", ["\ud800", "a\udfffb", "\ud83d"])
def test_lone_surrogates_are_escaped_not_a_crash(value: str) -> None:
    text = encode(_post(title=value))
    assert text.isascii()
    assert json.loads(text)["title"] == value


@pytest.mark.parametrize(
    "moment",
    [
        datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC),
        datetime(2026, 1, 2, 3, 4, 5, 1000, tzinfo=UTC),
        datetime(2026, 1, 2, 3, 4, 5, 7, tzinfo=timezone(timedelta(hours=-7, minutes=-30))),
        datetime(1, 1, 1, tzinfo=UTC),
    ],
)
def test_encoded_text_and_json_ready_data_agree(moment: datetime) -> None:
    """``encode`` (orjson writes the times) and ``to_wire`` (the MCP tools' structured results) give
    the same values, times included."""
    from adapters.wire import rfc3339, to_wire

    post = _post(created_at=moment, updated_at=moment)
    assert json.loads(encode(post)) == to_wire(post)
    assert to_wire(post)["updatedAt"] == rfc3339(moment)
    assert rfc3339(moment).endswith("Z") and "+" not in rfc3339(moment)
