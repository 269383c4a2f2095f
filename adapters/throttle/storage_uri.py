"""The file a ``limits`` storage URI of ours names (``sqlite://``, ``mmap://``), spelled as ``limits`` spells
its own: three (or four) slashes then an absolute path (``mmap:///srv/throttle.mmap``), or two slashes then
a relative one (``mmap://var/throttle.mmap``)."""

from __future__ import annotations

import urllib.parse


def file_and_query(uri: str) -> tuple[str, str]:
    """The path (``""`` when the URI names a folder or nothing) and the query string of ``uri``."""
    parsed = urllib.parse.urlparse(uri)
    if parsed.netloc:
        path = urllib.parse.unquote(parsed.netloc + parsed.path)
    else:
        # ``f"sqlite:///{os.path.abspath(db)}"`` gives four slashes; both spellings mean the same file.
        path = "/" + urllib.parse.unquote(parsed.path).lstrip("/")
    return ("" if path.endswith("/") else path), parsed.query
