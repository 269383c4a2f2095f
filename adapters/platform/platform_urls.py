"""Building the platform's URLs from parts, so that no part can change the route or its query.

The core checks every caller value against the platform's id and slug shapes (``community_api.platform_ids``)
before a gateway sees it. This module is the second line, for values the core let through and for what
the platform itself sent (a post's ``name``, a group's slug, the build id):
- every path segment is percent-encoded whole (``/``, ``?``, ``#``, ``&``, ``%`` and everything outside
  the unreserved set), so a segment is always exactly one segment;
- a segment that is empty, ``.`` or ``..`` is refused: dots are unreserved characters, so encoding leaves
  them as they are and a browser would resolve them (``%2e%2e`` is safe: its ``%`` is encoded);
- query values go through ``urlencode``, so a value is always one value of its own key.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote, urlencode

from community_api.errors import PlatformError

_DOT_SEGMENTS = frozenset({"", ".", ".."})


def segment(value: str) -> str:
    """One path segment, percent-encoded. ``PlatformError`` for an empty or dot segment: by the time
    the gateway builds a URL, the core has refused such caller input, so one can only come from the
    platform's own data, which is then unusable."""
    if not isinstance(value, str) or value in _DOT_SEGMENTS:
        raise PlatformError("unexpected answer from the platform (a path part is empty or a dot segment)")
    return quote(value, safe="")


def path(*segments: str) -> str:
    """``/a/b/c`` from ``("a", "b", "c")``, each part encoded by ``segment``."""
    return "".join("/" + segment(part) for part in segments)


def url(base: str, *segments: str, query: Mapping[str, object] | None = None) -> str:
    """``base`` (a configured origin and path prefix, trusted) followed by the encoded ``segments`` and
    the ``query``."""
    built = base.rstrip("/") + path(*segments)
    return f"{built}?{urlencode(query)}" if query else built
