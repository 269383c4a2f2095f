"""What the platform's session token says of itself: when it ends.

The platform's ``auth_token`` cookie is a JWT carrying ``user_id`` and ``exp`` and living about a year
(PLATFORM.md, "Sign-in and the firewall"). Its signature is the platform's to check (we do not have its
key, and do not need it): the date is only shown to the account, so that it can link again before the
session ends, and lets a token that has already ended be refused with its date instead of a round trip
through a browser. It is never taken to mean the session is still good before then: the platform may end
a session earlier (a password change, a sign-out everywhere), and the gateway still reads that from the
platform's answers.

Read tolerantly: a token that is not a JWT, or whose ``exp`` is missing, not a number or not a sane time,
says nothing (None); linking goes on and the platform's own answer decides.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

import jwt

# Bounds of a believable expiry (NumericDate, seconds since 1970): outside them the claim is garbage, and
# ``datetime`` cannot even hold a time past year 9999.
_EARLIEST = datetime(2000, 1, 1, tzinfo=UTC).timestamp()
_LATEST = datetime(9999, 1, 1, tzinfo=UTC).timestamp()


def session_expiry(token: str) -> datetime | None:
    """When ``token`` says it ends (UTC, whole seconds as the claim has them), or None if it does not say."""
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except (jwt.PyJWTError, ValueError, TypeError):
        return None  # not a JWT at all: some other kind of session, whose end we cannot read
    exp = claims.get("exp")
    if isinstance(exp, bool) or not isinstance(exp, int | float):
        return None
    if not math.isfinite(exp) or not _EARLIEST <= exp <= _LATEST:
        return None
    return datetime.fromtimestamp(exp, UTC)
