"""The typed commands the use cases take: what a client asks for, as values, never as JSON.

An adapter structures a REST body or query, or an MCP tool's arguments, into one of these classes
(``adapters/commands.py``, with cattrs), so that every way in is held to the same rules: the checks of each
field are the attrs validators here, with the core's own limits. The adapter checks only what its
transport decides (that a JSON body is an object, that no unknown field came, that a value has the type
of its field); every rule about a value is here.

A refused value raises ``BadField``, an ``invalid_request`` that names the field by its name here
(``parent_id``); the adapter that structured the command renames it as its caller spelled it
(``parentId``), so the error a client reads names what the client sent. Validators run in field order,
and each field's in the order given, so the first rule a value breaks is the one reported.

Field metadata ``expects`` says, for the adapter's type check, what a value of the field must be
("an integer from 1 to 30"); without it the adapter says what the type is ("a string").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import attrs

from community_api.errors import InvalidRequest
from community_api.platform_ids import (
    ID_PROBLEM,
    MAX_LABEL_NAME,
    PLATFORM_ID_PATTERN,
    is_platform_id,
)
from community_api.readable import READABLE_PATTERN, is_readable


class BadField(InvalidRequest):
    """A command's field refused. ``field`` is the core's name of it, ``problem`` what follows the name in
    the message, ``extra`` the details beyond the field's name (``maxLength``, ``pattern``, ``allowed``)."""

    def __init__(self, field: str, problem: str, **extra: Any) -> None:
        super().__init__(f"{field} {problem}", field=field, **extra)
        self.field = field
        self.problem = problem
        self.extra = extra


def blank_as_none(value: str | None) -> str | None:
    """An optional text that is empty or only white space counts as not given (attrs converter)."""
    return None if value is None or not value.strip() else value


def empty_as_none(value: str | None) -> str | None:
    """An empty cursor is no cursor, the first page (attrs converter; a published schema admits "")."""
    return None if value == "" else value


def optional_pattern(pattern: str) -> str:
    """``pattern`` (anchored at both ends) or the empty text: for a field whose converter is
    ``empty_as_none``."""
    return f"^({pattern.removeprefix('^').removesuffix('$')})?$"


# A character that is not white space as Python counts it (``str.isspace``, what ``strip`` removes), written
# out rather than as ``\s`` so that it means the same in a published schema's ECMA-262 pattern: ECMA's
# ``\s`` lacks U+001C-U+001F and U+0085 and has U+FEFF. A schema-checking client then refuses exactly
# the texts the core refuses (a lone no-break space is "empty" to both).
_WHITE = "\\t\\n\\x0b\\x0c\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"
FILLED_PATTERN = f"[^{_WHITE}]"
_FILLED = re.compile(FILLED_PATTERN)


# A text published on the platform as the person (a title, a post's or a comment's text, a DM) holds no
# control character but tabs and line breaks: nobody types one, an agent may pass one along from what it
# read (a terminal's colour codes), and a NUL is refused by many a database behind a site — a 5xx answered
# to a write, which reads "it may have been done" when nothing was.
_CONTROLS = "\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f"
SENDABLE_PATTERN = f"^[^{_CONTROLS}]*$"
# Sendable and not blank, as one pattern (a schema holds one): something but white space, no control.
FILLED_SENDABLE_PATTERN = f"^[^{_CONTROLS}]*[^{_WHITE}{_CONTROLS}][^{_CONTROLS}]*$"
_CONTROL = re.compile(f"[{_CONTROLS}]")


def sendable(instance: object, attribute: attrs.Attribute[Any], value: str | None) -> None:
    """A text to publish holds no control character but tabs and line breaks (``SENDABLE_PATTERN``)."""
    if value is not None and _CONTROL.search(value):
        raise BadField(attribute.name, "may not hold control characters other than tabs and line breaks")


def blank_or(pattern: str) -> str:
    """``pattern`` (anchored at both ends), or a text of white space alone: for a field whose converter is
    ``blank_as_none``, which reads such a text as not given."""
    return f"^([{_WHITE}]*|{pattern.removeprefix('^').removesuffix('$')})$"


def filled(instance: object, attribute: attrs.Attribute[Any], value: str) -> None:
    """A required text holds something other than white space (``FILLED_PATTERN``)."""
    if _FILLED.search(value) is None:
        raise BadField(attribute.name, "must not be empty")


@attrs.frozen
class MaxLength:
    """At most ``limit`` characters (None passes: an optional field not given). A class rather than a
    closure, so that a schema can read the limit (``adapters/commands.py``)."""

    limit: int

    def __call__(self, instance: object, attribute: attrs.Attribute[Any], value: str | None) -> None:
        if value is not None and len(value) > self.limit:
            raise BadField(attribute.name, f"is longer than {self.limit} characters", maxLength=self.limit)


@attrs.frozen
class MinLength:
    """At least ``length`` characters (None passes)."""

    length: int

    def __call__(self, instance: object, attribute: attrs.Attribute[Any], value: str | None) -> None:
        if value is not None and len(value) < self.length:
            raise BadField(attribute.name, f"must have at least {self.length} characters")


@attrs.frozen
class Matches:
    """The whole text matches ``pattern`` (None passes), else ``problem`` is the refusal. A class, so that a
    schema can read the pattern."""

    pattern: str
    problem: str

    def __call__(self, instance: object, attribute: attrs.Attribute[Any], value: str | None) -> None:
        if value is not None and not re.fullmatch(self.pattern, value):
            raise BadField(attribute.name, self.problem)


# What attrs takes as a validator (a list of these is checked in order).
Validator = Callable[[Any, "attrs.Attribute[Any]", Any], None]


def at_most(limit: int) -> Validator:
    return MaxLength(limit)


def at_least(length: int) -> Validator:
    return MinLength(length)


def platform_id(instance: object, attribute: attrs.Attribute[Any], value: str | None) -> None:
    """A platform identifier, as the platform writes them (``platform_ids``); None passes."""
    if value is not None and not is_platform_id(value):
        raise BadField(attribute.name, ID_PROBLEM, pattern=PLATFORM_ID_PATTERN)


def label_name(instance: object, attribute: attrs.Attribute[Any], value: str | None) -> None:
    """A label's id or name: matched against the group's own labels only, never put into a URL, so it is
    only held to being short readable text (it is echoed in the error that lists the labels)."""
    if value is not None and (len(value) > MAX_LABEL_NAME or not is_readable(value)):
        raise BadField(
            attribute.name, f"must be a label id or a label name of at most {MAX_LABEL_NAME} readable characters"
        )


def expects(text: str, **schema: Any) -> dict[str, Any]:
    """Field metadata: what a value of the field must be, for the adapter's message when its type is wrong;
    ``schema``: what a published schema adds about the field (``enum``, ``description``)."""
    return {"expects": text, "schema": schema}


# The patterns of the shape validators, for published schemas.
PATTERNS: dict[object, str] = {
    platform_id: PLATFORM_ID_PATTERN,
    label_name: READABLE_PATTERN,  # its length has a validator of its own
}
