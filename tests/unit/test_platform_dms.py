"""``PlatformDms`` beyond the thread variants of ``test_platform_threads.py``: the inbox asked as the site asks
it, bounds checked before anything is sent, one order for messages of the same instant, a conversation's
last message taken from the newest page only, and flags written as 0/1."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from adapters.platform.page_fetch import Req
from adapters.platform.platform_answers import Resp
from adapters.platform.platform_client import GroupRef
from adapters.platform.platform_dms import INBOX_LIMIT, SCAN_PAGES_AT_ONCE, THREAD_PAGE, PlatformDms
from community_api.errors import InvalidRequest
from community_api.model import PlatformSession, PlatformUser
from tests.unit.test_platform_threads import (
    BOB,
    BOBS_CHANNEL,
    CHANNEL,
    ME,
    SESSION,
    CannedClient,
    ChatRequestClient,
    GroupListsClient,
    InboxClient,
    msg,
)


class RecordingClient(CannedClient):
    """``CannedClient`` that keeps every inbox query, and lets a test rewrite the thread's answer
    (``rewrite``: the answer's JSON in, the JSON to send out)."""

    def __init__(self, count: int, **kw: Any) -> None:
        super().__init__(count, **kw)
        self.inbox_asked: list[dict[str, list[str]]] = []
        self.rewrite = lambda body: body

    def _answer(self, req: Req) -> Resp:
        url = urlsplit(req.url)
        if url.path.endswith("/chat-channels"):
            self.inbox_asked.append(parse_qs(url.query))
            return super()._answer(req)
        resp = super()._answer(req)
        return Resp(resp.status, resp.content_type, json.dumps(self.rewrite(json.loads(resp.text))))


def test_the_inbox_is_asked_as_the_site_asks_it() -> None:
    """PLATFORM.md: ``?offset={n}&limit=30&last=true&unread-only=false`` — the last message with each channel,
    and every channel, read or not."""
    client = RecordingClient(3)
    dms = PlatformDms(client)  # type: ignore[arg-type]
    dms.list_conversations(SESSION, 60, 30)
    dms.get_messages(SESSION, CHANNEL, None)  # the inbox's first page comes along with a thread
    site = {"last": ["true"], "unread-only": ["false"]}
    assert client.inbox_asked == [
        {"offset": ["60"], "limit": ["30"], **site},
        {"offset": ["0"], "limit": ["30"], **site},
    ]


@pytest.mark.parametrize(("offset", "limit"), [(0, 0), (0, INBOX_LIMIT + 1), (-1, 30)])
def test_an_inbox_page_out_of_bounds_is_refused_before_anything_is_sent(offset: int, limit: int) -> None:
    """The platform answers a limit above 30 with 400 "invalid limit" (PLATFORM.md)."""
    client = RecordingClient(3)
    with pytest.raises(InvalidRequest):
        PlatformDms(client).list_conversations(SESSION, offset, limit)  # type: ignore[arg-type]
    assert client.inbox_asked == []


def test_messages_of_the_same_instant_come_in_one_order_whatever_the_answers_order() -> None:
    """Ordered by time, then id: the same thread read twice, or paged around an anchor, never reorders."""
    client = RecordingClient(0)
    later, earlier = {**msg(1), "id": "b" * 32}, {**msg(1), "id": "a" * 32}
    client.thread = [later, earlier]  # the platform's order, for two messages sent in one instant
    page = PlatformDms(client).get_messages(SESSION, CHANNEL, None)  # type: ignore[arg-type]
    assert [m.id for m in page.messages] == ["a" * 32, "b" * 32]


def test_an_older_page_never_gives_the_conversation_its_last_message() -> None:
    """Only the newest page knows the last message: a page of older ones, with a channel that does not say
    (a lean record), leaves it unknown rather than naming an old message the last."""
    client = RecordingClient(75)
    dms = PlatformDms(client)  # type: ignore[arg-type]
    newest = dms.get_messages(SESSION, CHANNEL, None)
    client.rewrite = lambda body: {**body, "channel": {**body["channel"], "last_message": None}}
    older = dms.get_messages(SESSION, CHANNEL, newest.messages[0].id)
    assert older.messages and older.conversation.last_message is None


def test_a_channel_record_behind_the_thread_takes_the_newest_message_as_its_last() -> None:
    """The thread's ``channel`` may lag behind its messages (a record written before the last one came):
    the newest page's last message is the conversation's, and the conversation was updated then."""
    client = RecordingClient(5)
    stale = client.thread[2]
    client.rewrite = lambda body: {**body, "channel": {**body["channel"], "last_message": stale}}
    page = PlatformDms(client).get_messages(SESSION, CHANNEL, None)  # type: ignore[arg-type]
    last = page.conversation.last_message
    assert last is not None and last.id == client.thread[-1]["id"]
    assert page.conversation.updated_at == last.created_at


@pytest.mark.parametrize("flag", [0, 1])
def test_has_more_before_written_as_0_or_1_is_believed_without_a_probe(flag: int) -> None:
    client = RecordingClient(THREAD_PAGE + 5)
    client.rewrite = lambda body: {**body, "has_more_before": flag}
    page = PlatformDms(client).get_messages(SESSION, CHANNEL, None)  # type: ignore[arg-type]
    assert page.has_older is bool(flag) and len(client.asked) == 1  # no second look


def test_a_channel_of_another_conversation_in_the_answer_is_not_taken_for_this_one() -> None:
    client = RecordingClient(3)
    carol = {"id": "e" * 32, "name": "carol", "first_name": "Carol", "last_name": "C"}
    client.rewrite = lambda body: {**body, "channel": {"id": "d" * 32, "user": carol, "last_message": None}}
    conversation = PlatformDms(client).get_messages(SESSION, CHANNEL, None).conversation  # type: ignore[arg-type]
    assert conversation.id == CHANNEL
    assert conversation.with_ is None or conversation.with_.id != carol["id"]


class FailingInboxClient(RecordingClient):
    """The inbox's first page fails; the rest is empty."""

    def _answer(self, req: Req) -> Resp:
        if "/chat-channels" in req.url and parse_qs(urlsplit(req.url).query)["offset"] == ["0"]:
            return Resp(502, "text/html", "<h1>502 Bad Gateway</h1>")
        return super()._answer(req)


def test_a_thread_is_answered_when_the_inbox_read_with_it_fails() -> None:
    """The inbox's first page rides along only to name the member: its failure (an HTML 502 of a front end)
    is no reason to refuse the thread, which came back whole."""
    client = FailingInboxClient(3, flags=False)
    page = PlatformDms(client).get_messages(SESSION, CHANNEL, None)  # type: ignore[arg-type]
    assert [m.id for m in page.messages] == [m["id"] for m in client.thread] and page.conversation.id == CHANNEL


def test_a_page_one_short_of_full_is_the_threads_start_without_a_probe() -> None:
    client = CannedClient(THREAD_PAGE - 1, flags=False)
    page = PlatformDms(client).get_messages(SESSION, CHANNEL, None)  # type: ignore[arg-type]
    assert page.has_older is False and len(client.asked) == 1


def test_a_message_of_the_same_instant_as_the_oldest_but_before_it_in_order_is_an_older_one() -> None:
    """Messages are ordered by time, then id: one sent in the same instant as the page's oldest and coming
    before it is older, so the client is told there is more."""
    client = CannedClient(THREAD_PAGE + 1, flags=False)
    client.thread[0] = {**client.thread[0], "created_at": client.thread[1]["created_at"]}  # ids stay in order
    page = PlatformDms(client).get_messages(SESSION, CHANNEL, None)  # type: ignore[arg-type]
    assert page.has_older is True


@pytest.mark.parametrize("batches", [1, 2])
def test_the_scan_reads_each_inbox_page_once_and_stops_at_the_short_one(batches: int) -> None:
    """The first page came with the thread; the scan starts after it, reads each page once, batch after
    batch, and the short page at the end of a batch ends it without another batch of empty pages."""
    client = InboxClient(others=batches * SCAN_PAGES_AT_ONCE * INBOX_LIMIT + 10, position=None)
    PlatformDms(client).get_messages(SESSION, CHANNEL, None)  # type: ignore[arg-type]
    assert client.inbox_offsets == [n * INBOX_LIMIT for n in range(batches * SCAN_PAGES_AT_ONCE + 1)]


class ChatThenThreadClient(CannedClient):
    """Opens a chat with bob (answered in full), then answers its thread without ``channel``, the inbox
    holding nothing: a chat just opened has no message, so the inbox does not list it."""

    def __init__(self) -> None:
        super().__init__(0, flags=False)

    def me(self, session: PlatformSession) -> PlatformUser:
        return PlatformUser(id=ME, handle="alice", name="Alice A")

    def group_ref(self, session: PlatformSession, group: str) -> GroupRef:
        return GroupRef(id="d" * 32, slug=group)

    def _answer(self, req: Req) -> Resp:
        if "/chat-request" in req.url:
            return Resp(200, "application/json", json.dumps({"channel": BOBS_CHANNEL}))
        return super()._answer(req)


def test_a_conversation_just_opened_is_named_when_its_thread_is_read() -> None:
    dms = PlatformDms(ChatThenThreadClient())  # type: ignore[arg-type]
    opened = dms.open_conversation(SESSION, BOB, "club")
    assert opened.with_ is not None and dms.get_messages(SESSION, CHANNEL, None).conversation.with_ == opened.with_


class RecordingGroupListsClient(GroupListsClient):
    def __init__(self, mine: list[str], theirs: list[str]) -> None:
        super().__init__(mine, theirs)
        self.asked: list[str] = []

    def one(self, session: PlatformSession, req: Req, what: str, *, read: bool = True) -> Any:
        self.asked.append(req.url)
        return super().one(session, req, what, read=read)


def test_a_chat_is_opened_in_the_first_group_of_the_accounts_own_list_that_both_are_in() -> None:
    mine = [f"{n:032x}" for n in range(4)]
    client = RecordingGroupListsClient(mine, theirs=[mine[3], mine[1], mine[2]])  # theirs in another order
    PlatformDms(client).open_conversation(SESSION, BOB, None)  # type: ignore[arg-type]
    chat_request = next(url for url in client.asked if "/chat-request" in url)
    assert parse_qs(urlsplit(chat_request).query) == {"g": [mine[1]]}


class SendingClient(ChatThenThreadClient):
    """``ChatThenThreadClient`` that also takes DMs, answering each as the message it made."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[Req] = []

    def write(self, session: PlatformSession, req: Req, what: str, read_answer: Any) -> Any:
        self.writes.append(req)
        made = {**msg(59), "id": "f" * 32, "metadata": {"content": req.body["content"], "src": ME, "dst": BOB}}
        return read_answer(made)


def test_a_dm_is_sent_as_the_site_sends_it_and_becomes_the_conversations_last_message() -> None:
    """PLATFORM.md: ``POST /channels/{id}/messages?ct=wdm`` with ``{content, attachments: []}``. What the gateway
    knew of the conversation then ends with that message, even where the thread's answer does not say."""
    client = SendingClient()
    dms = PlatformDms(client)  # type: ignore[arg-type]
    dms.open_conversation(SESSION, BOB, "club")
    sent = dms.send_message(SESSION, CHANNEL, "hello bob")
    [write] = client.writes
    assert parse_qs(urlsplit(write.url).query) == {"ct": ["wdm"]}
    assert write.body == {"content": "hello bob", "attachments": []}
    conversation = dms.get_messages(SESSION, CHANNEL, None).conversation
    assert conversation.last_message == sent and conversation.updated_at == sent.created_at


def test_what_was_known_of_one_member_never_fills_in_another() -> None:
    """A conversation known (from the inbox) to be with bob, answered by a chat request with carol naming
    only its id: carol is not given bob's handle and name."""
    carol = "e" * 32
    dms = PlatformDms(ChatRequestClient({"channel": {"id": CHANNEL}}, inbox=[BOBS_CHANNEL]))  # type: ignore[arg-type]
    dms.list_conversations(SESSION, 0, 30)
    assert dms.open_conversation(SESSION, carol, "club").with_ == PlatformUser(id=carol, handle="", name="")
