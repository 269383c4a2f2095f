"""Checking tool arguments against a tool's input schema. Messages use the same wording as the core's own
checks ("title is required", "unknown field: …"), so an agent gets the same sentence that a REST client
gets for the same mistake.

Messages never repeat the value that was refused: it may be 20,000 characters of someone's post, and
error texts end up in agent transcripts and logs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

from adapters.commands import unknown_names
from adapters.schemas import Schema
from community_api.commands import FILLED_PATTERN
from community_api.errors import InvalidRequest

_TYPE_WORDS = {"string": "a string", "integer": "an integer", "boolean": "true or false", "object": "an object"}


class ArgumentChecker:
    def __init__(self, schema: Schema) -> None:
        self.properties: Mapping[str, Any] = schema.get("properties", {})
        # ``oneOf`` (``to`` xor ``conversationId``) is left to the core, whose message names both fields.
        self._validator = Draft202012Validator({name: value for name, value in schema.items() if name != "oneOf"})
        self._integers = frozenset(name for name, spec in self.properties.items() if spec.get("type") == "integer")

    def check(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments as the use case reads them, or ``InvalidRequest`` naming the field.

        JSON Schema counts a number with a zero fraction as an integer (``2.0`` is valid for
        ``"type": "integer"``), so a client that checks its arguments against the tool's schema may send
        one: it is passed on as the integer it is, not refused later by the core."""
        error = best_match(self._validator.iter_errors(arguments))
        if error is not None:
            message, details = self._explain(error, arguments)
            raise InvalidRequest(message, **details)
        return {
            name: int(value) if name in self._integers and isinstance(value, float) else value
            for name, value in arguments.items()
        }

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
            return f"{field} must match {limit}", {**details, "pattern": limit}
        return f"{field or 'arguments'}: not valid ({rule})", details
