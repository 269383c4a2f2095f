"""Reading a group's feed.

Rules (spec §2, §4, §8):
- ``pages`` 1 to 30 (default 1), ``sort`` one of ``SORTS`` (default ``newest``), ``since`` ``24h``, ``7d``
  or ``YYYY-MM-DD`` (a UTC date, from its midnight on). Any other value is ``invalid_request``: never
  clamped or guessed.
- ``since`` is a publish-date window: only posts created at or after its start are returned.
- With ``newest`` or ``unread`` and a ``since``, the posts come newest first, so paging stops once a page
  reaches past the window. Pages are asked for in growing batches (1, 2, 4, …) so a gateway can fetch a
  batch at once without fetching 30 pages for a 24-hour window. Pinned posts lead page 1 whatever their
  age and do not end the walk.
- Without that, every requested page is asked for in one batch; an empty page ends the feed.
- A post repeated across pages (pinned posts) is listed once.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import attrs

from community_api.access import Actor
from community_api.deps import Deps, on_platform
from community_api.errors import InvalidRequest
from community_api.model import Post
from community_api.platform_ids import path_group

SORTS: tuple[str, ...] = (
    "newest-cm",
    "newest",
    "unread",
    "best-1d",
    "best-1w",
    "best-1m",
    "best-1y",
    "best",
)
DEFAULT_SORT = "newest"
MAX_PAGES = 30
EARLY_STOP_SORTS = frozenset({"newest", "unread"})
SINCE_PATTERN = r"^(24h|7d|\d{4}-\d{2}-\d{2})$"
_INTEGER = re.compile(r"[0-9]{1,3}")


@attrs.frozen
class FeedQuery:
    pages: int = 1
    sort: str = DEFAULT_SORT
    since: str | None = None


@attrs.frozen
class FeedPage:
    posts: tuple[Post, ...]
    pages_requested: int
    pages_fetched: int
    stopped_early: bool
    sort: str
    since: str | None


def parse_feed_query(pages: object = None, sort: object = None, since: object = None) -> FeedQuery:
    """Validate the three feed parameters, as strings (a query string) or typed values (MCP)."""
    if pages is None or pages == "":
        page_count = 1
    elif isinstance(pages, bool):
        raise InvalidRequest("pages must be an integer from 1 to 30", parameter="pages")
    elif isinstance(pages, int):
        page_count = pages
    elif isinstance(pages, str) and _INTEGER.fullmatch(pages):
        page_count = int(pages)
    else:
        raise InvalidRequest("pages must be an integer from 1 to 30", parameter="pages")
    if not 1 <= page_count <= MAX_PAGES:
        raise InvalidRequest("pages must be an integer from 1 to 30", parameter="pages")
    if sort is None or sort == "":
        sort = DEFAULT_SORT
    if not isinstance(sort, str) or sort not in SORTS:
        raise InvalidRequest(f"sort must be one of: {', '.join(SORTS)}", parameter="sort", allowed=list(SORTS))
    if since == "":
        since = None
    if since is not None:
        if not isinstance(since, str):
            raise InvalidRequest("since must be 24h, 7d or a date YYYY-MM-DD", parameter="since")
        window_start(since, datetime.now(UTC))  # validates
    return FeedQuery(pages=page_count, sort=sort, since=since)


def window_start(since: str, now: datetime) -> datetime:
    if since == "24h":
        return now - timedelta(hours=24)
    if since == "7d":
        return now - timedelta(days=7)
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", since):
        try:
            return datetime.strptime(since, "%Y-%m-%d").replace(tzinfo=UTC)
        except ValueError:
            pass
    raise InvalidRequest("since must be 24h, 7d or a date YYYY-MM-DD", parameter="since")


def read_feed(deps: Deps, actor: Actor, group: str, query: FeedQuery) -> FeedPage:
    group = path_group(group)
    cutoff = window_start(query.since, deps.clock.now()) if query.since else None
    walk_by_date = cutoff is not None and query.sort in EARLY_STOP_SORTS
    posts: list[Post] = []
    seen: set[str] = set()
    fetched = 0
    next_page = 1
    batch_size = 1 if walk_by_date else query.pages
    done = False
    while not done and next_page <= query.pages:
        batch = list(range(next_page, min(next_page + batch_size, query.pages + 1)))
        with on_platform(deps, actor.connection.id, reads=len(batch)):
            results = deps.gateway.feed_pages(actor.session, group, query.sort, batch)
        for page in results:
            fetched += 1
            if not page:
                done = True
                break
            for post in page:
                # A pinned post resurfaces on later pages, possibly under another id with the same URL.
                keys = {post.id} | ({post.url} if post.url else set())
                if not keys & seen:
                    posts.append(post)
                seen |= keys
            if walk_by_date and cutoff and any(p.created_at < cutoff for p in page if not p.pinned):
                done = True
                break
        next_page = batch[-1] + 1
        batch_size *= 2
    if cutoff is not None:
        posts = [p for p in posts if p.created_at >= cutoff]
    return FeedPage(
        posts=tuple(posts),
        pages_requested=query.pages,
        pages_fetched=fetched,
        stopped_early=fetched < query.pages,
        sort=query.sort,
        since=query.since,
    )
