"""The platform's answers to a write that creates something: a post, a comment, a DM.

PLATFORM.md promises little of them: a new post or comment is answered ``{id, name, …}`` without the
author, and the answer to a sent DM is not described at all. By then the thing exists on the platform, so
an answer we cannot read would be reported as a failure whose outcome is unknown, and a client that then
tries again posts twice. So only the id is required (without it nothing says what was created); every
other field is read from the answer when it is there (the platform's word wins: it may have trimmed the
text or moved a reply) and otherwise taken from what was sent, the time from when the answer came.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from adapters.platform.platform_mapping import meta, number, obj, optional_text, pick, text, timestamp
from community_api.model import Comment, Message, PlatformUser, Post


def _time_or(record: dict[str, Any], camel: str, snake: str, fallback: datetime) -> datetime:
    return timestamp(record, camel, snake) if pick(record, camel, snake) is not None else fallback


def created_post(
    data: object,
    *,
    platform_url: str,
    slug: str | None,
    group_id: str,
    title: str,
    content: str,
    label_id: str | None,
    now: datetime,
) -> Post:
    """A new post from the answer to ``POST api2 /posts`` (no author: the answer has none)."""
    record = obj(data, "post")
    info = meta(record)
    name = optional_text(record, "name")
    created_at = _time_or(record, "createdAt", "created_at", now)
    return Post(
        id=text(record, "id"),
        group_id=optional_text(record, "groupId", "group_id") or group_id,
        title=text(info, "title", default=title),
        content=text(info, "content", default=content),
        # ``labelId`` on the post, or ``metadata.labels`` (the label id as a string, "" for none).
        label_id=optional_text(record, "labelId", "label_id") or optional_text(info, "labels") or label_id,
        author_id=None,
        author=None,
        created_at=created_at,
        updated_at=_time_or(record, "updatedAt", "updated_at", created_at),
        upvotes=number(info, "upvotes"),
        comment_count=number(info, "comments"),
        pinned=bool(number(info, "pinned")),
        url=f"{platform_url}/{slug}/{name}" if slug and name else None,
    )


def created_comment(
    data: object, *, post_id: str, parent_id: str | None, content: str, author: PlatformUser, now: datetime
) -> Comment:
    """A new comment or reply from the answer to ``POST api2 /posts``; ``author`` is the signed-in user (the
    answer has no author). Without ``parent_id`` in the answer, the reply is to what was asked."""
    record = obj(data, "comment")
    parent = (
        optional_text(record, "parentId", "parent_id")
        if pick(record, "parentId", "parent_id") is not None
        else parent_id
    )
    return Comment(
        id=text(record, "id"),
        post_id=optional_text(record, "rootId", "root_id") or post_id,
        # A top-level comment's parent is the post, or "" (PLATFORM.md): both mean none.
        parent_id=None if parent in (None, post_id) else parent,
        author_id=author.id,
        author=author,
        content=text(meta(record), "content", default=content),
        created_at=_time_or(record, "createdAt", "created_at", now),
        upvotes=number(meta(record), "upvotes"),
        pinned=bool(number(meta(record), "pinned")),
    )


def sent_message(data: object, *, conversation_id: str, content: str, sender_id: str, now: datetime) -> Message:
    """A sent DM from the answer to ``POST api2 /channels/{id}/messages``; ``sender_id`` is the signed-in
    user's id. The message itself, or wrapped as ``{message: {…}}`` (the chat request wraps its channel
    so, PLATFORM.md)."""
    record = obj(data, "message")
    wrapped = record.get("message")
    if record.get("id") is None and isinstance(wrapped, dict):
        record = wrapped
    info = meta(record)
    return Message(
        id=text(record, "id"),
        conversation_id=optional_text(record, "channelId", "channel_id") or conversation_id,
        sender_id=optional_text(info, "src") or optional_text(record, "src") or sender_id,
        content=text(info, "content", default=content),
        created_at=_time_or(record, "createdAt", "created_at", now),
    )
