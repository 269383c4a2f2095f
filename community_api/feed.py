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
from community_api.commands import BadField, expects
from community_api.deps import Deps, on_platform
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
# Exactly the days of the calendar, years 0001 to 9999 (what ``datetime`` takes), so that the published
# pattern says what is accepted: each month to its last day, 02-29 in leap years only (a multiple of 4
# that is not of 100, or a multiple of 400). ECMA-262 reads it as Python does (a look-ahead, classes).
_COMMON_DAY = r"((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))"
_LEAP_YEAR = r"([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)"
_DATE = rf"((?!0000)[0-9]{{4}}-{_COMMON_DAY}|{_LEAP_YEAR}-02-29)"
_DATE_FORM = r"[0-9]{4}-[0-9]{2}-[0-9]{2}"  # the form alone: a refusal of 02-30 can say what is wrong
SINCE_PATTERN = f"^(24h|7d|{_DATE})$"
_PAGES = f"an integer from 1 to {MAX_PAGES}"
_SINCE = "24h, 7d or a date YYYY-MM-DD"


def _page_count(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if not 1 <= value <= MAX_PAGES:
        raise BadField(attribute.name, f"must be {_PAGES}")


def _sort(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if value not in SORTS:
        raise BadField(attribute.name, f"must be one of: {', '.join(SORTS)}", allowed=list(SORTS))


def _since(instance: object, attribute: attrs.Attribute[str | None], value: str | None) -> None:
    if value is not None:
        window_start(value, datetime.now(UTC))


@attrs.frozen
class FeedQuery:
    """How much of the feed, in which order, from when (the rules above)."""

    pages: int = attrs.field(default=1, validator=_page_count, metadata=expects(_PAGES))
    sort: str = attrs.field(default=DEFAULT_SORT, validator=_sort, metadata=expects(f"one of: {', '.join(SORTS)}"))
    since: str | None = attrs.field(default=None, validator=_since, metadata=expects(_SINCE))


@attrs.frozen
class FeedPage:
    posts: tuple[Post, ...]
    pages_requested: int
    pages_fetched: int
    stopped_early: bool
    sort: str
    since: str | None


def repeat_keys(post: Post) -> set[str]:
    """What tells a post's repeat: its id, or its URL (the slug: a pinned post resurfaces under its own id or,
    one client reports, under another id with the same slug; PLATFORM.md)."""
    return {post.id} | ({post.url} if post.url else set())


def window_start(since: str, now: datetime) -> datetime:
    if since == "24h":
        return now - timedelta(hours=24)
    if since == "7d":
        return now - timedelta(days=7)
    if re.fullmatch(_DATE, since):
        return datetime.strptime(since, "%Y-%m-%d").replace(tzinfo=UTC)
    if re.fullmatch(_DATE_FORM, since):  # 02-30, 04-31, 2026-02-29 (safe to repeat: digits and dashes)
        raise BadField("since", f"must be {_SINCE} ({since} is no day of the calendar)")
    raise BadField("since", f"must be {_SINCE}")


def read_feed(deps: Deps, actor: Actor, group: str, query: FeedQuery) -> FeedPage:
    group = path_group(group)
    cutoff = window_start(query.since, deps.clock.now()) if query.since else None
    walk_by_date = cutoff is not None and query.sort in EARLY_STOP_SORTS
    posts: list[Post] = []
    seen: set[str] = set()
    fetched = 0
    counted = 0  # platform reads of the batches so far
    next_page = 1
    batch_size = 1 if walk_by_date else query.pages
    done = False
    while not done and next_page <= query.pages:
        batch = list(range(next_page, min(next_page + batch_size, query.pages + 1)))
        # Earlier batches count towards a refusal's wait: a retry reads them again.
        with on_platform(deps, actor.connection, reads=len(batch), counted=counted) as meter:
            results = deps.gateway.feed_pages(actor.session, group, query.sort, batch)
        counted += meter.reads_counted
        for page in results:
            fetched += 1
            if not page:
                done = True
                break
            new: list[Post] = []
            for post in page:
                keys = repeat_keys(post)  # a pinned post resurfaces on later pages
                if not keys & seen:
                    new.append(post)
                seen |= keys
            posts += new
            # The window is passed when a post older than it comes in the walk's order: not a pinned one
            # (pinned posts lead, whatever their age), nor one seen on an earlier page (pinned posts also
            # lead later pages, as repeats without their pinned mark: PLATFORM.md).
            if walk_by_date and cutoff and any(p.created_at < cutoff for p in new if not p.pinned):
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
