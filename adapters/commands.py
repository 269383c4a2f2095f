"""Typed commands at the edge: a REST body or query, or an MCP tool's arguments, structured by cattrs into
the core's command (``community_api/commands.py``), the same class whichever way the call came.

What is decided here is the transport's part only:
- a body is a JSON object, and holds no field the command does not have (a typo such as
  ``conversationID`` must not be silently ignored when it decides who receives a message); a field
  given as ``null`` is a field not given;
- each value has its field's type. A JSON value must have it as is (``"3"`` is not a number); a query
  string's values are text, so there ``3`` and ``true``/``1``/``false``/``0`` are read as a number and
  a truth value, and an empty value counts as not given;
- the names: the core's ``parent_id`` is the wire's ``parentId`` (``wire.camel_case``, the rule of every
  answer), both ways: a refusal names the field as the caller spelled it. A body defined by a standard
  (OAuth's client metadata) keeps the standard's names, and there unknown fields are ignored, as RFC 7591
  asks (``structure_metadata``).
Every rule about a value (not empty, its length, an id's shape) is a validator of the command, in the core.

A refusal is ``invalid_request`` (400), the first of: the body not an object; unknown fields (all named);
then each field in order, its first broken rule. Details name the field as ``field`` (a body's) or
``parameter`` (a query's or a tool's argument that stands for one).
"""

from __future__ import annotations

import functools
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import attrs
import cattrs
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError
from cattrs.gen import make_dict_structure_fn, override

from adapters.wire import camel_case
from community_api.commands import (
    FILLED_PATTERN,
    FILLED_SENDABLE_PATTERN,
    PATTERNS,
    SENDABLE_PATTERN,
    BadField,
    Matches,
    MaxLength,
    MinLength,
    blank_as_none,
    blank_or,
    empty_as_none,
    filled,
    optional_pattern,
    sendable,
)
from community_api.errors import InvalidRequest, ServiceError

C = TypeVar("C")
_NUMBER = re.compile(r"[0-9]{1,3}")
_TRUTH = {"true": True, "1": True, "false": False, "0": False}
_TYPE_NAMES: dict[object, str] = {str: "a string", bool: "true or false", int: "an integer"}
_PLURALS: dict[object, str] = {str: "strings", bool: "truth values", int: "integers"}


class _WrongType(TypeError):
    """A value of another type than its field's (the message is made where the field's name is known)."""


def _text(value: object, _: type) -> str:
    if not isinstance(value, str):
        raise _WrongType
    return value


def _json_bool(value: object, _: type) -> bool:
    if not isinstance(value, bool):
        raise _WrongType
    return value


def _json_int(value: object, _: type) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _WrongType
    return value


def _query_bool(value: object, _: type) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value in _TRUTH:
        return _TRUTH[value]
    raise _WrongType


def _query_int(value: object, _: type) -> int:
    if isinstance(value, str) and _NUMBER.fullmatch(value):
        return int(value)
    return _json_int(value, int)


def _converter(*, query: bool, renamed: bool = True, strict: bool = True) -> cattrs.Converter:
    """``renamed``: wire names are camelCase (else the fields' own); ``strict``: unknown keys refused (else
    ignored)."""
    converter = cattrs.Converter(forbid_extra_keys=strict, detailed_validation=True)
    converter.register_structure_hook(str, _text)
    converter.register_structure_hook(bool, _query_bool if query else _json_bool)
    converter.register_structure_hook(int, _query_int if query else _json_int)

    def json_list(value: object, annotation: Any) -> list[Any]:
        # A list as JSON writes one (cattrs would take any iterable: a string's characters).
        if not isinstance(value, list):
            raise _WrongType
        (item_type,) = typing.get_args(annotation)
        return [converter.structure(item, item_type) for item in value]

    converter.register_structure_hook_func(lambda annotation: typing.get_origin(annotation) is list, json_list)

    def commands(cls: type) -> Any:
        attrs.resolve_types(cls)  # the fields' types as classes, for the hooks and for refusals' messages
        renames: dict[str, Any] = (
            {field.name: override(rename=camel_case(field.name)) for field in attrs.fields(cls)} if renamed else {}
        )
        return make_dict_structure_fn(cls, converter, _cattrs_forbid_extra_keys=strict, **renames)

    converter.register_structure_hook_factory(attrs.has, commands)
    return converter


_JSON = _converter(query=False)
_QUERY = _converter(query=True)
_METADATA = _converter(query=False, renamed=False, strict=False)


def structure_body(value: object, command: type[C]) -> C:
    """A JSON body (REST) or the MCP arguments that REST takes in the body, as ``command``."""
    if not isinstance(value, Mapping):
        raise InvalidRequest("the request body must be a JSON object")
    known = command_fields(typing.cast(type, command))
    # A field given as null is a field not given (a required one is then missing); an unknown one is
    # still unknown.
    given = {name: item for name, item in value.items() if item is not None or name not in known}
    return _structure(_JSON, given, command, "field")


def structure_query(values: Mapping[str, Any], command: type[C], *, text: bool) -> C:
    """Query parameters (``text``: as a query string gives them, where empty means not given) or the MCP
    arguments that stand for them (typed JSON values), as ``command``. A refusal names a query's
    ``parameter``, and an MCP argument's ``field``, as every other refusal of a tool argument does."""
    if text:
        values = {name: value for name, value in values.items() if value != ""}
    return _structure(
        _QUERY if text else _JSON,
        {k: v for k, v in values.items() if v is not None},
        command,
        "parameter" if text else "field",
    )


def structure_metadata(value: object, command: type[C]) -> C:
    """A JSON object under a standard's own field names (OAuth's ``redirect_uris``), as ``command``; fields
    the command does not have are ignored, as RFC 7591 §2 asks of client metadata. Refusals name fields
    as the standard spells them."""
    if not isinstance(value, Mapping):
        raise InvalidRequest("the request body must be a JSON object")
    given = {name: item for name, item in value.items() if item is not None}
    return _structure(_METADATA, given, command, "field", named=str)


@functools.cache  # asked on every request that carries a command
def command_fields(command: type) -> frozenset[str]:
    """The wire names of a command's fields."""
    return frozenset(camel_case(field.name) for field in attrs.fields(command))


def _structure(
    converter: cattrs.Converter,
    value: Mapping[str, Any],
    command: type[C],
    kind: str,
    named: Callable[[str], str] = camel_case,
) -> C:
    try:
        return converter.structure(value, command)
    except ClassValidationError as error:
        refusal = _refusal(error, command, kind, named)
        if refusal is None:
            raise  # not the caller's fault: a bug, answered 500 and logged
        raise refusal from None


MAX_NAMES_REPEATED = 5
MAX_NAME_REPEATED = 64


def repeatable(text: str, limit: int = MAX_NAME_REPEATED) -> bool:
    """May a refusal repeat this text a client chose? Only when it could be a typo of something real:
    printable and short. Refusals end up in agents' transcripts and clients' logs."""
    return len(text) <= limit and text.isprintable()


def unknown_names(names: Iterable[str]) -> tuple[str, list[str]]:
    """Names a client sent that a route or tool does not take, as a refusal repeats them (its text and its
    ``details``): at most five, each printable and at most 64 characters, the others counted. A client
    picks these names; a 50 KB one, or three thousand of them, must not come back in the answer or land in
    an agent's transcript."""
    ordered = sorted(set(names))
    shown = [name for name in ordered if repeatable(name)][:MAX_NAMES_REPEATED]
    others = len(ordered) - len(shown)
    if not shown:
        return f"{others} not repeated here (too long or not printable)", shown
    return ", ".join(shown) + (f" and {others} more" if others else ""), shown


def _refusal(error: ClassValidationError, command: type, kind: str, named: Callable[[str], str]) -> ServiceError | None:
    """The first refusal of ``error``'s, as the caller's names say it (``named``: a field's wire name); None
    when none is the caller's. A validator that refuses in the core's own terms (a ``ServiceError`` such
    as OAuth's ``invalid_redirect_uri``) is answered as it stands."""
    for problem in error.exceptions:
        if isinstance(problem, ForbiddenExtraKeysError):
            said, unknown = unknown_names(problem.extra_fields)
            # The names it does take beside the ones it does not, as a tool's refusal gives them: a typo
            # (``conversationID``) is mended from the answer alone.
            allowed = sorted(named(field.name) for field in attrs.fields(command))
            return InvalidRequest(f"unknown field: {said}", unknown=unknown, allowed=allowed)
    fields = {field.name: field for field in attrs.fields(command)}
    for problem in error.exceptions:
        if isinstance(problem, BadField):
            name = named(problem.field)
            return InvalidRequest(f"{name} {problem.problem}", **{kind: name}, **problem.extra)
        if isinstance(problem, ServiceError):
            return problem
        attribute = next((note.name for note in getattr(problem, "__notes__", ()) if hasattr(note, "name")), None)
        if attribute is None or attribute not in fields:
            continue
        name = named(attribute)
        if isinstance(problem, KeyError):
            return InvalidRequest(f"{name} is required", **{kind: name})
        if isinstance(problem, (TypeError, ValueError)):  # not of the field's type (``_WrongType`` and the like)
            field = fields[attribute]
            wanted = field.metadata.get("expects") or _type_name(field.type)
            return InvalidRequest(f"{name} must be {wanted}", **{kind: name})
    return None


def _plain(annotation: object) -> object:
    """``str`` for ``str | None``: the type a field holds when it is given."""
    if typing.get_origin(annotation) not in (typing.Union, types.UnionType):
        return annotation
    args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    return args[0] if len(args) == 1 else annotation


def _type_name(annotation: object) -> str:
    """How a refusal names a type: ``a string``, ``a list of strings``."""
    plain = _plain(annotation)
    if typing.get_origin(plain) is list:
        (item,) = typing.get_args(plain)
        return f"a list of {_PLURALS.get(item, 'values')}"
    return _TYPE_NAMES.get(plain, "of another type")


def command_schema(command: type) -> dict[str, Any]:
    """The JSON schema of a command as a body (OpenAPI), read from the class: each field's type, its limits
    and pattern from its validators, what its metadata adds; required: the fields without a default."""
    properties: dict[str, Any] = {}
    required = []
    for field in attrs.fields(attrs.resolve_types(command)):
        schema = _type_schema(field.type)
        for check in _validators(field.validator):
            if isinstance(check, MaxLength):
                schema["maxLength"] = check.limit
            elif isinstance(check, MinLength):
                schema["minLength"] = max(check.length, schema.get("minLength", 0))
            elif check is filled:
                schema["minLength"] = max(1, schema.get("minLength", 0))
                schema.setdefault("pattern", FILLED_PATTERN)
            elif check is sendable:  # one pattern says both rules when the text must also be filled
                filled_too = schema.get("pattern") == FILLED_PATTERN
                schema["pattern"] = FILLED_SENDABLE_PATTERN if filled_too else SENDABLE_PATTERN
            elif isinstance(check, Matches):
                schema["pattern"] = check.pattern
            elif check in PATTERNS:
                schema["pattern"] = PATTERNS[check]
        if field.converter is empty_as_none and "pattern" in schema:
            schema["pattern"] = optional_pattern(schema["pattern"])
        if field.converter is blank_as_none and "pattern" in schema:
            schema["pattern"] = blank_or(schema["pattern"])  # white space alone is not given
        extra = field.metadata.get("schema", {})
        if "items" in extra:
            schema["items"] = {**schema.get("items", {}), **extra["items"]}
        schema.update({key: value for key, value in extra.items() if key != "items"})
        properties[camel_case(field.name)] = schema
        if field.default is attrs.NOTHING:
            required.append(camel_case(field.name))
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def _type_schema(annotation: object) -> dict[str, Any]:
    plain = _plain(annotation)
    if typing.get_origin(plain) is list:
        (item,) = typing.get_args(plain)
        return {"type": "array", "items": _type_schema(item)}
    return {"type": {str: "string", bool: "boolean", int: "integer"}[plain]}  # type: ignore[index]


def _validators(validator: object) -> tuple[object, ...]:
    """The validators of a field: attrs combines a list of them into one (``and_``), whose parts it keeps
    in ``_validators``."""
    if validator is None:
        return ()
    return tuple(getattr(validator, "_validators", (validator,)))
