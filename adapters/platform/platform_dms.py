"""Direct messages through the platform's chat routes (api2).

Quirks handled here:
- the inbox ``limit`` is at most 30 (above, the platform answers 400 "invalid limit");
- a thread answers about 30 messages a call and no total: after a full page the gateway asks for the
  page before it, so ``has_older`` is exact (a thread of exactly 30·k messages would otherwise end in an
  empty page);
- a thread's conversation (the member, unread count, last message) is the answer's own ``channel``; an
  answer without one takes it from the first inbox page, fetched in the same script as the messages, a
  quieter conversation from what the same connection saw of it before (a record is one member's view),
  else from scanning the inbox;
- a channel opened by a chat request has no message yet and is not listed in the inbox; the request
  answers ``{channel: {…}}`` (PLATFORM.md), read as the bare channel too;
- a channel's other member is promised only as ``{first_name, last_name, …}`` beside ``user_ids``
  (``chat_mapping``): their id is then the one of ``user_ids`` that is not the signed-in user;
- opening a chat needs a group both members share (``g``); none given, the first group of the account's
  own list that the other member is in is used.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import attrs

from adapters.platform import chat_mapping as chat
from adapters.platform import platform_mapping as m
from adapters.platform.bounded_cache import BoundedCache
from adapters.platform.page_fetch import Req
from adapters.platform.platform_answers import Resp, checked_json
from adapters.platform.platform_client import PlatformClient
from adapters.platform.platform_created import sent_message
from community_api.errors import InvalidRequest, NotFound, before_the_write
from community_api.model import Conversation, Message, MessagePage, PlatformSession, PlatformUser

INBOX_LIMIT = 30
THREAD_PAGE = 30
SCAN_PAGES_AT_ONCE = 10  # inbox pages fetched in one script while looking for a quiet conversation
SCAN_MAX = 1_000  # conversations scanned at most
SHARED_GROUP_PAGES = 10  # pages of the other member's groups read while looking for one both are in


class PlatformDms:
    def __init__(self, client: PlatformClient) -> None:
        self._client = client
        # What a connection last saw of a conversation, keyed by (connection id, channel id): a record is
        # one member's view of it (the *other* member, their own unread count), and both members of a
        # conversation may be linked here and read through one worker.
        self._seen: BoundedCache[tuple[str, str], Conversation] = BoundedCache(20_000)

    def _self_id(self, session: PlatformSession) -> chat.SelfId:
        """The signed-in user's id, for a channel that names its other member only among ``user_ids``."""
        return lambda: self._client.me(session).id

    def _inbox_req(self, offset: int, limit: int = INBOX_LIMIT) -> Req:
        query = {"offset": offset, "limit": limit, "last": "true", "unread-only": "false"}
        return Req("GET", self._client.api("self", "chat-channels", query=query))

    def _channels(self, session: PlatformSession, data: Any) -> list[Conversation]:
        self_id = self._self_id(session)
        found = [chat.conversation(c, self_id) for c in m.items(m.obj(data, "inbox").get("channels"), "channels")]
        self._seen.put_many(((session.connection_id, c.id), c) for c in found)
        return found

    def list_conversations(self, session: PlatformSession, offset: int, limit: int) -> list[Conversation]:
        if not 1 <= limit <= INBOX_LIMIT:
            raise InvalidRequest(f"limit must be from 1 to {INBOX_LIMIT}")
        if offset < 0:
            raise InvalidRequest("offset must not be negative")
        return self._channels(session, self._client.one(session, self._inbox_req(offset, limit), "inbox"))

    def get_messages(self, session: PlatformSession, conversation_id: str, before: str | None) -> MessagePage:
        """PLATFORM.md, "Chat": ``before`` and ``after`` are counts. The newest page is ``?before=N``; older
        messages are read around an anchor, the oldest message seen: ``?before=N&after=0&msg={id}``, whose
        answer may hold the anchor itself, and messages after it too (one client sends ``after=35``): only
        those older than the anchor are kept. ``has_more_before`` says whether older ones exist;
        an answer without it is asked once more, around the oldest message of this page."""
        query: dict[str, object] = {"before": THREAD_PAGE}
        if before is not None:
            query |= {"after": 0, "msg": before}
        thread = Req("GET", self._client.api("channels", conversation_id, "messages", query=query))
        thread_resp, inbox_resp = self._client.call(session, [thread, self._inbox_req(0)])
        # Around an anchor, a 404 may be the anchor's (a message of another conversation): the cursor is named.
        what = (
            f"conversation {conversation_id}"
            if before is None
            else f"message {before} in conversation {conversation_id}"
        )
        data = m.obj(checked_json(thread_resp, what), "thread")
        messages = sorted(
            (chat.message(x, conversation_id) for x in m.items(data.get("messages"), "messages")),
            key=lambda x: (x.created_at, x.id),
        )
        anchor = next((i for i, x in enumerate(messages) if x.id == before), None)
        if anchor is not None:
            # Older than the anchor only: not the anchor itself, nor what an ``after`` read around it
            # (or a platform that answered the newest page whatever ``msg`` said) brings from after it,
            # which the client already has; a page of those alone would send it round the same page.
            messages = messages[:anchor]
        conversation = self._conversation(session, conversation_id, data.get("channel"), inbox_resp)
        newest = messages[-1] if messages and before is None else None
        if newest is not None and (
            conversation.last_message is None or conversation.last_message.created_at < newest.created_at
        ):
            conversation = attrs.evolve(conversation, last_message=newest, updated_at=newest.created_at)
        has_older = data.get("has_more_before")
        if not isinstance(has_older, bool | int):
            # The anchor, when it came back, may have been one of the ``before`` messages answered.
            answered = len(messages) + (anchor is not None)
            has_older = self._has_older(session, conversation_id, messages, answered)
        return MessagePage(conversation=conversation, messages=tuple(messages), has_older=bool(has_older))

    def _conversation(
        self, session: PlatformSession, conversation_id: str, channel: object, inbox_resp: Resp
    ) -> Conversation:
        """The thread's own ``channel`` when the answer carries one, else the inbox's record of it."""
        found = None
        if isinstance(channel, dict) and channel.get("id") == conversation_id:
            found = chat.conversation(channel, self._self_id(session))
            self._seen.put((session.connection_id, found.id), found)
        if found is None and inbox_resp.status == 200:
            found = next((c for c in self._channels(session, inbox_resp.json()) if c.id == conversation_id), None)
        if found is None:
            found = self._seen.get((session.connection_id, conversation_id)) or self._scan(session, conversation_id)
        return found or Conversation(id=conversation_id, with_=None, last_message=None)

    def _has_older(
        self, session: PlatformSession, conversation_id: str, messages: list[Message], answered: int
    ) -> bool:
        """For an answer without ``has_more_before``: a short page (``answered``, the older messages with the
        anchor if it came back, fewer than asked for) is the start of the thread; after a full one, ask for
        one message before its oldest: two asked for, as the anchor may be counted among them, and only a
        message older than the anchor counts (the answer may hold the anchor and messages after it)."""
        if answered < THREAD_PAGE or not messages:
            return False
        oldest = messages[0]
        query = {"before": 2, "after": 0, "msg": oldest.id}
        req = Req("GET", self._client.api("channels", conversation_id, "messages", query=query))
        data = m.obj(self._client.one(session, req, f"conversation {conversation_id}"), "thread")
        probed = (chat.message(x, conversation_id) for x in m.items(data.get("messages"), "messages"))
        return any((x.created_at, x.id) < (oldest.created_at, oldest.id) for x in probed)

    def _scan(self, session: PlatformSession, conversation_id: str) -> Conversation | None:
        """Look through the inbox, several pages per script, for a conversation not seen lately."""
        offset = INBOX_LIMIT  # page 0 was just read
        while offset < SCAN_MAX:
            offsets = [offset + i * INBOX_LIMIT for i in range(SCAN_PAGES_AT_ONCE)]
            resps = self._client.call(session, [self._inbox_req(o) for o in offsets])
            for resp in resps:
                page = self._channels(session, checked_json(resp, "inbox"))
                found = next((c for c in page if c.id == conversation_id), None)
                if found is not None:
                    return found
                if len(page) < INBOX_LIMIT:
                    return None
            offset = offsets[-1] + INBOX_LIMIT
        return None

    def open_conversation(self, session: PlatformSession, user_id: str, group: str | None) -> Conversation:
        me = self._client.me(session)
        if user_id == me.id:
            raise InvalidRequest("cannot open a conversation with yourself", field="to")
        if group is not None:
            group_id = self._client.group_ref(session, group).id
        else:
            group_id = self._shared_group(session, user_id)
        req = Req("POST", self._client.api("users", user_id, "chat-request", query={"g": group_id}))
        answer = m.obj(self._client.one(session, req, f"user {user_id}", read=False), "chat request")
        # PLATFORM.md: ``{channel: {id, …}}`` (one client's code); the bare channel is read too. Whatever
        # else it holds, the chat is with ``user_id``: a channel that names nobody is still with them.
        channel = answer.get("channel")
        conversation = chat.conversation(channel if isinstance(channel, dict) else answer, lambda: me.id, user_id)
        seen = self._seen.get((session.connection_id, conversation.id))
        if seen is not None:
            # What the inbox told of them before is not forgotten for a leaner answer here.
            conversation = attrs.evolve(conversation, with_=_fuller(conversation.with_, seen.with_))
        self._seen.put((session.connection_id, conversation.id), conversation)
        return conversation

    def _shared_group(self, session: PlatformSession, user_id: str) -> str:
        """A group both members are in: the first of the account's own list among the other member's groups
        read so far. Their list is read a page at a time until one turns up (it may hold every group of
        theirs, not only the shared ones), at most ``SHARED_GROUP_PAGES`` pages."""
        mine = [m.text(g, "id") for g in self._client.my_groups(session)]
        theirs: set[str] = set()
        for page in self._client.group_pages(session, user_id, most=SHARED_GROUP_PAGES, what=f"user {user_id}"):
            theirs |= {m.text(g, "id") for g in page}
            shared = [group_id for group_id in mine if group_id in theirs]
            if shared:
                return shared[0]
        raise NotFound(f"user {user_id} not found in a group you share")

    def send_message(self, session: PlatformSession, conversation_id: str, content: str) -> Message:
        # Never retried (``read=False``): a second attempt could deliver the message twice.
        req = Req(
            "POST",
            self._client.api("channels", conversation_id, "messages", query={"ct": "wdm"}),
            body={"content": content, "attachments": []},
        )
        # The sender is the signed-in user: asked before the send (cached per session), so that an answer
        # that does not name it is still read, and no platform call follows the send.
        with before_the_write():
            me = self._client.me(session)
        message = self._client.write(
            session,
            req,
            f"conversation {conversation_id}",
            lambda data: sent_message(
                data, conversation_id=conversation_id, content=content, sender_id=me.id, now=datetime.now(UTC)
            ),
        )
        seen = self._seen.get((session.connection_id, conversation_id))
        if seen is not None:
            self._seen.put(
                (session.connection_id, conversation_id),
                attrs.evolve(seen, last_message=message, updated_at=message.created_at),
            )
        return message


def _fuller(answered: PlatformUser | None, known: PlatformUser | None) -> PlatformUser | None:
    """The member as answered, with a handle or name it lacks taken from what was known of the same member."""
    if answered is None or known is None or known.id != answered.id:
        return answered or known
    return attrs.evolve(answered, handle=answered.handle or known.handle, name=answered.name or known.name)
