"""The stand-in feed's order where keys tie, and its windows' edge, on a world of a few posts built directly:
each order is total (ties go to the newer post, then to the post id), and a windowed sort keeps a post
created exactly at the window's start."""

from __future__ import annotations

from scripts.sandbox import feed
from scripts.sandbox.feed import FeedQuery
from scripts.sandbox.model import DAY_US, Group, Post, World

NOW = 1_764_000_000_000_000
GROUP = "9" * 32


def post(pid: str, created: int, *, upvotes: int = 0) -> Post:
    return Post(
        id=pid, name=pid, post_type="generic", group_id=GROUP, user_id="u" * 32, root_id=pid, parent_id="",
        label_id="", created_us=created, updated_us=created, title=pid, content="", upvotes=upvotes,
    )  # fmt: skip


def comment(cid: str, root: str, created: int) -> Post:
    return Post(
        id=cid, name=cid, post_type="comment", group_id=GROUP, user_id="u" * 32, root_id=root, parent_id=root,
        label_id="", created_us=created, updated_us=created, title="", content="c",
    )  # fmt: skip


def world_of(*posts: Post) -> World:
    world = World(seed=0, now_us=NOW, build_id="b")
    world.groups[GROUP] = Group(GROUP, "g", "G", "", NOW - 900 * DAY_US, [], set())
    for each in posts:
        world.add_post(each)
    return world


def ids(world: World, sort: str) -> list[str]:
    _, ordered = feed.ordered(world, GROUP, FeedQuery(sort=sort), None, NOW)
    return [p.id for p in ordered]


def test_posts_made_at_the_same_moment_are_ordered_by_id() -> None:
    made = [f"{n:x}" * 32 for n in (3, 9, 1, 7, 5)]  # added in this order, none in id order
    world = world_of(*(post(pid, NOW - DAY_US) for pid in made))
    expected = sorted(made, reverse=True)
    assert ids(world, "newest") == expected
    assert ids(world, "newest-cm") == expected
    assert ids(world, "best") == expected


def test_equal_activity_goes_to_the_newer_post_before_the_id() -> None:
    """The older post's comment brings its activity level with the newer post's creation."""
    world = world_of(
        post("f" * 32, NOW - 3 * DAY_US), post("a" * 32, NOW - DAY_US), comment("c" * 32, "f" * 32, NOW - DAY_US)
    )
    assert ids(world, "newest-cm") == ["a" * 32, "f" * 32]


def test_equal_votes_go_to_the_newer_post_before_the_id() -> None:
    world = world_of(post("f" * 32, NOW - 3 * DAY_US, upvotes=4), post("a" * 32, NOW - DAY_US, upvotes=4))
    assert ids(world, "best") == ["a" * 32, "f" * 32]


def test_a_window_keeps_a_post_made_exactly_at_its_start() -> None:
    world = world_of(post("a" * 32, NOW - DAY_US), post("b" * 32, NOW - DAY_US - 1))
    assert ids(world, "best-1d") == ["a" * 32]
    assert feed.window_size(world, GROUP, FeedQuery(sort="best-1d"), NOW) == 1
