"""Checking tool arguments against a tool's input schema. Messages use the same wording as the core's own
checks ("title is required", "unknown field: …"), so an agent gets the same sentence that a REST client
gets for the same mistake. Where a value breaks a rule of the schema (its type, a pattern, a length, a
range, a list of values), the core is asked first: its refusal, when it has one, is the answer, in its own
words ("since must be 24h, 7d or a date YYYY-MM-DD", not the pattern that says so). Values the core does
not structure (path ids, the group, the idempotency key) are refused with the core's sentence for their
pattern.

Messages never repeat the value that was refused: it may be 20,000 characters of someone's post, and
error texts end up in agent transcripts and logs.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError, best_match

from adapters.commands import unknown_names
from adapters.schemas import Schema
from community_api.commands import FILLED_PATTERN, optional_pattern
from community_api.errors import InvalidRequest
from community_api.idempotency import KEY_PATTERN, KEY_PROBLEM
from community_api.platform_ids import GROUP_PATTERN, GROUP_PROBLEM, ID_PROBLEM, PLATFORM_ID_PATTERN

_TYPE_WORDS = {"string": "a string", "integer": "an integer", "boolean": "true or false", "object": "an object"}
# Rules on a value (not which fields are given), which the core's checks of a command also hold.
VALUE_RULES = frozenset({"type", "pattern", "maxLength", "minLength", "enum", "minimum", "maximum"})
# The core's sentence for each pattern that a value the core does not structure itself is held to.
PATTERN_PROBLEMS = {
    PLATFORM_ID_PATTERN: ID_PROBLEM,
    GROUP_PATTERN: GROUP_PROBLEM,
    optional_pattern(GROUP_PATTERN): GROUP_PROBLEM,  # an optional group, where empty is not given
    KEY_PATTERN: KEY_PROBLEM,
}


def _whole_value_pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    """JSON Schema's patterns are ECMA-262 regular expressions, whose final ``$`` matches at the very end of
    the value only. Python's also matches before a final newline, so ``"<id>\\n"`` would pass ``^…$`` here
    (as it would not in a client's own validator) and be refused later by the core in other words, or not
    at all where the core holds no rule of its own. ``\\Z`` is ECMA's ``$``."""
    if validator.is_type(instance, "string") and not _anchored_at_the_end(pattern).search(instance):
        yield ValidationError(f"does not match {pattern!r}")


@functools.cache
def _anchored_at_the_end(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled with a final ``$`` read as ``\\Z``: once per pattern, not on every call."""
    return re.compile(pattern[:-1] + r"\Z" if pattern.endswith("$") and not pattern.endswith(r"\$") else pattern)


WholeValuePatternValidator = validators.extend(Draft202012Validator, {"pattern": _whole_value_pattern})


class ArgumentChecker:
    def __init__(
        self, schema: Schema, core_refusal: Callable[[Mapping[str, Any]], InvalidRequest | None] | None = None
    ) -> None:
        """``core_refusal``: the core's own refusal of the arguments, if any (``Operation.core_refusal``)."""
        self.core_refusal = core_refusal
        self.properties: Mapping[str, Any] = schema.get("properties", {})
        # ``oneOf`` (``to`` xor ``conversationId``) is left to the core, whose message names both fields.
        self._validator = WholeValuePatternValidator({name: value for name, value in schema.items() if name != "oneOf"})
        self._integers = frozenset(name for name, spec in self.properties.items() if spec.get("type") == "integer")

    def check(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments as the use case reads them, or ``InvalidRequest`` naming the field.

        An argument given as null is an argument not given, as a REST body's null field is
        (``structure_body``): agents send null for the optional arguments they leave out. A required one is
        then missing.

        JSON Schema counts a number with a zero fraction as an integer (``2.0`` is valid for
        ``"type": "integer"``), so a client that checks its arguments against the tool's schema may send
        one: it is passed on as the integer it is, not refused later by the core."""
        arguments = {name: value for name, value in arguments.items() if value is not None}
        read = {
            name: int(value) if name in self._integers and isinstance(value, float) and value.is_integer() else value
            for name, value in arguments.items()
        }
        error = best_match(self._validator.iter_errors(arguments))
        if error is not None:
            if error.validator in VALUE_RULES and self.core_refusal is not None:
                refusal = self.core_refusal(read)  # 2.0 read as 2 there too: not the value refused
                if refusal is not None:
                    raise refusal
            message, details = self._explain(error, arguments)
            raise InvalidRequest(message, **details)
        return read

    def _explain(self, error: ValidationError, arguments: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        field = ".".join(str(part) for part in error.absolute_path)
        rule, limit = error.validator, error.validator_value
        if rule == "required":
            missing = next(name for name in limit if name not in arguments)
            return f"{missing} is required", {"field": missing}
        if rule == "additionalProperties":
            said, unknown = unknown_names(set(arguments) - set(self.properties))
            return f"unknown field: {said}", {"unknown": unknown, "allowed": sorted(self.properties)}
        details: dict[str, Any] = {"field": field}
        if rule == "type":
            return f"{field} must be {_TYPE_WORDS.get(str(limit), str(limit))}", details
        if rule in ("minimum", "maximum"):
            bounds = error.schema if isinstance(error.schema, Mapping) else {}
            return f"{field} must be an integer from {bounds.get('minimum')} to {bounds.get('maximum')}", details
        if rule == "enum":
            return f"{field} must be one of: {', '.join(map(str, limit))}", {**details, "allowed": list(limit)}
        if rule == "minLength" or (rule == "pattern" and limit == FILLED_PATTERN):
            return f"{field} must not be empty", details
        if rule == "maxLength":
            return f"{field} is longer than {limit} characters", {**details, "maxLength": limit}
        if rule == "pattern":
            problem = PATTERN_PROBLEMS.get(str(limit), f"must match {limit}")
            return f"{field} {problem}", {**details, "pattern": limit}
        return f"{field or 'arguments'}: not valid ({rule})", details
