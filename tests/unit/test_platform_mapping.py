"""The platform JSON readers of the Selenium gateway: the quick paths for the common shapes answer what
the full checks answer, and the memo of authors never lets a record through that the checks refuse."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from adapters.platform import platform_mapping as m
from community_api.errors import PlatformError


def test_text_readers_keep_their_rules() -> None:
    record = {"id": "p1", "n": 7, "empty": "", "flag": True, "none": None, "snake_name": "s"}
    assert m.text(record, "id") == "p1" and m.text(record, "n") == "7"
    assert m.text(record, "camelName", "snake_name") == "s"
    assert m.text(record, "none", default="d") == "d"
    for name in ("flag", "none"):
        with pytest.raises(PlatformError):
            m.text(record, name)
    assert m.optional_text(record, "id") == "p1" and m.optional_text(record, "n") == "7"
    assert m.optional_text(record, "empty") is None and m.optional_text(record, "flag") is None


def test_number_keeps_its_rules() -> None:
    record = {"i": 3, "b": True, "f": 2.0, "s": " 12 ", "none": None, "bad": "x", "half": 1.5}
    assert [m.number(record, k) for k in ("i", "b", "f", "s", "none", "missing")] == [3, 1, 2, 12, 0, 0]
    for name in ("bad", "half"):
        with pytest.raises(PlatformError):
            m.number(record, name)


def test_timestamps_are_utc_whatever_the_spelling() -> None:
    moment = datetime(2026, 11, 2, 10, 30, 0, 123456, tzinfo=UTC)
    for spelled in ("2026-11-02T10:30:00.123456Z", "2026-11-02T12:30:00.123456+02:00", "2026-11-02T10:30:00.123456"):
        parsed = m.timestamp({"t": spelled}, "t")
        assert parsed == moment and parsed.utcoffset() == timedelta(0)
    assert m.timestamp({"t": "2026-11-02T10:30:00.123456+00:00"}, "t").tzinfo is UTC


def post_record(n: int, author: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"p{n}", "name": f"post-{n}", "groupId": "g", "userId": author.get("id"), "labelId": "l",
            "createdAt": "2026-11-02T10:30:00.000000Z", "updatedAt": "2026-11-02T10:30:00.000000Z",
            "metadata": {"title": "T", "content": "C", "upvotes": 1, "comments": 0, "pinned": 0},
            "user": author}


def test_authors_are_read_once_per_answer_and_each_record_still_checked() -> None:
    ann = {"id": "u1", "name": "ann", "firstName": "Ann", "lastName": "Lee", "metadata": {"x": 1}}
    authors: dict[tuple[Any, ...], Any] = {}
    first = m.post(post_record(1, dict(ann)), "https://x", "g", authors=authors)
    second = m.post(post_record(2, dict(ann)), "https://x", "g", authors=authors)
    assert first.author is second.author and first.author == m.user(ann)
    renamed = m.post(post_record(3, {**ann, "lastName": "Park"}), "https://x", "g", authors=authors)
    assert renamed.author is not None and renamed.author.name == "Ann Park"
    numeric = m.post(post_record(4, {**ann, "id": 7}), "https://x", "g", authors=authors)
    assert numeric.author is not None and numeric.author.id == "7"
    with pytest.raises(PlatformError):  # a bool is no id, even where "1" was read before
        m.post(post_record(5, {**ann, "id": True}), "https://x", "g", authors=authors)
    with pytest.raises(PlatformError):
        m.post(post_record(6, {**ann, "name": ["ann"]}), "https://x", "g", authors=authors)
