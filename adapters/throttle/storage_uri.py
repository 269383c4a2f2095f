"""The file a ``limits`` storage URI of ours names (``sqlite://``, ``mmap://``), spelled as ``limits`` spells
its own: three (or four) slashes then an absolute path (``mmap:///srv/throttle.mmap``), or two slashes then
a relative one (``mmap://var/throttle.mmap``) or one under the home folder (``mmap://~/throttle.mmap``); and a
URI as it may be shown (``masked``)."""

from __future__ import annotations

import os
import re
import urllib.parse


def file_and_query(uri: str) -> tuple[str, str]:
    """The path (``""`` when the URI names a folder or nothing) and the query string of ``uri``."""
    parsed = urllib.parse.urlparse(uri)
    if parsed.netloc:
        # ``mmap://~/throttle.mmap``: under the home folder, as ``COMMUNITY_API_DB=~/…`` is, not in a folder
        # named "~" made in the working folder (an ``rm -rf ~`` meant for that folder removes the home folder).
        path = os.path.expanduser(urllib.parse.unquote(parsed.netloc + parsed.path))
    else:
        # ``f"sqlite:///{os.path.abspath(db)}"`` gives four slashes; both spellings mean the same file.
        path = "/" + urllib.parse.unquote(parsed.path).lstrip("/")
    return ("" if path.endswith("/") else path), parsed.query


# Query parameters of a storage URI whose values are credentials (redis-py's and limits' option names).
_SECRET_OPTION = re.compile(r"pass|secret|token|key", re.IGNORECASE)


def masked(uri: str) -> str:
    """``uri`` with its password (``redis://user:PASSWORD@host``) and credential options masked."""
    scheme, sep, rest = uri.partition("://")
    if not sep:
        return uri
    main, question, query = rest.partition("?")
    if "@" in main:  # the last "@" before the query: a password written unencoded may hold "/" or "@"
        userinfo, _, place = main.rpartition("@")
        user, colon, _password = userinfo.partition(":")
        # ``redis://:PASSWORD@host`` and ``user:PASSWORD``; a lone name may be a password too.
        main = f"{user}:***@{place}" if colon else f"***@{place}"
    options = []
    for option in query.split("&") if question else []:
        name, equals, value = option.partition("=")
        options.append(f"{name}{equals}***" if equals and _SECRET_OPTION.search(urllib.parse.unquote(name)) else option)
    return f"{scheme}://{main}{question}{'&'.join(options)}"
