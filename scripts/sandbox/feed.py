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

from collections.abc import Mapping
from dataclasses import dataclass

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


def _candidates(world: World, group_id: str, q: FeedQuery, viewer: User | None) -> list[Post]:
    read = world.reads.get(viewer.id, {}) if viewer else {}
    out = []
    for pid in world.group_posts.get(group_id, []):
        p = world.posts[pid]
        if p.deleted or (q.label_id and p.label_id != q.label_id) or (q.unread and pid in read):
            continue
        out.append(p)
    return out


def ordered(world: World, group_id: str, q: FeedQuery, viewer: User | None,
            now_us: int) -> tuple[list[Post], list[Post]]:
    """``(pinned, ordered)``: the pinned posts that lead page 1, and every post of the query in order."""
    posts = _candidates(world, group_id, q, viewer)
    pinned = sorted((p for p in posts if p.pinned), key=lambda p: (p.created_us, p.id), reverse=True)
    if q.sort in WINDOWS:
        since = now_us - WINDOWS[q.sort] * DAY_US
        posts = [p for p in posts if p.created_us >= since]
    if q.sort == "newest":
        posts.sort(key=lambda p: (p.created_us, p.id), reverse=True)
    elif q.sort == DEFAULT_SORT:
        posts.sort(key=lambda p: (p.activity_us, p.created_us, p.id), reverse=True)
    else:
        posts.sort(key=lambda p: (p.upvotes, p.created_us, p.id), reverse=True)
    return pinned, posts


def page(world: World, group_id: str, q: FeedQuery, viewer: User | None, now_us: int) -> list[Post]:
    """The posts of page ``q.page``, pinned ones first on page 1."""
    pinned, posts = ordered(world, group_id, q, viewer, now_us)
    start = (q.page - 1) * PAGE_SIZE
    chunk = posts[start:start + PAGE_SIZE]
    return pinned + chunk if q.page == 1 else chunk
