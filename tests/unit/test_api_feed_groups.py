"""whoami, groups and the feed through the REST API against the in-memory platform."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from tests.unit.world_support import Ready

FEED = "/v1/groups/builders-club/posts"


def parse(ts: str) -> datetime:
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


def test_whoami_shows_only_id_handle_name(ready: Ready) -> None:
    result = ready.world.get("/v1/whoami", ready.key)
    assert result.status_code == 200
    assert result.json == {"id": ready.connection["platformUserId"], "handle": "alice", "name": "Alice Andersen"}


def test_groups_and_group_detail(ready: Ready) -> None:
    world = ready.world
    groups = world.get("/v1/groups", ready.key).json["groups"]
    slugs = {g["slug"] for g in groups}
    assert {"builders-club", "quiet-garden"} <= slugs and "design-guild" not in slugs
    by_slug = world.get("/v1/groups/builders-club", ready.key).json
    by_id = world.get(f"/v1/groups/{by_slug['id']}", ready.key).json
    assert by_slug == by_id
    assert {"id", "slug", "name", "description", "memberCount", "labels"} <= set(by_slug)
    assert {label["name"] for label in by_slug["labels"]} == {"General", "Wins", "Questions", "Resources"}
    assert all(set(label) == {"id", "name", "postCount"} for label in by_slug["labels"])


def test_group_of_which_the_account_is_not_a_member_is_not_found(ready: Ready) -> None:
    assert ready.world.get("/v1/groups/design-guild", ready.key).status_code == 404
    assert ready.world.get(f"{'/v1/groups/design-guild/posts'}", ready.key).status_code == 404


def test_default_feed_is_one_page_of_newest(ready: Ready) -> None:
    body = ready.world.get(FEED, ready.key).json
    assert body["sort"] == "newest" and body["pagesRequested"] == 1 and body["pagesFetched"] == 1
    assert body["since"] is None and body["stoppedEarly"] is False
    posts = body["posts"]
    assert 28 <= len(posts) <= 32
    assert len({p["id"] for p in posts}) == len(posts)
    unpinned = [parse(p["createdAt"]) for p in posts if not p["pinned"]]
    assert unpinned == sorted(unpinned, reverse=True)
    first = posts[0]
    assert {
        "id",
        "groupId",
        "title",
        "content",
        "labelId",
        "authorId",
        "author",
        "createdAt",
        "updatedAt",
        "upvotes",
        "commentCount",
        "pinned",
        "url",
    } <= set(first)


@pytest.mark.parametrize(
    ("params", "parameter"),
    [
        ({"pages": "0"}, "pages"),
        ({"pages": "31"}, "pages"),
        ({"pages": "-1"}, "pages"),
        ({"pages": "1.5"}, "pages"),
        ({"pages": "abc"}, "pages"),
        ({"pages": "99999999999"}, "pages"),
        ({"pages": " 2"}, "pages"),
        ({"sort": "top"}, "sort"),
        ({"sort": "NEWEST"}, "sort"),
        ({"sort": "best-2d"}, "sort"),
        ({"since": "48h"}, "since"),
        ({"since": "1d"}, "since"),
        ({"since": "2026-13-01"}, "since"),
        ({"since": "2026-02-30"}, "since"),
        ({"since": "26-01-01"}, "since"),
        ({"since": "yesterday"}, "since"),
    ],
)
def test_out_of_range_or_unknown_feed_values_are_400_not_clamped(
    ready: Ready, params: dict[str, str], parameter: str
) -> None:
    result = ready.world.get(FEED, ready.key, params=params)
    assert result.status_code == 400
    assert result.json["error"]["code"] == "invalid_request"
    assert result.json["error"]["details"]["parameter"] == parameter
    assert ready.world.gateway.pages_asked() == 0


def test_repeated_parameter_is_refused(ready: Ready) -> None:
    result = ready.world.get(FEED, ready.key, query_string="pages=1&pages=2")
    assert result.status_code == 400


@pytest.mark.parametrize("pages", [1, 2, 5, 30])
def test_pages_are_fetched_and_deduplicated(ready: Ready, pages: int) -> None:
    body = ready.world.get(FEED, ready.key, params={"pages": str(pages)}).json
    ids = [p["id"] for p in body["posts"]]
    assert len(ids) == len(set(ids))
    assert body["pagesRequested"] == pages
    # 200 posts: 30 a page, so the seventh page is the last with posts and the eighth is empty.
    assert body["pagesFetched"] == min(pages, 8)
    assert body["stoppedEarly"] is (pages > 8)
    if pages >= 7:
        assert len(ids) == 200  # every post of the group, each once


@pytest.mark.parametrize("sort", ["newest-cm", "newest", "unread", "best-1d", "best-1w", "best-1m", "best-1y", "best"])
def test_each_sort_is_accepted_and_echoed(ready: Ready, sort: str) -> None:
    body = ready.world.get(FEED, ready.key, params={"sort": sort, "pages": "2"}).json
    assert body["sort"] == sort
    if sort.startswith("best"):
        upvotes = [p["upvotes"] for p in body["posts"] if not p["pinned"]]
        assert upvotes == sorted(upvotes, reverse=True)


@pytest.mark.parametrize("since", ["24h", "7d"])
def test_since_window_stops_paging_early_with_newest(ready: Ready, since: str) -> None:
    world = ready.world
    body = world.get(FEED, ready.key, params={"pages": "30", "since": since}).json
    cutoff = world.clock.now() - (timedelta(hours=24) if since == "24h" else timedelta(days=7))
    assert body["posts"], "the seed holds posts in every window"
    assert all(parse(p["createdAt"]) >= cutoff for p in body["posts"])
    assert body["stoppedEarly"] is True
    assert body["pagesFetched"] <= 2
    assert world.gateway.pages_asked() <= 3  # batches of 1 then 2, not 30 pages


@pytest.mark.parametrize(("since", "span"), [("24h", timedelta(hours=24)), ("7d", timedelta(days=7))])
def test_a_post_stays_in_a_since_window_until_it_is_older_than_the_window(
    ready: Ready, since: str, span: timedelta
) -> None:
    # The window's length itself, at its edge: the seed's posts sit well inside or well outside both windows,
    # so a window a little short (23 h, 6 days) would have passed every other test.
    world = ready.world
    made = world.post(FEED, ready.key, {"title": "On the edge of the window"}).json["id"]

    def shown() -> bool:
        return made in {
            p["id"] for p in world.get(FEED, ready.key, params={"pages": "3", "since": since}).json["posts"]
        }

    world.clock.advance(seconds=(span - timedelta(minutes=1)).total_seconds())
    assert shown(), f"a post {span - timedelta(minutes=1)} old is inside since={since}"
    world.clock.advance(minutes=2)
    assert not shown(), f"a post {span + timedelta(minutes=1)} old is outside since={since}"


def test_a_post_exactly_as_old_as_the_window_is_in_it(ready: Ready) -> None:
    """The window's start is part of it: ``since=24h`` reads as "from 24 hours ago on"."""
    world = ready.world
    made = world.post(FEED, ready.key, {"title": "On the very edge"}).json["id"]
    world.clock.advance(hours=24)
    shown = world.get(FEED, ready.key, params={"pages": "3", "since": "24h"}).json["posts"]
    assert made in {p["id"] for p in shown}


def test_since_date_keeps_only_posts_from_that_day_on(ready: Ready) -> None:
    world = ready.world
    day = (world.clock.now() - timedelta(days=10)).strftime("%Y-%m-%d")
    body = world.get(FEED, ready.key, params={"pages": "30", "since": day}).json
    assert body["posts"]
    assert all(p["createdAt"][:10] >= day for p in body["posts"])
    assert body["stoppedEarly"] is True


def test_a_since_window_is_read_whole_past_pinned_repeats_leading_later_pages(ready: Ready) -> None:
    # One reported variant: pinned posts lead every page, past page 1 as repeats without their pinned mark.
    # An old pinned post at the top of page 2 is not the window's end.
    world = ready.world
    world.gateway.pinned_on_every_page.add("builders-club")
    every = world.get(FEED, ready.key, params={"pages": "4"}).json["posts"]
    ordinary = [p for p in every if not p["pinned"]]
    day = ordinary[75]["createdAt"][:10]  # the window's end on page 3
    expected = [p["id"] for p in every if p["createdAt"][:10] >= day]
    body = world.get(FEED, ready.key, params={"pages": "30", "since": day}).json
    assert [p["id"] for p in body["posts"]] == expected
    assert body["stoppedEarly"] is True and body["pagesFetched"] >= 3


def test_since_window_stops_paging_early_with_unread_too(ready: Ready) -> None:
    """Unread posts come newest first, as the newest sort's do: the walk ends at the window's end."""
    world = ready.world
    body = world.get(FEED, ready.key, params={"pages": "30", "since": "24h", "sort": "unread"}).json
    cutoff = world.clock.now() - timedelta(hours=24)
    assert body["posts"] and all(parse(p["createdAt"]) >= cutoff for p in body["posts"])
    assert body["stoppedEarly"] is True and body["pagesFetched"] <= 2
    assert world.gateway.pages_asked() <= 3


def test_since_with_best_sort_reads_every_requested_page(ready: Ready) -> None:
    world = ready.world
    body = world.get(FEED, ready.key, params={"pages": "3", "since": "7d", "sort": "best"}).json
    assert body["pagesFetched"] == 3
    cutoff = world.clock.now() - timedelta(days=7)
    assert all(parse(p["createdAt"]) >= cutoff for p in body["posts"])


def test_unread_excludes_a_post_once_read(ready: Ready) -> None:
    world = ready.world
    unread = world.get(FEED, ready.key, params={"sort": "unread"}).json["posts"]
    target = next(p for p in unread if not p["pinned"])
    world.get(f"/v1/posts/{target['id']}", ready.key)
    again = world.get(FEED, ready.key, params={"sort": "unread"}).json["posts"]
    assert target["id"] not in {p["id"] for p in again}
