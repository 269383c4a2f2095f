"""Direct messages: the inbox, a thread, and sending.

Rules (spec §2, §4, §8; DESIGN §2):
- inbox pages hold up to 30 conversations; ``cursor`` is an offset (a string of digits); ``next_cursor``
  is the offset of the next page, None at the end;
- ``awaiting_reply`` marks a conversation whose last message is not ours; with ``awaitingReply=true``
  up to 5 inbox pages are scanned from the cursor and only those conversations are answered, each once
  (one that gets a message meanwhile moves the others down a place);
- a thread answers its messages oldest to newest; ``cursor`` is a message id and answers the messages
  older than it; ``next_cursor`` is the id of the oldest message answered, None when nothing is older;
- a send names exactly one of ``to`` (a platform user id; ``group`` picks the shared group) and
  ``conversationId``, plus ``content``; it passes the per-connection throttle first; a send the platform
  refuses gives the reservation back; one whose outcome is unknown (``may_have_acted``: no answer in
  time, a 5xx; or stopped by anything but a refusal) keeps it, since the message may have gone out.
"""

from __future__ import annotations

import attrs

from community_api.access import Actor
from community_api.commands import (
    Matches,
    at_most,
    blank_as_none,
    empty_as_none,
    expects,
    filled,
    platform_id,
    sendable,
)
from community_api.deps import ONE_READ, ONE_WRITE, OPEN_AND_SEND_WRITES, THREAD_READS, Deps, on_platform
from community_api.errors import InvalidRequest, ServiceError, before_the_write
from community_api.model import Conversation, Message
from community_api.platform_ids import field_group, path_id

INBOX_PAGE = 30
AWAITING_SCAN_PAGES = 5
MAX_MESSAGE = 10_000
MAX_ID = 200
OFFSET_PATTERN = "^[0-9]{1,7}$"  # an inbox cursor: an offset into the inbox


@attrs.frozen
class NewMessage:
    """A DM to send: its text, to exactly one of a user (``to``) and an existing conversation."""

    content: str = attrs.field(validator=[filled, sendable, at_most(MAX_MESSAGE)])
    to: str | None = attrs.field(default=None, converter=blank_as_none, validator=[at_most(MAX_ID), platform_id])
    conversation_id: str | None = attrs.field(
        default=None, converter=blank_as_none, validator=[at_most(MAX_ID), platform_id]
    )


@attrs.frozen
class InboxQuery:
    """Which inbox page: ``cursor`` an offset answered as ``next_cursor``; ``awaiting_reply`` only the
    conversations whose last message is not ours."""

    # Empty is the first page, as no cursor is (a query string's empty value, or an agent's "").
    cursor: str | None = attrs.field(
        default=None,
        converter=empty_as_none,
        validator=Matches(OFFSET_PATTERN, "must be an offset returned as nextCursor"),
    )
    awaiting_reply: bool = attrs.field(default=False, metadata=expects("true or false"))


@attrs.frozen
class ThreadQuery:
    """Which part of a thread: ``cursor`` a message id answered as ``next_cursor`` (the messages older than
    it); empty or absent, the newest."""

    cursor: str | None = attrs.field(default=None, converter=empty_as_none, validator=platform_id)


@attrs.frozen
class Inbox:
    conversations: tuple[Conversation, ...]
    next_cursor: str | None


@attrs.frozen
class Thread:
    conversation: Conversation
    messages: tuple[Message, ...]
    next_cursor: str | None


@attrs.frozen
class SentMessage:
    message: Message
    conversation: Conversation


def _with_reply_state(conversation: Conversation, own_id: str) -> Conversation:
    last = conversation.last_message
    return attrs.evolve(conversation, awaiting_reply=last is not None and last.sender_id != own_id)


def inbox(deps: Deps, actor: Actor, query: InboxQuery) -> Inbox:
    only_awaiting = query.awaiting_reply
    offset = 0 if query.cursor is None else int(query.cursor)
    own_id = actor.connection.platform_user_id
    found: list[Conversation] = []
    # A conversation that gets a message while the pages are read moves to the top of the inbox, and the
    # rest move down one place: the next page then starts with the last of the one before. Each once.
    seen: set[str] = set()
    pages = AWAITING_SCAN_PAGES if only_awaiting else 1
    next_offset: int | None = offset
    counted = 0  # platform reads of the pages so far: they count towards a refusal's wait (a retry reads them)
    for _ in range(pages):
        assert next_offset is not None
        with on_platform(deps, actor.connection, reads=ONE_READ, counted=counted) as meter:  # a page, a request
            page = deps.gateway.list_conversations(actor.session, next_offset, INBOX_PAGE)
        counted += meter.reads_counted
        for conversation in page:
            conversation = _with_reply_state(conversation, own_id)
            if conversation.id not in seen and (conversation.awaiting_reply or not only_awaiting):
                found.append(conversation)
            seen.add(conversation.id)
        if len(page) < INBOX_PAGE:
            next_offset = None
            break
        next_offset += len(page)
    return Inbox(tuple(found), None if next_offset is None else str(next_offset))


def thread(deps: Deps, actor: Actor, conversation_id: str, query: ThreadQuery) -> Thread:
    conversation_id = path_id(conversation_id, "conversation")
    with on_platform(deps, actor.connection, reads=THREAD_READS):
        page = deps.gateway.get_messages(actor.session, conversation_id, query.cursor)
    conversation = _with_reply_state(page.conversation, actor.connection.platform_user_id)
    next_cursor = page.messages[0].id if page.has_older and page.messages else None
    return Thread(conversation, page.messages, next_cursor)


def send(deps: Deps, actor: Actor, group: str | None, new: NewMessage) -> SentMessage:
    to, conversation_id = new.to, new.conversation_id
    if (to is None) == (conversation_id is None):
        raise InvalidRequest("give exactly one of to and conversationId", fields=["to", "conversationId"])
    group = field_group(group)
    known: Conversation | None = None
    if conversation_id is not None:
        # Read the thread first, before the throttle: an unknown conversation is refused (404) without
        # using quota, and no platform call follows the send (its failure would blur whether the DM went).
        with before_the_write(), on_platform(deps, actor.connection, reads=THREAD_READS):
            known = deps.gateway.get_messages(actor.session, conversation_id, None).conversation
    reservation = deps.throttle.reserve(actor.connection.platform_user_id)
    try:
        with on_platform(deps, actor.connection, writes=ONE_WRITE if known is not None else OPEN_AND_SEND_WRITES):
            if known is not None:
                conversation = known
            else:
                # Whatever became of opening the chat (finding it again is harmless), the message itself
                # was not sent.
                with before_the_write():
                    conversation = deps.gateway.open_conversation(actor.session, to or "", group)
            message = deps.gateway.send_message(actor.session, conversation.id, new.content)
    except ServiceError as error:
        if error.may_have_acted:
            # No answer in time, or an answer to the send that says nothing sure: it may have gone out.
            deps.throttle.commit(reservation)
        else:
            # The platform said no (or was not asked: the connection is held): nothing went out, so no
            # quota is used.
            deps.throttle.cancel(reservation)
        raise
    except BaseException:
        # A fault of ours past the platform's answer, or the worker stopping mid-call: the message may
        # have gone out, so it counts as sent.
        deps.throttle.commit(reservation)
        raise
    deps.throttle.commit(reservation)
    # The conversation as it stands after the send: its last message is the one sent, it was updated then
    # (what it was read with is older), and the account spoke last, so it awaits no reply.
    conversation = attrs.evolve(conversation, last_message=message, updated_at=message.created_at, awaiting_reply=False)
    return SentMessage(message=message, conversation=conversation)
