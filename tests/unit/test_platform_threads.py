"""DM threads as the real platform answers them (PLATFORM.md, "Chat"): ``before``/``after`` are counts,
older messages are read around an anchor that may come back with them, ``has_more_before`` may be there or
not, a list may be ``null``. The gateway's reading of each variant, against canned answers."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from adapters.platform.page_fetch import Req
from adapters.platform.platform_answers import Resp, checked_json
from adapters.platform.platform_client import GroupRef, PlatformClient
from adapters.platform.platform_dms import INBOX_LIMIT, SCAN_MAX, SCAN_PAGES_AT_ONCE, THREAD_PAGE, PlatformDms
from community_api.errors import NotFound
from community_api.model import PlatformSession, PlatformUser

CHANNEL = "c" * 32
ME, BOB = "a" * 32, "b" * 32
SESSION = PlatformSession(connection_id="con_1", token="t")


def msg(n: int) -> dict[str, Any]:
    return {
        "id": f"{n:032x}",
        "channel_id": CHANNEL,
        "created_at": f"2026-11-01T10:{n // 60:02d}:{n % 60:02d}.5Z",
        "metadata": {"content": f"message {n}", "src": ME if n % 2 else BOB, "dst": BOB},
    }


class CannedClient:
    """Answers in-page requests from a thread of ``count`` messages, as the platform would, in a variant."""

    def __init__(
        self,
        count: int,
        *,
        flags: bool = True,
        anchor_included: bool = True,
        after: int | None = None,
        heeds_anchor: bool = True,
        anchor_counted: bool = False,
    ) -> None:
        """``after``: the count of newer messages answered around an anchor whatever the request's own
        ``after`` (None: the request's); ``heeds_anchor`` False: the newest page whatever ``msg`` says;
        ``anchor_counted``: the anchor is one of the ``before`` messages answered (N-1 older ones)."""
        self.thread = [msg(n) for n in range(count)]
        self.flags, self.anchor_included, self.after = flags, anchor_included, after
        self.heeds_anchor, self.anchor_counted = heeds_anchor, anchor_counted
        self.asked: list[dict[str, list[str]]] = []

    def api(self, *segments: str, query: dict[str, object] | None = None) -> str:
        return "https://api2.test/" + "/".join(segments) + ("?" + urlencode(query) if query else "")

    def call(self, session: PlatformSession, reqs: Sequence[Req], *, read: bool = True) -> list[Resp]:
        return [self._answer(r) for r in reqs]

    def one(self, session: PlatformSession, req: Req, what: str, *, read: bool = True) -> Any:
        return checked_json(self._answer(req), what)

    def _answer(self, req: Req) -> Resp:
        url = urlsplit(req.url)
        query = parse_qs(url.query)
        if url.path.endswith("/chat-channels"):
            return Resp(200, "application/json", json.dumps({"channels": None}))  # an empty page as null
        self.asked.append(query)
        before = int(query["before"][0])
        after = int(query.get("after", ["0"])[0]) if self.after is None else self.after
        ids = [m["id"] for m in self.thread]
        if "msg" in query and query["msg"][0] not in ids:
            return Resp(404, "application/json", json.dumps({"message": "not found"}))  # an unknown anchor
        if "msg" in query and self.heeds_anchor:
            at = ids.index(query["msg"][0])
            before -= 1 if self.anchor_counted else 0
            start, end = max(0, at - before), min(len(ids), at + 1 + after)
            chosen = (
                self.thread[start:end] if self.anchor_included else self.thread[start:at] + self.thread[at + 1 : end]
            )
        else:
            start, end = max(0, len(ids) - before), len(ids)
            chosen = self.thread[start:end]
        body: dict[str, Any] = {"messages": chosen or None}
        if self.flags:
            bob = {"id": BOB, "name": "bob", "first_name": "Bob", "last_name": "B"}
            last = self.thread[-1] if self.thread else None
            body |= {
                "has_more_before": start > 0,
                "has_more_after": end < len(ids),
                "channel": {"id": CHANNEL, "user": bob, "last_message": last},
            }
        return Resp(200, "application/json", json.dumps(body))


def read_all(client: CannedClient) -> tuple[list[str], int]:
    dms = PlatformDms(client)  # type: ignore[arg-type]
    page = dms.get_messages(SESSION, CHANNEL, None)
    pages = [page.messages]
    while page.has_older and page.messages:  # as ``dms.thread`` pages: no messages, no cursor
        assert len(pages) < 20, "the walk does not end"
        page = dms.get_messages(SESSION, CHANNEL, page.messages[0].id)
        pages.insert(0, page.messages)
    return [m.id for chunk in pages for m in chunk], len(client.asked)


def test_the_newest_page_asks_a_count_and_older_ones_an_anchor() -> None:
    client = CannedClient(75)
    ids, asked = read_all(client)
    assert ids == [m["id"] for m in client.thread]  # every message once, oldest first: the anchor dropped
    assert client.asked[0] == {"before": [str(THREAD_PAGE)]}
    assert client.asked[1] == {"before": [str(THREAD_PAGE)], "after": ["0"], "msg": [ids[75 - THREAD_PAGE]]}
    assert asked == 3  # has_more_before answered: no extra question


def test_an_anchor_left_out_of_the_answer_reads_the_same() -> None:
    client = CannedClient(75, anchor_included=False)
    assert read_all(client)[0] == [m["id"] for m in client.thread]


def test_messages_answered_from_after_the_anchor_are_not_answered_again() -> None:
    """Read around an anchor with ``after`` (one client sends ``after=35``), the answer brings messages the
    client already has: only those older than the anchor are its older page."""
    client = CannedClient(75, after=5)
    ids, _ = read_all(client)
    assert ids == [m["id"] for m in client.thread]


def test_a_platform_that_answers_the_newest_page_whatever_the_anchor_ends_the_walk() -> None:
    """Were ``msg`` disregarded, every older page would be the newest again: the client, sent round that
    page for ever, instead gets nothing older and no cursor."""
    client = CannedClient(75, heeds_anchor=False)
    ids, asked = read_all(client)
    assert ids == [m["id"] for m in client.thread[-THREAD_PAGE:]]
    assert asked == 2


def test_without_has_more_before_a_full_page_asks_once_more() -> None:
    client = CannedClient(60, flags=False)
    ids, asked = read_all(client)
    assert ids == [m["id"] for m in client.thread]
    assert asked == 2 + 2  # each full page asked whether anything lies before it


@pytest.mark.parametrize("count", [2 * THREAD_PAGE, 2 * THREAD_PAGE + 1, 3 * THREAD_PAGE - 1, 3 * THREAD_PAGE])
def test_without_has_more_before_an_anchor_counted_in_the_page_does_not_end_the_thread_early(count: int) -> None:
    """A platform that counts the anchor among the ``before`` messages it answers gives back one older
    message fewer than asked for: without ``has_more_before`` that page is still full, not the thread's
    start, or every older message would be lost to the client."""
    client = CannedClient(count, flags=False, anchor_counted=True)
    ids, _ = read_all(client)
    assert ids == [m["id"] for m in client.thread]


def test_without_has_more_before_newer_messages_in_the_probe_are_not_older_ones() -> None:
    """The question "is there anything before this page?" may be answered with the anchor and messages
    after it (``after`` disregarded): only a message older than the anchor says yes, else the client is
    told of older messages and sent for a page that holds none."""
    client = CannedClient(2 * THREAD_PAGE, flags=False, after=5)
    dms = PlatformDms(client)  # type: ignore[arg-type]
    newest = dms.get_messages(SESSION, CHANNEL, None)
    assert newest.has_older is True
    oldest = dms.get_messages(SESSION, CHANNEL, newest.messages[0].id)
    assert [x.id for x in oldest.messages] == [m["id"] for m in client.thread[:THREAD_PAGE]]
    assert oldest.has_older is False


def test_a_cursor_the_thread_does_not_hold_is_named_in_the_404() -> None:
    """The platform answers 404 for an anchor it does not know (a message of another conversation, or one
    never sent): the conversation itself may well exist, so the answer names the cursor."""
    dms = PlatformDms(CannedClient(3))  # type: ignore[arg-type]
    stranger = "f" * 32
    with pytest.raises(NotFound, match=f"message {stranger} in conversation {CHANNEL} not found"):
        dms.get_messages(SESSION, CHANNEL, stranger)


def test_an_empty_thread_and_null_lists_are_empty() -> None:
    dms = PlatformDms(CannedClient(0))  # type: ignore[arg-type]
    page = dms.get_messages(SESSION, CHANNEL, None)
    assert page.messages == () and page.has_older is False and page.conversation.id == CHANNEL


def test_what_one_account_saw_of_a_conversation_is_never_shown_to_another() -> None:
    """The two members of a conversation may both be linked here, read through one worker. What the gateway
    remembers of a conversation is one member's view of it (the *other* member, their own unread count), so
    an answer without ``channel`` read by the second member must not come back with the first one's view:
    bob would see himself as the member he talks with, and alice's unread count."""
    client = CannedClient(3)
    dms = PlatformDms(client)  # type: ignore[arg-type]
    alices = dms.get_messages(SESSION, CHANNEL, None).conversation
    assert alices.with_ is not None and alices.with_.id == BOB
    client.flags = False  # the variant without ``channel``; the inbox's first page holds nothing
    bobs_session = PlatformSession(connection_id="con_2", token="bob's token")
    bobs = dms.get_messages(bobs_session, CHANNEL, None).conversation
    assert bobs.id == CHANNEL
    assert bobs.with_ is None or bobs.with_.id != BOB
    # alice's own later read still finds what she saw
    assert dms.get_messages(SESSION, CHANNEL, None).conversation.with_ == alices.with_


class InboxClient(CannedClient):
    """A thread answered without ``channel``, and an inbox of ``others`` conversations 30 a page, the thread's
    own among them at ``position`` (None: not at all)."""

    def __init__(self, others: int, position: int | None) -> None:
        super().__init__(3, flags=False)
        self.inbox = [{"id": f"{n + 1:032x}", "user": {"id": f"{n + 1:032x}"}} for n in range(others)]
        if position is not None:
            self.inbox.insert(position, {"id": CHANNEL, "user": {"id": BOB, "name": "bob", "first_name": "Bob"}})
        self.inbox_offsets: list[int] = []

    def _answer(self, req: Req) -> Resp:
        url = urlsplit(req.url)
        if not url.path.endswith("/chat-channels"):
            return super()._answer(req)
        query = parse_qs(url.query)
        offset, limit = int(query["offset"][0]), int(query["limit"][0])
        assert limit <= INBOX_LIMIT  # PLATFORM.md: above 30 answers 400
        self.inbox_offsets.append(offset)
        return Resp(200, "application/json", json.dumps({"channels": self.inbox[offset : offset + limit] or None}))


@pytest.mark.parametrize("position", [INBOX_LIMIT, 5 * INBOX_LIMIT - 1, 12 * INBOX_LIMIT + 7])
def test_a_thread_answered_without_its_channel_finds_it_further_down_the_inbox(position: int) -> None:
    """A quiet conversation is not on the inbox's first page, read with the thread: the gateway looks
    further down, several pages per script, and names the member from the inbox's record."""
    client = InboxClient(others=20 * INBOX_LIMIT, position=position)
    page = PlatformDms(client).get_messages(SESSION, CHANNEL, None)  # type: ignore[arg-type]
    assert page.conversation.with_ is not None and page.conversation.with_.id == BOB
    assert client.inbox_offsets[0] == 0 and position // INBOX_LIMIT * INBOX_LIMIT in client.inbox_offsets
    assert len(client.inbox_offsets) <= 1 + SCAN_PAGES_AT_ONCE * (1 + position // (SCAN_PAGES_AT_ONCE * INBOX_LIMIT))


def test_a_conversation_the_inbox_does_not_hold_stops_the_scan_at_its_end_or_its_bound() -> None:
    """Not in the inbox at all: the scan stops at the inbox's last (short) page, and in an inbox of
    thousands after about ``SCAN_MAX`` conversations; the thread is answered, its member unknown."""
    short = InboxClient(others=2 * INBOX_LIMIT + 4, position=None)
    page = PlatformDms(short).get_messages(SESSION, CHANNEL, None)  # type: ignore[arg-type]
    assert page.conversation.id == CHANNEL and page.conversation.with_ is None and len(page.messages) == 3
    assert 2 * INBOX_LIMIT in short.inbox_offsets  # its last (short) page was read,
    assert len(short.inbox_offsets) == 1 + SCAN_PAGES_AT_ONCE  # and no batch of pages was asked for after it
    huge = InboxClient(others=5_000, position=None)
    assert PlatformDms(huge).get_messages(SESSION, CHANNEL, None).conversation.with_ is None  # type: ignore[arg-type]
    assert SCAN_MAX <= max(huge.inbox_offsets) + INBOX_LIMIT < SCAN_MAX + SCAN_PAGES_AT_ONCE * INBOX_LIMIT


class ChatRequestClient:
    """Answers a chat request with ``answer``; the inbox holds ``inbox``."""

    def __init__(self, answer: dict[str, Any], inbox: list[dict[str, Any]] | None = None) -> None:
        self.answer, self.inbox = answer, inbox or []

    def me(self, session: PlatformSession) -> PlatformUser:
        return PlatformUser(id=ME, handle="alice", name="Alice A")

    def group_ref(self, session: PlatformSession, group: str) -> GroupRef:
        return GroupRef(id="d" * 32, slug=group)

    def api(self, *segments: str, query: dict[str, object] | None = None) -> str:
        return CannedClient(0).api(*segments, query=query)

    def one(self, session: PlatformSession, req: Req, what: str, *, read: bool = True) -> Any:
        if "/chat-channels" in req.url:
            return {"channels": self.inbox}
        assert req.method == "POST" and "/chat-request?g=" in req.url and not read
        return self.answer


BOBS_CHANNEL = {
    "id": CHANNEL,
    "user": {"id": BOB, "name": "bob", "first_name": "Bob", "last_name": "B"},
    "user_ids": [ME, BOB],
    "last_message": None,
}


@pytest.mark.parametrize(
    ("answer", "member"),
    [
        # PLATFORM.md: ``{channel: {id, …}}`` (one client's code); the bare channel is read as well
        ({"channel": BOBS_CHANNEL}, PlatformUser(id=BOB, handle="bob", name="Bob B")),
        (BOBS_CHANNEL, PlatformUser(id=BOB, handle="bob", name="Bob B")),
        # no more than the id promised: the chat is still with the member it was opened with
        ({"channel": {"id": CHANNEL}}, PlatformUser(id=BOB, handle="", name="")),
        ({"channel": {"id": CHANNEL, "user": {"first_name": "Bob", "last_name": "B"}}}, PlatformUser(BOB, "", "Bob B")),
    ],
)
def test_a_chat_request_answer_names_the_member_it_was_opened_with(
    answer: dict[str, Any], member: PlatformUser
) -> None:
    conversation = PlatformDms(ChatRequestClient(answer)).open_conversation(SESSION, BOB, "club")  # type: ignore[arg-type]
    assert conversation.id == CHANNEL and conversation.with_ == member


def test_a_lean_chat_request_answer_keeps_what_the_inbox_said_of_the_member() -> None:
    """A conversation seen in full in the inbox, then reopened with an answer holding only its id, still
    names the member in full (as the inbox does), rather than an id with an empty handle and name."""
    dms = PlatformDms(ChatRequestClient({"channel": {"id": CHANNEL}}, inbox=[BOBS_CHANNEL]))  # type: ignore[arg-type]
    dms.list_conversations(SESSION, 0, 30)
    conversation = dms.open_conversation(SESSION, BOB, "club")
    assert conversation.with_ == PlatformUser(id=BOB, handle="bob", name="Bob B")


class GroupListsClient:
    """The account's own groups, and the other member's list served 30 a page as the platform does."""

    group_pages = PlatformClient.group_pages  # the walk under test, over this class's ``one``

    def __init__(self, mine: list[str], theirs: list[str]) -> None:
        self.mine, self.theirs = mine, theirs
        self.pages_read = 0

    def me(self, session: PlatformSession) -> PlatformUser:
        return PlatformUser(id=ME, handle="alice", name="Alice A")

    def my_groups(self, session: PlatformSession) -> list[dict[str, Any]]:
        return [{"id": g} for g in self.mine]

    def api(self, *segments: str, query: dict[str, object] | None = None) -> str:
        return CannedClient(0).api(*segments, query=query)

    def one(self, session: PlatformSession, req: Req, what: str, *, read: bool = True) -> Any:
        if "/chat-request" in req.url:
            return {"channel": {"id": CHANNEL, "user": {"id": BOB, "name": "bob"}, "last_message": None}}
        query = parse_qs(urlsplit(req.url).query)
        offset, limit = int(query["offset"][0]), int(query["limit"][0])
        self.pages_read += 1
        return {"groups": [{"id": g} for g in self.theirs[offset : offset + limit]]}


def test_a_group_both_members_share_is_looked_for_past_the_first_page_of_theirs() -> None:
    """The other member's group list may hold all of their groups, 30 a page: a shared one on a later page
    is found; none at all is a clear not-found after their last page, and the search is bounded."""
    mine = [f"{n:032x}" for n in range(3)]
    theirs = [f"{n + 100:032x}" for n in range(45)] + [mine[2]]
    client = GroupListsClient(mine, theirs)
    conversation = PlatformDms(client).open_conversation(SESSION, BOB, None)  # type: ignore[arg-type]
    assert conversation.id == CHANNEL and client.pages_read == 2
    stranger = GroupListsClient(mine, [f"{n + 100:032x}" for n in range(40)])
    with pytest.raises(NotFound, match="group you share"):
        PlatformDms(stranger).open_conversation(SESSION, BOB, None)  # type: ignore[arg-type]
    assert stranger.pages_read == 2
    busy = GroupListsClient(mine, [f"{n + 100:032x}" for n in range(1000)])
    with pytest.raises(NotFound):
        PlatformDms(busy).open_conversation(SESSION, BOB, None)  # type: ignore[arg-type]
    assert busy.pages_read == 10
