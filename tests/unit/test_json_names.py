"""``adapters.json_names``: a member named twice in one object, found at any depth; the same name in two
objects is no duplicate."""

from __future__ import annotations

import pytest

from adapters.json_names import duplicate_name


@pytest.mark.parametrize(
    ("raw", "name"),
    [
        (b'{"a": 1, "a": 2}', "a"),
        (b'{"a": {"b": 1, "c": 2, "b": 1}}', "b"),
        (b'[{"x": 1}, {"y": 1, "y": 2}]', "y"),
        (b'{"params": {"arguments": {"content": "1", "content": "2"}}}', "content"),
        ('{"é": 1, "é": 2}'.encode(), "é"),
        (b'{"a": 1, "b": {"a": 2}, "c": [{"a": 3}]}', None),  # one name in several objects
        (b'{"A": 1, "a": 2}', None),  # names are case-sensitive
        (b"[1, 2, 2]", None),
        (b"{}", None),
    ],
)
def test_the_first_name_given_twice_in_one_object(raw: bytes, name: str | None) -> None:
    assert duplicate_name(raw) == name
