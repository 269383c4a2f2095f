"""The feed's order, as the platform serves it.

- No ``s`` (or ``s=newest-cm``): recent activity, by the last comment's time, else the creation time.
- ``s=newest``: by creation time. ``s=best``: by upvotes. ``s=best-1d|best-1w|best-1m|best-1y``: by upvotes
  among posts created in the last 1/7/30/365 days. Ties go to the newer post.
- Any other ``s`` is treated as no ``s`` (a website ignores a sort it does not know).
- ``fl=unr``: only posts the viewer has not read, and the order is forced to ``newest`` whatever ``s`` says
  (the site's unread tab only exists as ``s=newest&fl=unr``). Other ``fl`` values are ignored.
- ``c``: only that label; an unknown label matches nothing.
- Pages are 1-based (``p``, default 1, junk means 1) of 30 posts. Page 1 starts with the pinned posts that
  pass the label and unread filters (not the time window), newest first, and then its 30 posts: pinned
  posts also appear again in their own place, so page 1 may hold up to 33 entries. No total is given: a
  page past the end is empty.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import islice

from scripts.sandbox.model import DAY_US, Post, User, World

PAGE_SIZE = 30
DEFAULT_SORT = "newest-cm"
WINDOWS = {"best-1d": 1, "best-1w": 7, "best-1m": 30, "best-1y": 365}
SORTS = {DEFAULT_SORT, "newest", "best", *WINDOWS}


@dataclass(frozen=True, slots=True)
class FeedQuery:
    sort: str = DEFAULT_SORT
    unread: bool = False
    label_id: str | None = None
    page: int = 1

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> FeedQuery:
        unread = params.get("fl") == "unr"
        sort = params.get("s") or DEFAULT_SORT
        sort = "newest" if unread else (sort if sort in SORTS else DEFAULT_SORT)
        try:
            page = max(1, int(params.get("p") or 1))
        except ValueError:
            page = 1
        return cls(sort=sort, unread=unread, label_id=params.get("c") or None, page=page)


# The three orders, as sort keys (descending). Every key ends with the post id, so each order is total.
_ORDERS: dict[str, Callable[[Post], tuple[int | str, ...]]] = {
    "newest": lambda p: (p.created_us, p.id),
    DEFAULT_SORT: lambda p: (p.activity_us, p.created_us, p.id),
    "best": lambda p: (p.upvotes, p.created_us, p.id),
}


def _order(world: World, group_id: str, sort: str) -> tuple[Post, ...]:
    """Every live post of the group in the order of ``sort`` (windowed sorts: ``best``), memoised until
    the posts change (``World.memo``): only the filters below run for each page."""
    name = sort if sort in _ORDERS else "best"

    def compute() -> tuple[Post, ...]:
        live = [world.posts[pid] for pid in world.group_posts.get(group_id, [])]
        return tuple(sorted((p for p in live if not p.deleted), key=_ORDERS[name], reverse=True))

    return world.memo(("feed-order", group_id, name), compute)


def _pinned(world: World, group_id: str) -> tuple[Post, ...]:
    return world.memo(
        ("feed-pinned", group_id), lambda: tuple(p for p in _order(world, group_id, "newest") if p.pinned)
    )


def _filtered(
    posts: Iterable[Post], label: str | None, read: Mapping[str, int], since_us: int | None
) -> Iterator[Post]:
    """``posts`` of ``label`` (if any), not in ``read``, and created at ``since_us`` or later (if any)."""
    for p in posts:
        if (label and p.label_id != label) or (read and p.id in read):
            continue
        if since_us is not None and p.created_us < since_us:
            continue
        yield p


def _since(q: FeedQuery, now_us: int) -> int | None:
    """The oldest creation time a windowed sort keeps, else None."""
    return now_us - WINDOWS[q.sort] * DAY_US if q.sort in WINDOWS else None


def window_size(world: World, group_id: str, q: FeedQuery, now_us: int) -> int | None:
    """How many live posts of the group are recent enough for the window of ``q.sort`` (None: no window).

    The window keeps the posts created at ``since`` or later, a prefix of the ``newest`` order, so for
    the same posts this count tells which posts the window holds: a cached page keyed by it is rendered
    again as soon as the clock takes a post out of the window.
    """
    since = _since(q, now_us)
    if since is None:
        return None
    return bisect_right(_order(world, group_id, "newest"), -since, key=lambda p: -p.created_us)


def _walk(
    world: World, group_id: str, q: FeedQuery, viewer: User | None, now_us: int
) -> tuple[list[Post], Iterator[Post]]:
    read = world.reads.get(viewer.id, {}) if viewer and q.unread else {}
    since = _since(q, now_us)
    pinned = list(_filtered(_pinned(world, group_id), q.label_id, read, None))
    return pinned, _filtered(_order(world, group_id, q.sort), q.label_id, read, since)


def ordered(
    world: World, group_id: str, q: FeedQuery, viewer: User | None, now_us: int
) -> tuple[list[Post], list[Post]]:
    """``(pinned, ordered)``: the pinned posts that lead page 1, and every post of the query in order."""
    pinned, posts = _walk(world, group_id, q, viewer, now_us)
    return pinned, list(posts)


def page(world: World, group_id: str, q: FeedQuery, viewer: User | None, now_us: int) -> list[Post]:
    """The posts of page ``q.page``, pinned ones first on page 1."""
    pinned, posts = _walk(world, group_id, q, viewer, now_us)
    return page_of(pinned, posts, q)


def page_of(pinned: list[Post], posts: Iterable[Post], q: FeedQuery) -> list[Post]:
    """Page ``q.page`` of an ordered feed (``ordered`` or ``_walk``), the pinned posts first on page 1."""
    start = (q.page - 1) * PAGE_SIZE
    chunk = list(islice(posts, start, start + PAGE_SIZE))
    return pinned + chunk if q.page == 1 else chunk
