"""Feed pages and page data: sorts, filters, pinned posts, paging, build ids, read state."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from falcon import testing

from tests.sandbox.conftest import BIG, Browser
from tests.sandbox.test_auth_firewall import next_data


def ts(iso: str) -> float:
    return datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


def walk(b: Browser, query: str = "", slug: str = BIG, limit: int = 100) -> list[list[dict]]:
    """Every page of the feed until an empty one, as lists of posts."""
    pages: list[list[dict]] = []
    for p in range(1, limit):
        r = b.data(f"/{slug}", params_csv=False, query_string=f"group={slug}&p={p}{query}")
        assert r.status_code == 200
        posts = [t["post"] for t in r.json["pageProps"]["postTrees"]]
        if not posts:
            return pages
        pages.append(posts)
    raise AssertionError("no empty page")


def unique(pages: list[list[dict]]) -> list[dict]:
    seen: dict[str, dict] = {}
    for page in pages:
        for post in page:
            seen.setdefault(post["id"], post)
    return list(seen.values())


def regular(pages: list[list[dict]]) -> list[dict]:
    """The posts in their own place: page 1 without its leading pinned block."""
    lead = len({p["id"] for page in pages for p in page if p["metadata"].get("pinned") == 1})
    assert all(p["metadata"].get("pinned") == 1 for p in pages[0][:lead])
    return pages[0][lead:] + [p for page in pages[1:] for p in page]


def test_page_shape_and_private_self(alice: Browser) -> None:
    r = alice.data(f"/{BIG}", query_string=f"group={BIG}")
    props = r.json["pageProps"]
    assert r.json["__N_SSP"] is True
    assert props["sortType"] == "newest-cm" and props["page"] == 1
    assert set(props["env"]) == {"apiUrl", "wsUrl"}  # PLATFORM.md: the API and WebSocket URLs
    assert props["self"]["metadata"]["unreadChats"] >= 1  # private, as the payment details are
    assert props["self"]["apiKeys"][0].startswith("sk_live_") and props["self"]["email"] == "alice@sandbox.test"
    group = props["currentGroup"]
    assert group["name"] == BIG and group["metadata"]["displayName"] == "Builders Club"
    assert len(group["labels"]) == 6 and {"displayName", "posts"} <= set(group["labels"][0]["metadata"])
    post = props["postTrees"][0]["post"]
    for key in ("id", "name", "postType", "groupId", "userId", "rootId", "labelId", "createdAt", "updatedAt"):
        assert key in post
    assert set(post["metadata"]) >= {
        "title",
        "content",
        "comments",
        "upvotes",
        "labels",
        "pinned",
        "hasNewComments",
        "lastComment",
        "lastCommentId",
        "imagePreview",
        "attachments",
        "videoLinksData",
        "contributors",
        "myVote",
    }
    # JSON held in a string (PLATFORM.md, "Posts and comments").
    assert json.loads(post["metadata"]["videoLinksData"]) == [] and json.loads(post["metadata"]["contributors"]) == []
    assert set(post["user"]) == {"id", "name", "firstName", "lastName", "metadata"}
    assert post["createdAt"].endswith("Z")


def test_html_page_embeds_the_same_page_props(alice: Browser) -> None:
    page = alice.get(f"/{BIG}", query_string="s=newest&p=2")
    data = next_data(page.text)
    assert data["buildId"] == alice.client.simulate_get("/__sandbox/state").json["buildId"]
    html_ids = [t["post"]["id"] for t in data["props"]["pageProps"]["postTrees"]]
    json_ids = [
        t["post"]["id"] for t in alice.data(f"/{BIG}", query_string="s=newest&p=2").json["pageProps"]["postTrees"]
    ]
    assert html_ids == json_ids and len(html_ids) == 30


def test_big_group_has_over_1000_posts_and_recent_ones(alice: Browser) -> None:
    posts = unique(walk(alice, "&s=newest"))
    assert len(posts) > 1000
    now = datetime.now(UTC).timestamp()
    ages = [now - ts(p["createdAt"]) for p in posts]
    assert sum(a < 86400 for a in ages) >= 3 and sum(a < 7 * 86400 for a in ages) >= 20
    assert max(ages) > 600 * 86400


def test_newest_and_default_orders(alice: Browser) -> None:
    newest = regular(walk(alice, "&s=newest"))
    created = [ts(p["createdAt"]) for p in newest]
    assert created == sorted(created, reverse=True)
    default = regular(walk(alice))
    activity = [p["metadata"]["lastComment"] / 1e9 or ts(p["createdAt"]) for p in default]  # nanoseconds
    assert activity == sorted(activity, reverse=True)
    assert [p["id"] for p in default] != [p["id"] for p in newest]
    assert {p["id"] for p in default} == {p["id"] for p in newest}


@pytest.mark.parametrize(
    ("sort", "days"), [("best-1d", 1), ("best-1w", 7), ("best-1m", 30), ("best-1y", 365), ("best", None)]
)
def test_best_sorts(alice: Browser, sort: str, days: int) -> None:
    everything = unique(walk(alice, "&s=newest"))
    pages = walk(alice, f"&s={sort}")
    posts = regular(pages)
    votes = [p["metadata"]["upvotes"] for p in posts]
    assert votes == sorted(votes, reverse=True)
    now = datetime.now(UTC).timestamp()
    expected = {p["id"] for p in everything if days is None or now - ts(p["createdAt"]) < days * 86400 - 5}
    got = {p["id"] for p in posts}
    assert expected <= got and len(got - expected) <= 1  # a post may sit right on the window's edge


def test_unknown_sort_is_the_default_and_unread_forces_newest(alice: Browser) -> None:
    assert alice.data(f"/{BIG}", query_string="s=bogus").json["pageProps"]["sortType"] == "newest-cm"
    assert alice.data(f"/{BIG}", query_string="s=best&fl=unr").json["pageProps"]["sortType"] == "newest"


@pytest.mark.parametrize("query", ["fl=all", "fl=UNR", "fl=", "p=abc", "p=0", "p=-3", "p=1.5", "p="])
def test_a_filter_or_a_page_the_site_does_not_know_is_ignored(alice: Browser, query: str) -> None:
    """Only ``fl=unr`` filters (and forces ``newest``); any other ``fl`` is ignored, and a page that is not
    a positive whole number is page 1, as a website treats a query it does not understand."""

    def shown(query_string: str) -> tuple[str, int, list[str]]:
        props = alice.data(f"/{BIG}", query_string=query_string).json["pageProps"]
        return props["sortType"], props["page"], [tree["post"]["id"] for tree in props["postTrees"]]

    assert shown(f"group={BIG}&{query}") == shown(f"group={BIG}")


def test_pinned_lead_page_one_and_repeat_in_place(alice: Browser) -> None:
    for query in ("", "&s=newest", "&s=best"):
        pages = walk(alice, query)
        first = pages[0]
        assert [p["metadata"].get("pinned") for p in first[:3]] == [1, 1, 1]
        assert len(first) == 33 and all(len(p) == 30 for p in pages[1:-1])
        pinned = {p["id"] for p in first[:3]}
        later = [p["id"] for page in pages for p in page][3:]
        assert pinned <= set(later)  # again in their own place


def test_in_one_group_pinned_posts_lead_every_page(alice: Browser) -> None:
    """PLATFORM.md: a third client reports pinned posts resurfacing at the top of later pages too; the
    stand-in serves that in night-owls (its repeat in its own place stays as well). Past page 1 they are
    repeats, which carry no ``metadata.pinned``. A page past the end stays empty, so a walk still ends."""
    from scripts.sandbox.pages import PINNED_ON_EVERY_PAGE

    pages = walk(alice, "&s=newest", slug=PINNED_ON_EVERY_PAGE)
    assert len(pages) >= 2
    pinned = [p["id"] for p in pages[0] if p["metadata"].get("pinned") == 1]
    assert pinned
    for number, page in enumerate(pages, start=1):
        assert [p["id"] for p in page[: len(pinned)]] == pinned
        assert all((p["metadata"].get("pinned") == 1) == (number == 1) for p in page[: len(pinned)])
    own_places = [p["id"] for page in pages for p in page[len(pinned) :]]
    assert set(pinned) <= set(own_places) and len(own_places) == len(set(own_places))


def test_page_past_the_end_is_empty(alice: Browser) -> None:
    pages = walk(alice, "&s=newest")
    r = alice.data(f"/{BIG}", query_string=f"s=newest&p={len(pages) + 5}")
    assert r.status_code == 200 and r.json["pageProps"]["postTrees"] == []
    # The page data carries ``total`` (PLATFORM.md); an empty page stays the end a client walks to.
    assert r.json["pageProps"]["total"] == sum(len(p) for p in pages) - len(
        [t for t in pages[0] if t["metadata"].get("pinned") == 1]
    )


def test_label_filter(alice: Browser) -> None:
    label = alice.data(f"/{BIG}").json["pageProps"]["currentGroup"]["labels"][1]
    posts = unique(walk(alice, f"&s=newest&c={label['id']}"))
    assert posts and all(p["labelId"] == label["id"] for p in posts)
    assert len(posts) == label["metadata"]["posts"]
    assert alice.data(f"/{BIG}", query_string="c=nope").json["pageProps"]["postTrees"] == []


def test_unread_filter_and_read_state(alice: Browser, browser: Callable[..., Browser]) -> None:
    unread = unique(walk(alice, "&s=newest&fl=unr"))
    everything = unique(walk(alice, "&s=newest"))
    assert 0 < len(unread) < len(everything)
    bob_unread = unique(walk(browser("bob"), "&s=newest&fl=unr"))
    assert {p["id"] for p in bob_unread} != {p["id"] for p in unread}  # read state is per user
    target = unread[5]
    r = alice.data(f"/{BIG}/{target['name']}")
    assert r.status_code == 200 and r.json["pageProps"]["postTree"]["post"]["id"] == target["id"]
    assert target["id"] not in {p["id"] for p in unique(walk(alice, "&s=newest&fl=unr"))}
    target2 = unread[6]
    assert alice.get(f"/{BIG}/{target2['name']}").status_code == 200  # the HTML page marks it read too
    assert target2["id"] not in {p["id"] for p in unique(walk(alice, "&s=newest&fl=unr"))}


def test_ordering_readout_matches_pages(alice: Browser) -> None:
    for query in ("", "&s=best-1w", "&s=newest&fl=unr"):
        pages = walk(alice, query)
        order = alice.client.simulate_get(
            "/__sandbox/ordering", query_string=f"group={BIG}&user=alice&pages=100{query}"
        ).json
        assert order["pages"] == [[p["id"] for p in page] for page in pages]
        assert order["ids"] == [p["id"] for p in unique(pages)]


def test_stale_build_id_is_404_and_changes_with_deploys(client: testing.TestClient, alice: Browser) -> None:
    old = client.simulate_get("/__sandbox/state").json["buildId"]
    assert alice.get(f"/_next/data/{old}/{BIG}.json").status_code == 200
    new = client.simulate_post("/__sandbox/build-id").json["buildId"]
    assert new != old
    assert alice.get(f"/_next/data/{old}/{BIG}.json").status_code == 404
    assert next_data(alice.get(f"/{BIG}").text)["buildId"] == new
    assert alice.get(f"/_next/data/{new}/{BIG}.json").status_code == 200
    client.simulate_post("/__sandbox/build-id", json={"buildId": "deploy-7"})
    assert alice.get(f"/_next/data/deploy-7/{BIG}.json").status_code == 200


def test_unknown_group_and_post(alice: Browser) -> None:
    assert alice.data("/no-such-group").status_code == 404
    assert alice.data("/no-such-group").json["notFound"] is True
    assert alice.data(f"/{BIG}/no-such-post").status_code == 404
    assert alice.get("/no-such-group").status_code == 404


def test_post_page_has_the_comment_tree(alice: Browser) -> None:
    posts = unique(walk(alice, "&s=newest"))
    post = next(p for p in posts if p["metadata"]["comments"] >= 4)
    tree = alice.data(f"/{BIG}/{post['name']}").json["pageProps"]["postTree"]
    assert len(tree["children"]) == post["metadata"]["comments"]  # top-level comments (PLATFORM.md)
    assert all(c["post"]["parentId"] == post["id"] for c in tree["children"])


def test_a_non_members_feed_is_the_groups_about_page(browser: Callable[..., Browser]) -> None:
    """PLATFORM.md: Next serves the about page in the feed's place, with no posts and no ``self``."""
    dave = browser("dave")
    r = dave.data("/quiet-garden")
    assert r.status_code == 200
    props = r.json["pageProps"]
    assert props["currentGroup"]["name"] == "quiet-garden" and "postTrees" not in props and "self" not in props
    page = next_data(dave.get("/quiet-garden").text)
    assert page["page"] == "/[group]/about" and "postTrees" not in page["props"]["pageProps"]
    about = next_data(dave.get("/quiet-garden/about").text)["props"]["pageProps"]
    assert about["currentGroup"]["name"] == "quiet-garden" and "postTree" not in about


def test_a_non_members_post_page_is_redirected_to_about(browser: Callable[..., Browser]) -> None:
    """The other variant reported: Next's redirect, on a post page."""
    dave, alice = browser("dave"), browser("alice")
    post = alice.data("/quiet-garden").json["pageProps"]["postTrees"][0]["post"]
    r = dave.data(f"/quiet-garden/{post['name']}")
    assert r.status_code == 200
    assert r.json["pageProps"] == {"__N_REDIRECT": "/quiet-garden/about", "__N_REDIRECT_STATUS": 307}


def test_signed_out_the_feed_is_the_groups_about_page(browser: Callable[..., Browser]) -> None:
    b = browser()
    page = next_data(b.get(f"/{BIG}").text)
    assert page["page"] == "/[group]/about" and "postTrees" not in page["props"]["pageProps"]
    assert b.get("/").status_code == 302


def test_a_pinned_repeat_loses_its_pinned_field_and_in_one_group_its_id(alice: Browser) -> None:
    """PLATFORM.md: the repeat of a pinned post (in its own place, past the pinned posts that lead page 1)
    carries no ``metadata.pinned``; one client saw it under another id with the same slug (quiet-garden)."""
    appearances: dict[str, list[dict]] = {}
    for page in (1, 2):
        for tree in alice.data("/quiet-garden", query_string=f"s=newest&p={page}").json["pageProps"]["postTrees"]:
            appearances.setdefault(tree["post"]["name"], []).append(tree["post"])
    ((leader, repeat),) = [posts for posts in appearances.values() if len(posts) > 1]
    assert leader["metadata"]["pinned"] == 1 and "pinned" not in repeat["metadata"]
    assert repeat["id"] != leader["id"] and repeat["name"] == leader["name"]


def test_page_data_carries_total_and_one_group_lists_no_labels(browser: Callable[..., Browser]) -> None:
    bob = browser("bob")
    props = bob.data("/quiet-garden", query_string="s=newest").json["pageProps"]
    pages = [
        bob.data("/quiet-garden", query_string=f"s=newest&p={p}").json["pageProps"]["postTrees"] for p in range(1, 5)
    ]
    pinned = [t for t in pages[0] if t["post"]["metadata"].get("pinned") == 1]
    assert props["total"] == sum(len(page) for page in pages) - len(pinned)  # the pinned lead is a repeat
    guild = bob.data("/design-guild").json["pageProps"]
    assert guild["currentGroup"]["labels"] == [] and guild["postTrees"]
    gid = guild["currentGroup"]["id"]
    assert bob.get(f"/api2/groups/{gid}/labels").json["labels"]  # api2 still lists them
