"""The feed's cached answers are byte for byte what the stand-in renders without a cache.

A twin sandbox with the same seed and clock keeps nothing in its cache (``PageCache(0)``): every answer it
gives is rendered afresh. For a table of queries, the first and the second (cached) answer of the sandbox
under test must equal the twin's, status, content type and length included; the page data must also equal
Falcon's own encoding of the page's props, which is how it was served before the cache.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import falcon
import pytest
from falcon import testing

from scripts.sandbox import pages
from scripts.sandbox.app import create_app
from scripts.sandbox.pagecache import PageCache, Rendered
from scripts.sandbox.state import Sandbox
from tests.sandbox.conftest import BIG, Browser, Clock

SLUGS = [BIG, "no-such-group"]
QUERIES = [
    "",
    "p=2",
    "s=newest",
    "s=newest&p=3",
    "s=best",
    "s=best-1d",
    "s=best-1w",
    "s=best-1m&p=2",
    "s=best-1y",
    "s=newest&fl=unr",
    "fl=unr&p=2",
    "s=bogus",
    "p=junk",
    "p=0",
    "p=999",
    "c=LABEL1",
    "c=LABEL2&s=best",
    "c=no-such-label",
    "fl=other&s=newest-cm",
    "x=%3Cscript%3E&p=1",
]


@pytest.fixture
def twin(clock: Clock) -> Browser:
    """A browser on a sandbox like ``sb`` (same seed, same clock) that caches nothing."""
    sb = Sandbox(1, clock=clock)
    sb.pages = PageCache(0)
    return Browser(testing.TestClient(create_app(sandbox=sb)))


def _queries(sb: Sandbox) -> list[str]:
    group = sb.world.group_by_slug(BIG)
    assert group is not None
    return [q.replace("LABEL1", group.labels[1].id).replace("LABEL2", group.labels[2].id) for q in QUERIES]


def _answers(b: Browser, slug: str, query: str) -> list[testing.Result]:
    """The page data and the HTML page of the feed ``slug`` with ``query``."""
    data = b.get(f"/_next/data/{b.build_id}/{slug}.json", query_string=f"group={slug}&{query}")
    page = b.get(f"/{slug}", query_string=query)
    return [data, page]


def _same(got: testing.Result, want: testing.Result, what: str) -> None:
    assert got.status_code == want.status_code, what
    for header in ("content-type", "content-length"):
        assert got.headers.get(header) == want.headers.get(header), (what, header)
    assert got.content == want.content, what


def _falcon_media(props: dict[str, Any]) -> bytes:
    """The page data as ``resp.media`` encoded it before the cache."""
    return falcon.media.JSONHandler().serialize({"pageProps": props, "__N_SSP": True}, falcon.MEDIA_JSON)


@pytest.mark.parametrize("who", [None, "alice", "bob"])
def test_cached_answers_equal_uncached_renderings(
    sb: Sandbox, browser: Callable[..., Browser], twin: Browser, who: str | None
) -> None:
    b = browser(who)
    if who:
        assert twin.login(who).status_code == 200
    else:  # signed out, past the firewall
        b.pass_firewall()
        twin.pass_firewall()
    b.build_id = twin.build_id = sb.world.build_id
    user = sb.world.user_by_handle_or_id(who) if who else None
    for slug in SLUGS:
        for query in _queries(sb):
            want = _answers(twin, slug, query)
            for attempt in ("first", "cached"):
                for got, expected, kind in zip(_answers(b, slug, query), want, ("data", "page"), strict=True):
                    _same(got, expected, f"{who} {kind} /{slug}?{query} {attempt}")
            if slug == BIG:
                params = dict(part.split("=", 1) for part in query.split("&") if part)
                props = pages.feed_result(sb, slug, params, user).props
                assert want[0].content == _falcon_media(props), query
    assert len(sb.pages) > 0


def test_a_repeated_request_is_not_rendered_again(sb: Sandbox, alice: Browser, monkeypatch: pytest.MonkeyPatch) -> None:
    renders: list[str] = []
    real = pages.feed_result

    def counting(sb_: Sandbox, slug: str, params: dict[str, str], user: Any) -> pages.PageResult:
        renders.append(slug)
        return real(sb_, slug, params, user)

    monkeypatch.setattr(pages, "feed_result", counting)
    first = alice.data(f"/{BIG}", query_string=f"group={BIG}&p=2&s=newest")
    again = alice.data(f"/{BIG}", query_string=f"group={BIG}&s=newest&p=2")
    assert again.content == first.content and len(renders) == 1
    alice.get(f"/{BIG}", query_string="p=2&s=newest")
    alice.get(f"/{BIG}", query_string="p=2&s=newest")
    assert len(renders) == 2  # the HTML page once more, then from the cache
    alice.get(f"/{BIG}", query_string="s=newest&p=2")  # the page echoes its query: another entry
    assert len(renders) == 3


def test_the_html_page_echoes_its_own_query_string(alice: Browser) -> None:
    """``p=junk`` and ``p=1`` are the same feed page, but each page shows the query it was asked."""
    junk = alice.get(f"/{BIG}", query_string="p=junk").text
    one = alice.get(f"/{BIG}", query_string="p=1").text
    assert '"query":{"group":"builders-club","p":"junk"}' in junk
    assert '"query":{"group":"builders-club","p":"1"}' in one


def test_the_cache_keeps_the_most_recently_used_entries() -> None:
    cache = PageCache(3)
    for key in "abcd":
        cache.put(key, Rendered(200, falcon.MEDIA_JSON, key.encode()))
    assert len(cache) == 3 and cache.get("a") is None
    assert cache.get("b") is not None  # b is now the most recent: c goes next
    cache.put("e", Rendered(200, falcon.MEDIA_JSON, b"e"))
    assert cache.get("c") is None and cache.get("b") is not None
    cache.clear()
    assert len(cache) == 0
