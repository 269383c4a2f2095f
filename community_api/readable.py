"""Names a person reads (key names, account emails, OAuth client names) must read as what they are.

Refused: control characters (Unicode category Cc: NUL, newline, BEL, …), which break a page or a log line,
and the bidirectional overrides and isolates (U+202A–U+202E, U+2066–U+2069), which make text display in
another order than it is stored: a client registered as "evilApp" could read as another name on the
consent page.
"""

from __future__ import annotations

import unicodedata

from community_api.errors import InvalidRequest

_BIDI_CONTROLS = frozenset(range(0x202A, 0x202F)) | frozenset(range(0x2066, 0x206A))
# The same rule for a published schema (JSON Schema and Python read these escapes alike): no Cc (U+0000–U+001F,
# U+007F–U+009F), no bidirectional override or isolate.
READABLE_PATTERN = "^[^\\u0000-\\u001f\\u007f-\\u009f\\u202a-\\u202e\\u2066-\\u2069]*$"


def is_readable(value: str) -> bool:
    return not any(unicodedata.category(ch) == "Cc" or ord(ch) in _BIDI_CONTROLS for ch in value)


def readable(value: str, field: str) -> str:
    """``value``, or ``InvalidRequest`` naming ``field``."""
    if not is_readable(value):
        raise InvalidRequest(f"{field} may not hold control characters or bidirectional overrides", field=field)
    return value
