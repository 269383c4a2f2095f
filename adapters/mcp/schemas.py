"""JSON Schemas of the MCP tools: output schemas derived from the core's attrs types, input schemas built
from the core's own limits.

Output schemas are generated from the same attrs classes that ``adapters/wire.py`` turns into JSON
(field names camelCased the same way), so a field added to the model shows up in the schema without
anyone editing a second description of it. Nested objects are written inline rather than through
``$defs``: clients validate with an empty reference registry, and the documents stay small.
"""

from __future__ import annotations

import types
import typing
from datetime import datetime
from typing import Any

import attrs

from adapters.wire import camel_case

Schema = dict[str, Any]

_PRIMITIVES: dict[type, Schema] = {
    str: {"type": "string"},
    bool: {"type": "boolean"},
    int: {"type": "integer"},
    float: {"type": "number"},
    datetime: {"type": "string", "format": "date-time"},
}


def schema_of(annotation: Any) -> Schema:
    """The JSON Schema of values of ``annotation`` as ``to_wire`` renders them."""
    if annotation in _PRIMITIVES:
        return dict(_PRIMITIVES[annotation])
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [schema_of(arg) for arg in args if arg is not type(None)]
        if type(None) in args:
            options.append({"type": "null"})
        return options[0] if len(options) == 1 else {"anyOf": options}
    if origin in (tuple, list) and args:
        return {"type": "array", "items": schema_of(args[0])}
    if isinstance(annotation, type) and attrs.has(annotation):
        return object_schema(annotation)
    raise TypeError(f"no JSON Schema for {annotation!r}")


def object_schema(cls: type) -> Schema:
    hints = typing.get_type_hints(cls)
    properties = {camel_case(field.name): schema_of(hints[field.name]) for field in attrs.fields(cls)}
    return {"type": "object", "properties": properties, "required": list(properties)}


def wrapper(name: str, item: type) -> Schema:
    """``{name: [item, ...]}``: how list answers are shaped on the wire (``{"groups": [...]}``)."""
    items = {"type": "array", "items": schema_of(item)}
    return {"type": "object", "properties": {name: items}, "required": [name]}


def deleted(id_name: str) -> Schema:
    """The answer of a delete tool (REST answers 204, but a tool result needs a body)."""
    return {
        "type": "object",
        "properties": {"deleted": {"const": True}, id_name: {"type": "string"}},
        "required": ["deleted", id_name],
    }


# --- inputs --------------------------------------------------------------------------------------


def text(description: str, max_length: int, **extra: Any) -> Schema:
    return {"type": "string", "minLength": 1, "maxLength": max_length, "description": description, **extra}


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
