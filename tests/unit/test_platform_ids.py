"""The platform's shapes themselves (``community_api/platform_ids.py``): which values can be an id and which
can name a group, at the edges of each rule: one character short or long, a capital, a dash where a slug
may not have one. ``test_hostile_ids.py`` sends hostile values through every route and tool; this table
pins the rule those checks share."""

from __future__ import annotations

import pytest

from community_api.errors import InvalidRequest, NotFound
from community_api.platform_ids import field_group, is_group_name, is_platform_id, path_group, path_id
from fakes.platform_seed import platform_id

REAL = platform_id("pst-00001")

IDS = [
    (REAL, True),
    ("0" * 32, True),
    ("0123456789abcdef" * 2, True),
    (REAL[:-1], False),  # one short
    (REAL + "0", False),  # one long
    (REAL.upper(), False),
    (REAL[:-1] + "g", False),
    (REAL + "\n", False),
    (f" {REAL}", False),
    ("", False),
    (None, False),
    (int(REAL, 16), False),
]


@pytest.mark.parametrize(("value", "is_id"), IDS, ids=repr)
def test_an_id_is_exactly_32_lowercase_hex_characters(value: object, is_id: bool) -> None:
    assert is_platform_id(value) is is_id
    if isinstance(value, str):
        if is_id:
            assert path_id(value, "post") == value
        else:
            with pytest.raises(NotFound, match="post not found: ids are 32 lowercase hexadecimal characters"):
                path_id(value, "post")


GROUPS = [
    ("builders-club", True),
    ("a", True),
    ("7", True),
    ("a-b", True),
    ("a--b", True),
    (REAL, True),  # an id is a slug-shaped name: the gateway tells them apart by looking the group up
    ("a" * 100, True),
    ("a" * 101, False),
    ("a" + "-" * 98 + "b", True),
    ("a" + "-" * 99 + "b", False),
    ("-builders", False),
    ("builders-", False),
    ("-", False),
    ("builders_club", False),
    ("Builders-Club", False),
    ("builders.club", False),
    ("builders club", False),
    ("builders\n", False),
    ("", False),
    (None, False),
]


@pytest.mark.parametrize(("value", "is_group"), GROUPS, ids=repr)
def test_a_group_is_named_by_a_slug_of_lowercase_letters_digits_and_inner_dashes(value: object, is_group: bool) -> None:
    assert is_group_name(value) is is_group
    if not isinstance(value, str):
        return
    if is_group:
        assert path_group(value) == value
        assert field_group(value) == value
        return
    with pytest.raises(NotFound, match="group not found"):
        path_group(value)
    if value == "":
        assert field_group(value) is None  # a query string's empty value, or an agent's "": not given
        return
    with pytest.raises(InvalidRequest) as refused:
        field_group(value)
    assert refused.value.details["field"] == "group"


def test_no_group_given_is_none() -> None:
    assert field_group(None) is None
