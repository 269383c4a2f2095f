"""The seeded world keeps the promises ``seed.py`` makes of it (and that other tests lean on): the time
windows always hold posts, pinned posts in their place, the unlabelled posts of one group, the pinned
comments, read state within each reader's groups and never ahead of the clock, who writes, and each root's
last comment. Built directly, without the HTTP app."""

from __future__ import annotations

import functools

from scripts.sandbox.model import DAY_US, HOUR_US, Channel, Post, World, iso
from scripts.sandbox.seed import (
    BUSY_PINNED_AT,
    BUSY_TITLE,
    GROUPS,
    UNLABELLED_EVERY,
    UNLABELLED_GROUP,
    build_world,
    post_name,
)

NOW = 1_764_000_000_000_000  # 2025-11-24, in microseconds


@functools.cache
def world() -> World:
    return build_world(1, NOW)


def roots(slug: str) -> list[Post]:
    w = world()
    group = w.group_by_slug(slug)
    assert group is not None
    return [w.posts[pid] for pid in w.group_posts[group.id]]


def test_every_group_has_five_posts_in_the_last_day_and_twenty_five_in_the_last_week() -> None:
    for slug, *_ in GROUPS:
        created = [p.created_us for p in roots(slug)]
        assert sum(NOW - c < DAY_US for c in created) == 5, slug
        assert sum(NOW - c < 7 * DAY_US for c in created) == 25, slug


def test_pinned_posts_are_older_than_the_newest_page_of_their_group() -> None:
    """So that each also appears in its own place further down, as a repeat (PLATFORM.md)."""
    for slug, *_, handles, _count in GROUPS:
        posts = sorted(roots(slug), key=lambda p: p.created_us)
        pinned = [p for p in posts if p.pinned]
        assert len(pinned) == (3 if handles is None else 1), slug
        # Past the newest 25; a group with fewer posts than that pins among its oldest.
        assert all(posts.index(p) < max(len(pinned), len(posts) - 25) for p in pinned), slug


def test_every_fourth_post_of_one_group_has_no_label_and_no_other_post_lacks_one() -> None:
    for slug, *_ in GROUPS:
        posts = sorted(roots(slug), key=lambda p: p.created_us)
        unlabelled = [i for i, p in enumerate(posts) if not p.label_id]
        if slug == UNLABELLED_GROUP:
            assert unlabelled == [i for i in range(len(posts)) if i % UNLABELLED_EVERY == 1]
        else:
            assert unlabelled == [], slug


def test_the_pinned_comment_is_the_busy_posts_41st_and_elsewhere_the_middle_one() -> None:
    w = world()
    for slug, *_ in GROUPS:
        pinned = [(p, c) for p in roots(slug) for c in p.children if w.posts[c].pinned]
        assert len(pinned) == 1, slug
        post, comment = pinned[0]
        tops = sorted(post.children, key=lambda c: (w.posts[c].created_us, c))
        busy = post.title == BUSY_TITLE
        assert tops.index(comment) == (BUSY_PINNED_AT if busy else len(tops) // 2), slug


def test_reads_are_of_the_readers_groups_and_never_ahead_of_the_clock() -> None:
    w = world()
    for user_id, reads in w.reads.items():
        for post_id, at in reads.items():
            post = w.posts[post_id]
            assert user_id in w.groups[post.group_id].members
            assert post.created_us < at <= NOW


def test_mallory_writes_nothing() -> None:
    """Her sign-in always meets a two-factor prompt: nothing she wrote could be answered as her."""
    w = world()
    mallory = w.user_by_handle_or_id("mallory")
    assert mallory is not None
    assert not any(p.user_id == mallory.id for p in w.posts.values())


def test_each_roots_last_comment_is_its_latest_comment_or_reply() -> None:
    """Replies are seeded after their comment and before the next comment, which may be older than them."""
    w = world()
    latest: dict[str, tuple[int, str]] = {}
    for post in w.posts.values():
        if not post.is_root:
            latest[post.root_id] = max(latest.get(post.root_id, (0, "")), (post.created_us, post.id))
    for post in w.posts.values():
        if post.is_root:
            assert post.last_comment_us == latest.get(post.id, (0, ""))[0], post.id


def test_times_are_written_with_one_to_six_fraction_digits() -> None:
    assert iso(1_731_068_076_000_000) == "2024-11-08T12:14:36.0Z"
    assert iso(1_731_068_076_116_300) == "2024-11-08T12:14:36.1163Z"
    assert iso(1_731_068_076_000_001) == "2024-11-08T12:14:36.000001Z"


def test_a_title_without_letters_or_digits_still_names_its_post() -> None:
    assert post_name("!!! ???", "0123456789abcdef" * 2) == "post-01234567"
    assert post_name("Seed swap!", "0123456789abcdef" * 2) == "seed-swap-01234567"


def test_a_channel_without_messages_dates_from_its_opening() -> None:
    channel = Channel(id="c" * 32, user_ids=("a" * 32, "b" * 32), created_us=NOW - HOUR_US)
    assert channel.updated_us == NOW - HOUR_US
