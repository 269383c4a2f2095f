"""The stand-in's HTML pages and page data as the site writes them: ``self`` on a post page, a text that
holds ``</script>`` kept whole inside ``__NEXT_DATA__``, page data in UTF-8 as Next writes JSON, page data
asked for without ``.json`` not found, the login page's ``next`` kept on the site, and ``pinned`` written as the
integer PLATFORM.md says it is."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.sandbox.conftest import BIG, Browser, group_id, new_post
from tests.sandbox.test_auth_firewall import next_data


def test_a_post_page_says_who_reads_it_and_shows_nothing_signed_out(browser: Callable[..., Browser]) -> None:
    alice, stranger = browser("alice"), browser()
    post = alice.data(f"/{BIG}").json["pageProps"]["postTrees"][0]["post"]
    props = alice.data(f"/{BIG}/{post['name']}").json["pageProps"]
    assert props["self"]["name"] == "alice" and props["postTree"]["post"]["id"] == post["id"]
    stranger.pass_firewall()
    stranger.build_id = alice.build_id
    props = stranger.data(f"/{BIG}/{post['name']}").json["pageProps"]
    assert props["self"] is None and props["postTree"] is None


def test_a_text_holding_a_closing_script_tag_stays_inside_next_data(alice: Browser) -> None:
    title = '</script><script>alert("x")</script>'
    made = new_post(alice, group_id(alice.client), title)
    page = alice.get(f"/{BIG}/{made['name']}")
    assert page.status_code == 200
    assert next_data(page.text)["props"]["pageProps"]["postTree"]["post"]["metadata"]["title"] == title
    feed = next_data(alice.get(f"/{BIG}?s=newest").text)
    (listed,) = [t["post"] for t in feed["props"]["pageProps"]["postTrees"] if t["post"]["id"] == made["id"]]
    assert listed["metadata"]["title"] == title


def test_page_data_is_written_in_utf8_as_next_writes_it(alice: Browser) -> None:
    title = "Café ☕ 日本"
    made = new_post(alice, group_id(alice.client), title)
    r = alice.data(f"/{BIG}", query_string="s=newest")
    assert title.encode() in r.content  # not \\u escapes
    (listed,) = [t["post"] for t in r.json["pageProps"]["postTrees"] if t["post"]["id"] == made["id"]]
    assert listed["metadata"]["title"] == title


@pytest.mark.parametrize("path", ["/{build}/builders-club", "/{build}/builders-club/{post}", "/{build}/x.js"])
def test_page_data_without_json_is_not_found(alice: Browser, path: str) -> None:
    post = alice.data(f"/{BIG}").json["pageProps"]["postTrees"][0]["post"]["name"]
    r = alice.get("/_next/data" + path.format(build=alice.build_id, post=post))
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/html")


@pytest.mark.parametrize(
    ("asked", "kept"),
    [
        ("/builders-club", '"/builders-club"'),
        ("//evil.example/x", '"/"'),  # another site: a scheme-relative URL
        ("https://evil.example/", '"/"'),
        ("/a</script><script>alert(1)</script>", '"/a\\u003c/script>\\u003cscript>alert(1)\\u003c/script>"'),
    ],
)
def test_the_login_page_sends_one_back_only_within_the_site(
    browser: Callable[..., Browser], asked: str, kept: str
) -> None:
    page = browser().get("/login", params={"next": asked})
    assert page.status_code == 200
    assert f"var next = {kept};" in page.text


def test_pinned_is_written_as_the_integer_the_platform_writes(alice: Browser) -> None:
    """PLATFORM.md: ``metadata.pinned`` is 1 or 0 (or absent on a repeat), not a JSON boolean."""
    trees = alice.data(f"/{BIG}").json["pageProps"]["postTrees"]
    flags = [t["post"]["metadata"]["pinned"] for t in trees if "pinned" in t["post"]["metadata"]]
    assert set(flags) == {0, 1}
    assert all(type(flag) is int for flag in flags)
