"""The feed's memoised orders and counts never change an answer.

``feed.py`` keeps each group's sorted posts (and ``serialize.py`` its label counts) until the posts change.
Here every page is compared with the order computed from scratch by the rules, spelled out again below,
after each kind of change: a new post, a comment (it moves the post in the default sort), a deleted
comment and a deleted post, a post read (the unread tab), and time passing (the ``best-1d`` window).
"""

from __future__ import annotations

from typing import Any

from scripts.sandbox.feed import PAGE_SIZE, WINDOWS
from scripts.sandbox.model import DAY_US, Post, World
from scripts.sandbox.state import Sandbox
from tests.sandbox.conftest import BIG, Browser, Clock, group_id
from tests.sandbox.test_feed import walk

QUERIES = ["", "&s=newest", "&s=best", "&s=best-1d", "&s=best-1w", "&s=newest&fl=unr"]


def reference(world: World, query: dict[str, str], viewer_id: str, now_us: int) -> list[list[str]]:
    """Every non-empty page of the big group's feed, from scratch."""
    group = world.group_by_slug(BIG)
    assert group is not None
    unread = query.get("fl") == "unr"
    sort = "newest" if unread else query.get("s", "newest-cm")
    label = query.get("c")
    read = world.reads.get(viewer_id, {}) if unread else {}
    posts = [world.posts[pid] for pid in world.group_posts[group.id]]
    posts = [p for p in posts if not p.deleted and (not label or p.label_id == label) and p.id not in read]
    pinned = sorted((p for p in posts if p.pinned), key=lambda p: (p.created_us, p.id), reverse=True)
    if sort in WINDOWS:
        posts = [p for p in posts if p.created_us >= now_us - WINDOWS[sort] * DAY_US]

    def key(p: Post) -> tuple[Any, ...]:
        if sort == "newest":
            return (p.created_us, p.id)
        if sort == "newest-cm":
            return (p.last_comment_us or p.created_us, p.created_us, p.id)
        return (p.upvotes, p.created_us, p.id)

    posts.sort(key=key, reverse=True)
    pages = [posts[i : i + PAGE_SIZE] for i in range(0, len(posts), PAGE_SIZE)] or [[]]
    pages[0] = pinned + pages[0]
    return [[p.id for p in page] for page in pages if page]


def check_every_query(sb: Sandbox, alice: Browser, extra: list[str] | None = None) -> None:
    alice_id = sb.world.user_by_handle_or_id("alice").id  # type: ignore[union-attr]
    for query in QUERIES + (extra or []):
        params = dict(part.split("=", 1) for part in query.split("&") if part)
        got = [[p["id"] for p in page] for page in walk(alice, query)]
        assert got == reference(sb.world, params, alice_id, sb.now_us()), query


def check_counts(sb: Sandbox, alice: Browser) -> None:
    group = alice.data(f"/{BIG}").json["pageProps"]["currentGroup"]
    big = sb.world.group_by_slug(BIG)
    assert big is not None
    live = [sb.world.posts[pid] for pid in sb.world.group_posts[big.id] if not sb.world.posts[pid].deleted]
    assert group["metadata"]["totalPosts"] == len(live)
    assert {lb["id"]: lb["metadata"]["posts"] for lb in group["labels"]} == {
        lb.id: sum(p.label_id == lb.id for p in live) for lb in big.labels
    }


def test_memoised_feed_follows_every_change(sb: Sandbox, client: Any, alice: Browser, clock: Clock) -> None:
    gid = group_id(client)
    labels = [lb["id"] for lb in alice.get(f"/api2/groups/{gid}/labels").json["labels"]]
    by_label = [f"&s=newest&c={labels[1]}", f"&c={labels[2]}"]
    check_every_query(sb, alice, by_label)  # fills the memo
    check_counts(sb, alice)

    new = alice.post(
        "/api2/posts",
        json={
            "post_type": "generic",
            "group_id": gid,
            "metadata": {"title": "Memo", "content": "x", "labels": labels[1]},
        },
    ).json
    check_every_query(sb, alice, by_label)
    check_counts(sb, alice)

    old = walk(alice, "&s=newest")[-1][-1]  # the oldest post: a comment takes it to the top of the default
    clock.advance(1)  # after the new post, which is the latest activity so far
    comment = alice.post(
        "/api2/posts",
        json={"post_type": "comment", "root_id": old["id"], "parent_id": old["id"], "metadata": {"content": "up"}},
    ).json
    assert walk(alice)[0][3]["id"] == old["id"]  # after the three pinned posts
    check_every_query(sb, alice, by_label)

    assert alice.delete(f"/api2/posts/{comment['id']}").status_code == 200
    assert old["id"] not in [p["id"] for p in walk(alice)[0][3:]]
    check_every_query(sb, alice, by_label)

    unread = walk(alice, "&s=newest&fl=unr")[0][4]
    assert alice.data(f"/{BIG}/{unread['name']}").status_code == 200  # read: leaves the unread tab
    check_every_query(sb, alice, by_label)

    assert alice.delete(f"/api2/posts/{new['id']}").status_code == 200
    check_every_query(sb, alice, by_label)
    check_counts(sb, alice)

    before = {p["id"] for page in walk(alice, "&s=best-1d") for p in page}
    clock.advance(2 * 86400)  # no write: the windows move with the clock alone
    alice.pass_firewall()  # its token lives a day
    after = {p["id"] for page in walk(alice, "&s=best-1d") for p in page}
    assert after != before
    check_every_query(sb, alice, by_label)


def test_reset_starts_from_the_seed_again(sb: Sandbox, client: Any, alice: Browser) -> None:
    first = walk(alice, "&s=newest")
    gid = group_id(client)
    alice.post(
        "/api2/posts", json={"post_type": "generic", "group_id": gid, "metadata": {"title": "Gone", "content": "x"}}
    )
    assert walk(alice, "&s=newest") != first
    client.simulate_post("/__sandbox/reset", json={})
    assert walk(alice, "&s=newest") == first
