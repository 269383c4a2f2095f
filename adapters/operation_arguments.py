"""The argument schemas that several operations of the registry (``adapters/operations.py``) share, their
limits and patterns from the core's constants: ids, groups, cursors, the idempotency key, the feed's query
and a DM's recipient."""

from __future__ import annotations

from adapters.schemas import Schema, arguments, filled_text, optional_text, text
from community_api import dms, feed, idempotency
from community_api.commands import optional_pattern
from community_api.platform_ids import GROUP_PATTERN, ID_HINT, MAX_SLUG, PLATFORM_ID_LENGTH, PLATFORM_ID_PATTERN

# Ids and group names carry the platform's shapes (``community_api.platform_ids``): an agent sees the rule
# up front, and a value talked into it by text it read is refused before anything reaches the platform.
ID = {"pattern": PLATFORM_ID_PATTERN}
GROUP_NAME = {"pattern": GROUP_PATTERN}
GROUP = text("Group id or slug (from list_groups).", MAX_SLUG, **GROUP_NAME)


def optional_group(description: str) -> Schema:
    """An optional group: empty is not given, as ``?group=`` is on REST (an agent fills every argument it
    sees); white space names no group and is refused (``platform_ids.field_group``)."""
    return {
        "type": "string",
        "maxLength": MAX_SLUG,
        "pattern": optional_pattern(GROUP_PATTERN),
        "description": description,
    }


GROUP_HINT = optional_group(
    "Group id or slug of the post: optional, spares a look-up. Given, the post is looked for in that group "
    "only (not found there: not_found)."
)
POST_ID = text(f"Post id (from get_feed or get_post): {ID_HINT}.", PLATFORM_ID_LENGTH, **ID)


def cursor(description: str, max_length: int, pattern: str) -> Schema:
    """A paging cursor. Empty is the same as absent, the first page, on REST (``?cursor=``, which a
    client templating the next request sends) as on MCP (an agent fills every argument it sees)."""
    return {
        "type": "string",
        "maxLength": max_length,
        "pattern": optional_pattern(pattern),
        "description": f"{description} Empty or absent: the first page.",
    }


IDEMPOTENCY_KEY = {
    "type": "string",
    "pattern": idempotency.KEY_PATTERN,
    "description": "Optional. Retrying with the same key and the same arguments within 24 hours returns the "
    "first result instead of acting again: use one when a call may be retried after a time-out. A retry refused "
    f"as conflict says why in details.reason: {idempotency.IN_PROGRESS} (the first call still runs: ask again "
    f"shortly, with the same key), {idempotency.DIFFERENT_REQUEST} (the key was used with other arguments), "
    f"{idempotency.NEVER_FINISHED} (it may have acted: look before acting again).",
}
FEED_ARGS = arguments(
    {
        "group": GROUP,
        "pages": {
            "type": "integer",
            "minimum": 1,
            "maximum": feed.MAX_PAGES,
            "default": 1,
            "description": f"Feed pages to read, 1 to {feed.MAX_PAGES}; about 30 posts a page.",
        },
        "sort": {
            "type": "string",
            "enum": list(feed.SORTS),
            "default": feed.DEFAULT_SORT,
            "description": "newest: new posts first; newest-cm: newest comments first; unread: posts this "
            "account has not read; best-1d/best-1w/best-1m/best-1y/best: top posts of the last day, week, "
            "month, year, or all time.",
        },
        "since": {
            "type": "string",
            "pattern": feed.SINCE_PATTERN,
            "description": "Only posts published in this window: 24h, 7d, or a UTC date YYYY-MM-DD. With "
            "sort newest or unread, paging stops once the window is passed.",
        },
    },
    ("group",),
)
SEND_ARGS = arguments(
    {
        "to": optional_text(
            "Platform user id of the recipient (a post's authorId, a conversation's with.id).",
            PLATFORM_ID_LENGTH,
            PLATFORM_ID_PATTERN,
        ),
        "conversationId": optional_text(
            "Id of an existing conversation (from list_dms).", PLATFORM_ID_LENGTH, PLATFORM_ID_PATTERN
        ),
        "content": filled_text("The message text.", dms.MAX_MESSAGE),
        "group": optional_group("With to: a group you share with the recipient (optional)."),
        "idempotencyKey": IDEMPOTENCY_KEY,
    },
    ("content",),
    # Exactly one recipient given (a blank one is not given); the core refuses the other cases with its own
    # message.
    oneOf=[
        {"required": ["to"], "properties": {"to": ID}},
        {"required": ["conversationId"], "properties": {"conversationId": ID}},
    ],
)
