"""The argument checker on its own, with a schema no core check stands behind.

Every tool's value rules are answered first by the core, in its own words (``test_mcp_tools.py``): the
checker's own sentences are for the rules the core does not hold (path ids, the group, the idempotency
key) and for a tool whose arguments the core does not structure. Here each rule of a schema is broken in
turn with no core refusal to fall back on, and the answer must still name the field and the rule in the
wording of the core's own checks, never quote the value, never give a regular expression for a rule that
has a sentence.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from adapters.mcp.arguments import ArgumentChecker
from community_api.commands import FILLED_PATTERN
from community_api.errors import InvalidRequest

# Properties deliberately out of alphabetical order: ``allowed`` lists them sorted, as REST's refusal does.
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "pattern": FILLED_PATTERN},
        "pages": {"type": "integer", "minimum": 1, "maximum": 30},
        "sort": {"type": "string", "enum": ["newest", "best"]},
        "note": {"type": "string", "minLength": 2, "maxLength": 5},
        "flag": {"type": "boolean"},
        "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "tags": {"type": "array", "minItems": 1},  # a rule with no sentence of its own
    },
    "required": ["title"],
    "additionalProperties": False,
}

REFUSALS = [
    ({}, "title is required", {"field": "title"}),
    ({"title": None}, "title is required", {"field": "title"}),
    ({"title": 7}, "title must be a string", {"field": "title"}),
    ({"title": " \n\t"}, "title must not be empty", {"field": "title"}),
    ({"title": "t", "pages": 0}, "pages must be an integer from 1 to 30", {"field": "pages"}),
    ({"title": "t", "pages": 31}, "pages must be an integer from 1 to 30", {"field": "pages"}),
    ({"title": "t", "pages": "2"}, "pages must be an integer", {"field": "pages"}),
    ({"title": "t", "pages": 2.5}, "pages must be an integer", {"field": "pages"}),
    (
        {"title": "t", "sort": "top"},
        "sort must be one of: newest, best",
        {"field": "sort", "allowed": ["newest", "best"]},
    ),
    ({"title": "t", "note": "n"}, "note must not be empty", {"field": "note"}),
    ({"title": "t", "note": "longer"}, "note is longer than 5 characters", {"field": "note", "maxLength": 5}),
    ({"title": "t", "flag": "yes"}, "flag must be true or false", {"field": "flag"}),
    ({"title": "t", "code": "abc"}, "code must match ^[A-Z]{3}$", {"field": "code", "pattern": "^[A-Z]{3}$"}),
    (
        {"title": "t", "zeta": 1, "alpha": 2},
        "unknown field: alpha, zeta",
        {"unknown": ["alpha", "zeta"], "allowed": ["code", "flag", "note", "pages", "sort", "tags", "title"]},
    ),
    ({"title": "t", "tags": []}, "tags: not valid (minItems)", {"field": "tags"}),
]


@pytest.mark.parametrize(("arguments", "message", "details"), REFUSALS, ids=lambda value: str(value)[:40])
def test_each_rule_of_the_schema_is_refused_naming_the_field_and_the_rule(
    arguments: dict[str, Any], message: str, details: dict[str, Any]
) -> None:
    with pytest.raises(InvalidRequest) as refused:
        ArgumentChecker(SCHEMA).check(arguments)
    assert (refused.value.message, refused.value.details) == (message, details)


def test_arguments_that_keep_every_rule_are_read_as_given() -> None:
    arguments = {"title": "t", "pages": 2.0, "sort": "best", "note": "ok", "flag": False, "code": "ABC", "x": None}
    read = ArgumentChecker(SCHEMA).check(arguments)
    # null is not given; 2.0 is the integer 2 (JSON Schema counts it as one), and read as such.
    assert read == {"title": "t", "pages": 2, "sort": "best", "note": "ok", "flag": False, "code": "ABC"}
    assert type(read["pages"]) is int


def test_the_cores_refusal_of_a_value_is_the_answer_and_it_reads_what_the_use_case_would() -> None:
    asked: list[Mapping[str, Any]] = []

    def core_refusal(arguments: Mapping[str, Any]) -> InvalidRequest | None:
        asked.append(dict(arguments))
        return InvalidRequest("sort must be newest or best, as the core says it", field="sort")

    checker = ArgumentChecker(SCHEMA, core_refusal)
    with pytest.raises(InvalidRequest) as refused:
        checker.check({"title": "t", "pages": 3.0, "sort": "top"})
    assert refused.value.message == "sort must be newest or best, as the core says it"
    assert asked == [{"title": "t", "pages": 3, "sort": "top"}]  # 3.0 read as 3 there too


def test_which_fields_are_given_is_the_checkers_to_say_not_the_cores() -> None:
    """A missing or an unknown field is not a value's rule: the core is not asked (it would name a value)."""
    asked: list[Mapping[str, Any]] = []

    def core_refusal(arguments: Mapping[str, Any]) -> InvalidRequest | None:
        asked.append(dict(arguments))
        return InvalidRequest("the core's sentence")

    checker = ArgumentChecker(SCHEMA, core_refusal)
    for arguments, message in (({}, "title is required"), ({"title": "t", "titel": "t"}, "unknown field: titel")):
        with pytest.raises(InvalidRequest) as refused:
            checker.check(arguments)
        assert refused.value.message == message
    assert asked == []


def test_a_value_rule_the_core_lets_pass_is_answered_in_the_checkers_words() -> None:
    checker = ArgumentChecker(SCHEMA, lambda arguments: None)
    with pytest.raises(InvalidRequest) as refused:
        checker.check({"title": "t", "note": "longer"})
    assert (refused.value.message, refused.value.details) == (
        "note is longer than 5 characters",
        {"field": "note", "maxLength": 5},
    )


def test_a_refusal_never_repeats_the_value() -> None:
    secret = "private words of someone's post " * 40
    for arguments in ({"title": "t", "note": secret}, {"title": "t", "code": secret}, {"title": "t", "sort": secret}):
        with pytest.raises(InvalidRequest) as refused:
            ArgumentChecker(SCHEMA).check(arguments)
        assert "private words" not in refused.value.message + repr(refused.value.details)
