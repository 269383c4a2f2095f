"""Identifiers of the service's own records: a short type prefix and random base62 characters."""

from __future__ import annotations

import re
import secrets
import string

BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase


def random_base62(length: int) -> str:
    return "".join(secrets.choice(BASE62) for _ in range(length))


_OWN_ID_LENGTH = 16


def new_id(kind: str) -> str:
    """``acc_…``, ``con_…``, ``key_…``: 16 random base62 characters (about 95 bits)."""
    return f"{kind}_{random_base62(_OWN_ID_LENGTH)}"


def own_id_pattern(kind: str) -> str:
    """The shape of ``new_id(kind)``'s ids, as a JSON Schema ``pattern`` for the OpenAPI document (``kind``
    may itself be a pattern)."""
    return f"^{kind}_[0-9A-Za-z]{{{_OWN_ID_LENGTH}}}$"


_OWN_ID = re.compile(own_id_pattern("[a-z]{3}"))


def looks_like_own_id(value: str) -> bool:
    """Could ``value`` be one of ours (``new_id``)? A refusal repeats a caller's value only then: a header
    or a path may carry kilobytes, or characters that should not reach a log or an agent's transcript."""
    return _OWN_ID.fullmatch(value) is not None


def no_such(what: str, value: str) -> str:
    """The message of a refusal for an id that names nothing: the id repeated when it could be one of ours."""
    return f"no {what} {value}" if looks_like_own_id(value) else f"no such {what}"
