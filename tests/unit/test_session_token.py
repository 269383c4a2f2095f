"""Reading when a platform session ends from its token (``adapters/platform/session_token.py``): the
platform's JWT ``exp``, read tolerantly. Anything that does not say a believable time says nothing."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

import jwt
import pytest

from adapters.platform.session_token import session_expiry

KEY = "a key the platform would keep to itself"


def unsigned(payload: object, header: object | None = None) -> str:
    """A JWT-shaped token with any payload at all (PyJWT refuses to sign some of these)."""

    def part(value: object) -> str:
        text = value if isinstance(value, str) else json.dumps(value)
        return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()

    return f"{part(header or {'alg': 'HS256', 'typ': 'JWT'})}.{part(payload)}.c2lnbmF0dXJl"


def test_the_platforms_token_says_when_it_ends_whatever_its_signature() -> None:
    ends = datetime(2027, 11, 27, 14, 30, 5, tzinfo=UTC)
    token = jwt.encode({"user_id": "0a06a296f7cd4d28b5da867098733415", "exp": int(ends.timestamp())}, KEY * 2)
    assert session_expiry(token) == ends
    assert session_expiry(jwt.encode({"exp": ends.timestamp() + 0.5}, KEY * 2)) == ends.replace(microsecond=500000)
    assert session_expiry(unsigned({"exp": int(ends.timestamp())})) == ends  # a signature we cannot check
    assert session_expiry(unsigned({"exp": int(ends.timestamp())}, {"alg": "none"})) == ends
    past = datetime(2020, 1, 1, tzinfo=UTC)
    assert session_expiry(unsigned({"exp": int(past.timestamp())})) == past  # ended: said as well


@pytest.mark.parametrize(
    "token",
    [
        "",
        "not-a-jwt",
        "a.b",
        "a.b.c",
        "....",
        "e" * 4086,
        unsigned("not an object"),
        unsigned([1, 2]),
        unsigned({"user_id": "x"}),  # no exp
        unsigned({"exp": None}),
        unsigned({"exp": "1795791428"}),  # a NumericDate is a number
        unsigned({"exp": True}),
        unsigned({"exp": [1795791428]}),
        unsigned({"exp": {"at": 1795791428}}),
        unsigned({"exp": -1}),
        unsigned({"exp": 0}),
        unsigned({"exp": 10**30}),
        unsigned({"exp": 1e308}),
        unsigned('{"exp": NaN}'),
        unsigned('{"exp": Infinity}'),
        unsigned({"exp": 1795791428}, header="not json"),
        unsigned({"exp": 1795791428}, header=[1]),
        unsigned({"exp": 1795791428}).replace(".", "..", 1),
        "\u202e" + unsigned({"exp": 1795791428}),
    ],
)
def test_a_token_that_says_no_believable_end_says_nothing(token: str) -> None:
    assert session_expiry(token) is None
