"""The platform's chat records (api2, snake_case; camelCase read too) → the core's model.

PLATFORM.md describes a channel as ``id``, ``user: {first_name, last_name, …}``, ``user_ids``,
``metadata.num_unread`` and ``last_message``: the other member's name is promised, their id and handle
are not. Their id is then the one of ``user_ids`` that is not the signed-in user; a handle the record does
not carry is empty. A channel from which the other member cannot be told at all is still a conversation
(``with`` null), so that one such record never fails a whole inbox.
"""

from __future__ import annotations

from collections.abc import Callable

from adapters.platform.platform_mapping import (
    display_name,
    meta,
    number,
    obj,
    optional_text,
    pick,
    text,
    timestamp,
    user,
)
from community_api.model import Conversation, Message, PlatformUser

# The signed-in user's id, asked for only when a channel does not name its other member (it may cost a
# platform read; it is cached per session).
SelfId = Callable[[], str]


def message(data: object, conversation_id: str | None = None) -> Message:
    record = obj(data, "message")
    info = meta(record)
    return Message(
        id=text(record, "id"),
        conversation_id=optional_text(record, "channelId", "channel_id") or conversation_id or "",
        # PLATFORM.md: a message's sender is ``metadata.src``; an inbox's ``last_message`` is described
        # "with metadata.content, src", which may also mean ``src`` beside ``metadata``: both are read.
        sender_id=text(info if info.get("src") is not None else record, "src"),
        content=text(info, "content", default=""),
        created_at=timestamp(record, "createdAt", "created_at"),
    )


def channel_member(
    record: dict[str, object], self_id: SelfId | None, member_id: str | None = None
) -> PlatformUser | None:
    """The other member of a channel: its ``user`` as a member record when it names them, else their id
    from ``user_ids`` (or ``member_id``, when the caller knows whom the channel is with) with the name
    ``user`` gives (first and last)."""
    other = record.get("user")
    other = other if isinstance(other, dict) else {}
    if optional_text(other, "id") is not None and optional_text(other, "name") is not None:
        return user(other)
    member_id = optional_text(other, "id") or _other_of(record, self_id) or member_id
    if member_id is None:
        return None
    handle = optional_text(other, "name") or ""
    return PlatformUser(id=member_id, handle=handle, name=display_name(other, handle))


def _other_of(record: dict[str, object], self_id: SelfId | None) -> str | None:
    ids = pick(record, "userIds", "user_ids")
    if not isinstance(ids, list) or self_id is None:
        return None
    members = {member for member in ids if type(member) is str and member}
    if not members:
        return None
    others = members - {self_id()}
    return others.pop() if len(others) == 1 else None


def conversation(data: object, self_id: SelfId | None = None, member_id: str | None = None) -> Conversation:
    """A channel as a conversation. ``member_id``: the other member's id when the caller knows it (a chat
    it just opened with them), for a channel that names nobody."""
    record = obj(data, "channel")
    cid = text(record, "id")
    last = record.get("lastMessage", record.get("last_message"))
    last_message = message(last, cid) if last else None
    updated = pick(record, "updatedAt", "updated_at")
    return Conversation(
        id=cid,
        with_=channel_member(record, self_id, member_id),
        last_message=last_message,
        unread_count=number(meta(record), "numUnread", "num_unread"),
        awaiting_reply=False,
        updated_at=timestamp(record, "updatedAt", "updated_at")
        if updated
        else (last_message.created_at if last_message else None),
    )
