"""JSON Schemas of the MCP tools: output schemas derived from the core's attrs types, input schemas built
from the core's own limits.

Output schemas are generated from the same attrs classes that ``adapters/wire.py`` turns into JSON
(field names camelCased the same way), so a field added to the model shows up in the schema without
anyone editing a second description of it. For MCP, nested objects are written inline rather than through
``$defs``: clients validate with an empty reference registry, and the documents stay small. The OpenAPI
document (``adapters/http/openapi.py``) asks for the same schemas with ``refs``: each attrs class then
becomes a named component (``Post``, ``Comment``…) that every operation answering it shares, which is what
client generators turn into classes.
"""

from __future__ import annotations

import types
import typing
from datetime import datetime
from typing import Any

import attrs

from adapters.wire import HIDDEN, camel_case
from community_api.commands import FILLED_SENDABLE_PATTERN, blank_or
from community_api.me import KeyWithUsage

Schema = dict[str, Any]

_PRIMITIVES: dict[type, Schema] = {
    str: {"type": "string"},
    bool: {"type": "boolean"},
    int: {"type": "integer"},
    float: {"type": "number"},
    datetime: {"type": "string", "format": "date-time"},
}


Refs = dict[str, Schema]  # component name -> its schema, filled as classes are met


def schema_of(annotation: Any, refs: Refs | None = None) -> Schema:
    """The JSON Schema of values of ``annotation`` as ``to_wire`` renders them; with ``refs``, attrs classes
    are written once into ``refs`` and referred to as ``#/components/schemas/<class name>``."""
    if isinstance(annotation, type) and issubclass(annotation, datetime):  # freezegun's stand-in too
        return {"type": "string", "format": "date-time"}
    if annotation in _PRIMITIVES:
        return dict(_PRIMITIVES[annotation])
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [schema_of(arg, refs) for arg in args if arg is not type(None)]
        if type(None) in args:
            options.append({"type": "null"})
        return options[0] if len(options) == 1 else {"anyOf": options}
    if origin in (tuple, list) and args:
        return {"type": "array", "items": schema_of(args[0], refs)}
    if annotation is KeyWithUsage:  # on the wire: the key's own fields and two usage figures beside them
        usage = {"requestsToday": {"type": "integer"}, "requestsTotal": {"type": "integer"}}
        merged = _merged(schema_of(attrs.fields(KeyWithUsage).key.type, refs), usage)
        return merged if refs is None else _component(refs, "KeyWithUsage", lambda: merged)
    if isinstance(annotation, type) and attrs.has(annotation):
        if refs is None:
            return object_schema(annotation)
        name = annotation.__name__
        if name not in refs:
            refs[name] = {}  # claimed first: a class that contains itself refers to itself
            refs[name] = object_schema(annotation, refs)
        return {"$ref": f"#/components/schemas/{name}"}
    raise TypeError(f"no JSON Schema for {annotation!r}")


def object_schema(cls: type, refs: Refs | None = None) -> Schema:
    """An attrs class as ``to_wire`` writes it: camelCased names, the service's own fields left out."""
    hints = typing.get_type_hints(cls)
    hidden = HIDDEN.get(cls, frozenset())
    properties = {
        camel_case(field.name): schema_of(hints[field.name], refs)
        for field in attrs.fields(cls)
        if field.name not in hidden
    }
    return {"type": "object", "properties": properties, "required": list(properties)}


def _merged(base: Schema, extra: dict[str, Schema]) -> Schema:
    """``base``'s object with ``extra`` properties beside its own."""
    return {"allOf": [base, {"type": "object", "properties": extra, "required": list(extra)}]}


def _component(refs: Refs, name: str, make: typing.Callable[[], Schema]) -> Schema:
    if name not in refs:
        refs[name] = make()
    return {"$ref": f"#/components/schemas/{name}"}


@attrs.frozen
class ListOf:
    """An answer ``{name: [item, ...]}``: how list answers are shaped on the wire (``{"groups": [...]}``)."""

    name: str
    item: type


@attrs.frozen
class Deleted:
    """The answer of a delete tool, ``{deleted: true, <id_name>: id}`` (REST answers 204 without a body)."""

    id_name: str


@attrs.frozen
class Fields:
    """An answer that is an object of named values: ``{"account": Account, "csrfToken": str}``."""

    fields: typing.Mapping[str, Any]


@attrs.frozen
class WithSecret:
    """A key as minted or rotated: its record, and the secret shown this once."""

    key: type


Result = type | ListOf | Deleted | Fields | WithSecret  # an attrs class, or one of the shapes above


def result_schema(result: Result, refs: Refs | None = None) -> Schema:
    """The JSON Schema of an operation's answer (``refs``: as in ``schema_of``)."""
    if isinstance(result, ListOf):
        items = {"type": "array", "items": schema_of(result.item, refs)}
        return {"type": "object", "properties": {result.name: items}, "required": [result.name]}
    if isinstance(result, Fields):
        properties = {name: schema_of(annotation, refs) for name, annotation in result.fields.items()}
        return {"type": "object", "properties": properties, "required": list(properties)}
    if isinstance(result, WithSecret):
        merged = _merged(schema_of(result.key, refs), {"secret": {"type": "string"}})
        return merged if refs is None else _component(refs, "IssuedKey", lambda: merged)
    if isinstance(result, Deleted):
        return {
            "type": "object",
            "properties": {"deleted": {"const": True}, result.id_name: {"type": "string"}},
            "required": ["deleted", result.id_name],
        }
    return schema_of(result, refs)


# --- inputs --------------------------------------------------------------------------------------


def text(description: str, max_length: int, **extra: Any) -> Schema:
    return {"type": "string", "minLength": 1, "maxLength": max_length, "description": description, **extra}


def optional_text(description: str, max_length: int, pattern: str | None = None) -> Schema:
    """An optional text that the core reads as not given when it is blank (``blank_as_none``): "" or white
    space is admitted, whatever else ``pattern`` says (an agent often fills an optional argument with "")."""
    schema: Schema = {"type": "string", "maxLength": max_length, "description": description}
    return schema if pattern is None else {**schema, "pattern": blank_or(pattern)}


def filled_text(description: str, max_length: int) -> Schema:
    """A required text to publish, that must hold more than white space and no control character but tabs
    and line breaks (the core's ``filled`` and ``sendable``), said by a pattern so that a client checking
    against the schema refuses what the core refuses."""
    return text(description, max_length, pattern=FILLED_SENDABLE_PATTERN)


def arguments(properties: dict[str, Schema], required: tuple[str, ...] = (), **extra: Any) -> Schema:
    """An input schema: unknown argument names are refused, as unknown body fields are on REST (a typo
    such as ``conversationID`` must not be ignored when it decides who receives a message)."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
        **extra,
    }
