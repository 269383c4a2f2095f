"""Direct messages (api2 chat routes).

- Inbox (``self/chat-channels``): ``{"channels": [...]}``, newest activity first, ``offset``/``limit``
  (at most 30); a page past the end answers ``"channels": null``; channels without any message yet (just
  opened by a chat request) are not listed.
  ``unread-only=true`` keeps channels with unread messages.
- Thread (``channels/{id}/messages``), as PLATFORM.md reports it: ``before`` and ``after`` are *counts*
  (at most 50 each). Without ``msg``: the ``before`` newest messages (default 20). With ``msg`` (a message
  id, the anchor): up to ``before`` messages older than the anchor, the anchor itself, and up to ``after``
  newer ones ("read around an anchor"). The answer is ``{messages, has_more_before, has_more_after,
  channel}``, oldest first. An unknown anchor answers 404; a count that is not a number from 0 to 50, 400.
  Reading does not mark anything read; ``POST channels/{id}/read`` does.
- A channel names the other member as ``user`` (id, handle as ``name``, first and last name) beside
  ``user_ids``; carol's name them only as PLATFORM.md promises, first and last name
  (``serialize.LEAN_CHANNEL_USER_VIEWER``).
- Another user's channel, or an unknown one: 404 ``not found``.
- Sending passes the anti-spam check first (see ``Sandbox.check_dm_allowed``).
- A chat request needs both users in the group ``g``, else 401 ``action not permitted``; it answers
  ``{channel}``: the existing channel of the pair or a new, empty one (to carol, its id alone: PLATFORM.md
  promises no more).
"""

from __future__ import annotations

import uuid
from typing import Any

from scripts.sandbox import serialize
from scripts.sandbox.model import Channel, Message, User, iso
from scripts.sandbox.state import ApiError, Sandbox

MAX_COUNT = 50  # the largest before/after the platform answers
DEFAULT_BEFORE = 20


def _own_channel(sb: Sandbox, user: User, channel_id: str) -> Channel:
    channel = sb.world.channels.get(channel_id)
    if channel is None or user.id not in channel.user_ids:
        raise ApiError(404, "not found")
    return channel


def inbox(sb: Sandbox, user: User, offset: int, limit: int, unread_only: bool) -> dict[str, Any]:
    with sb.lock:
        chans = [sb.world.channels[c] for c in sb.world.user_channels.get(user.id, [])]
        chans = [c for c in chans if c.messages and (not unread_only or c.num_unread(user.id))]
        chans.sort(key=lambda c: (c.updated_us, c.id), reverse=True)
        page = [serialize.channel(sb.world, c, user) for c in chans[offset : offset + limit]]
        # A page past the end comes as null, not [] (PLATFORM.md, "Chat").
        return {"channels": page if page or offset == 0 else None}


def messages(sb: Sandbox, user: User, channel_id: str, before: int, after: int, anchor: str | None) -> dict[str, Any]:
    with sb.lock:
        channel = _own_channel(sb, user, channel_id)
        total = len(channel.messages)
        if anchor:
            if anchor not in channel.index:
                raise ApiError(404, "not found")
            at = channel.index[anchor]
            start, end = max(0, at - before), min(total, at + 1 + after)
        else:
            start, end = max(0, total - before), total
        return {
            "messages": [serialize.message(m) for m in channel.messages[start:end]],
            "has_more_before": start > 0,
            "has_more_after": end < total,
            "channel": serialize.channel(sb.world, channel, user),
        }


def mark_read(sb: Sandbox, user: User, channel_id: str) -> dict[str, Any]:
    with sb.lock:
        channel = _own_channel(sb, user, channel_id)
        channel.read_upto[user.id] = len(channel.messages)
        sb.changed()
        return {}


def send(sb: Sandbox, user: User, channel_id: str, body: dict[str, Any]) -> dict[str, Any]:
    with sb.lock:
        channel = _own_channel(sb, user, channel_id)
        content = body.get("content")
        if not isinstance(content, str) or not content.strip():
            raise ApiError(400, "empty message")
        attachments = body.get("attachments") or []
        if not isinstance(attachments, list):
            raise ApiError(400, "invalid attachments")
        sb.check_dm_allowed(user)
        now = max(sb.now_us(), channel.updated_us + 1)  # keep the thread strictly ordered
        other = channel.other(user.id)
        msg = Message(
            id=uuid.uuid4().hex,
            channel_id=channel.id,
            src=user.id,
            dst=other,
            content=content,
            created_us=now,
            attachments=attachments,
        )
        channel.append(msg)
        channel.read_upto[user.id] = len(channel.messages)
        sb.record_dm(user)
        sb.changed()
        sb.sent.append(
            {
                "id": msg.id,
                "channelId": channel.id,
                "from": user.handle,
                "fromId": user.id,
                "to": sb.world.users[other].handle,
                "toId": other,
                "content": content,
                "createdAt": iso(now),
            }
        )
        return serialize.message(msg)


def chat_request(sb: Sandbox, user: User, target_id: str, group_id: str | None) -> dict[str, Any]:
    with sb.lock:
        target = sb.world.users.get(target_id)
        if target is None:
            raise ApiError(404, "not found")
        if target.id == user.id:
            raise ApiError(400, "cannot chat with yourself")
        group = sb.world.groups.get(group_id or "")
        if group is None or not {user.id, target.id} <= group.members:
            raise ApiError(401, "action not permitted")
        existing = sb.world.pair_channel.get(frozenset((user.id, target.id)))
        if existing:
            channel = sb.world.channels[existing]
        else:
            channel = Channel(id=uuid.uuid4().hex, user_ids=(user.id, target.id), created_us=sb.now_us())
            sb.world.add_channel(channel)
            sb.changed()
        # PLATFORM.md: ``{channel: {id, …}}``
        return {"channel": serialize.chat_request_channel(sb.world, channel, user)}
