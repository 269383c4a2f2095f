"""The gateway's URLs keep exactly their route and their query keys, whatever a part holds.

Every api2 route and page-data route the gateway builds is listed here with a placeholder for the part a
caller (or the platform's own data) supplies; each is built with every hostile value and read back as a
browser would read it (dot segments resolved, percent-escapes kept)."""

from __future__ import annotations

import posixpath
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from adapters.platform import platform_urls
from adapters.platform.page_fetch import PageRunner, Req
from community_api.errors import PlatformError

API = "https://api2.platform.test"
WWW = "https://www.platform.test"
ID = "0a06a296f7cd4d28b5da867098733415"
HOSTILE = [
    "../self",
    "x/../../self/chat-channels",
    f"{ID}?x=1",
    f"{ID}#x",
    f"{ID}&limit=999",
    f"{ID}/comments",
    "%2e%2e",
    "%2E%2e/self",
    "a%2fb",
    "line\nbreak",
    "tab\there",
    "x" * 300,
    "Grüße ☃",
    "a b",
    "a;b=c",
    "?",
    "#",
    "&",
    "\\..\\self",
    "..%5cself",
    "%00",
    "\x00",
]
# (segments with X for the caller's part, query) for every api2 route the gateway calls.
API_ROUTES = [
    (("posts", "X", "comments"), {"limit": 25, "group-id": "X"}),
    (("posts", "X"), None),
    (("groups", "X"), None),
    (("groups", "X", "labels"), None),
    (("users", "X", "groups"), {"offset": 0, "limit": 30}),
    (("users", "X", "chat-request"), {"g": "X"}),
    (("channels", "X", "messages"), {"before": 30, "after": 0, "msg": "X"}),
    (("self", "chat-channels"), {"offset": "X", "limit": 30}),
    (("posts",), {"follow": "true"}),
]


def browser_path(url: str) -> list[str]:
    """The path segments a browser requests: dot segments resolved on the raw path, then each segment
    decoded (a server sees ``%2F`` inside a segment as part of it, never as a separator)."""
    raw = urlsplit(url).path
    resolved = posixpath.normpath(raw) if raw else raw
    return [unquote(part) for part in resolved.split("/")[1:]]


def fill(parts: tuple[str, ...], value: str) -> list[str]:
    return [value if part == "X" else part for part in parts]


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize(("parts", "query"), API_ROUTES)
def test_an_api2_url_keeps_its_route_and_query_keys(
    parts: tuple[str, ...], query: dict[str, object] | None, value: str
) -> None:
    runner = PageRunner(WWW, API, timeout=5)
    filled_query = {k: (value if v == "X" else v) for k, v in (query or {}).items()}
    url = runner.api(*fill(parts, value), query=filled_query or None)
    split = urlsplit(url)
    assert (split.scheme, split.netloc, split.fragment) == ("https", "api2.platform.test", "")
    assert browser_path(url) == fill(parts, value)
    assert set(parse_qs(split.query, keep_blank_values=True)) == set(filled_query)
    for key, wanted in filled_query.items():
        assert parse_qs(split.query, keep_blank_values=True)[key] == [str(wanted)]


@pytest.mark.parametrize("value", HOSTILE)
def test_a_page_data_url_keeps_its_route_and_query_keys(value: str) -> None:
    for segments, query in (
        ([value], {"group": value, "p": 2, "s": "newest"}),
        (["builders-club", value], {"group": "builders-club", "post": value}),
    ):
        req = Req.data(segments, query)
        assert req.data_path is not None
        url = WWW + "/_next/data/build-1" + req.data_path
        path = browser_path(url)
        assert path[:3] == ["_next", "data", "build-1"]
        assert path[3:-1] + [path[-1].removesuffix(".json")] == segments
        assert set(parse_qs(urlsplit(url).query, keep_blank_values=True)) == set(query)
        assert urlsplit(url).fragment == ""


@pytest.mark.parametrize("value", ["", ".", ".."])
def test_empty_and_dot_segments_are_refused(value: str) -> None:
    runner = PageRunner(WWW, API, timeout=5)
    with pytest.raises(PlatformError):
        runner.api("posts", value, "comments")
    with pytest.raises(PlatformError):
        Req.data(["builders-club", value], {"group": "builders-club"})


def test_a_configured_url_ending_in_a_slash_gives_no_empty_segment() -> None:
    """``COMMUNITY_API_PLATFORM_API_URL=https://api2.…/`` is as likely as without the slash: ``//self`` would be
    another route on many servers."""
    assert platform_urls.url(API + "/", "self") == API + "/self"
    assert PageRunner(WWW + "/", API + "//", timeout=5).api("self", query={"a": 1}) == API + "/self?a=1"
