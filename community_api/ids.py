"""Identifiers of the service's own records: a short type prefix and random base62 characters."""

from __future__ import annotations

import secrets
import string

BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase


def random_base62(length: int) -> str:
    return "".join(secrets.choice(BASE62) for _ in range(length))


def new_id(kind: str) -> str:
    """``acc_…``, ``con_…``, ``key_…``: 16 random base62 characters (about 95 bits)."""
    return f"{kind}_{random_base62(16)}"
