"""The DM inbox, threads and sending, with the per-connection throttle."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import falcon.testing
import pytest

from community_api.errors import InvalidRequest, PlatformUnavailable
from community_api.model import PlatformSession
from fakes.platform_seed import ConversationRec
from tests.unit.world_support import DM_GAP, Ready


def test_inbox_pages_by_offset_cursor(ready: Ready) -> None:
    world = ready.world
    first = world.get("/v1/dms", ready.key).json
    assert len(first["conversations"]) == 30
    assert first["nextCursor"] == "30"
    second = world.get("/v1/dms", ready.key, params={"cursor": first["nextCursor"]}).json
    assert 0 < len(second["conversations"]) < 30 and second["nextCursor"] is None
    ids = [c["id"] for c in first["conversations"] + second["conversations"]]
    assert len(ids) == len(set(ids)) == 45
    conversation = first["conversations"][0]
    assert set(conversation) == {"id", "with", "lastMessage", "unreadCount", "awaitingReply", "updatedAt"}
    assert set(conversation["with"]) == {"id", "handle", "name"}


def test_an_inbox_one_short_of_two_pages_ends_on_its_second_and_an_empty_chat_awaits_nothing(ready: Ready) -> None:
    """59 conversations: the second page holds 29 and says there is no third. A chat opened with nothing
    sent yet (the platform lists it in no inbox) read as a thread awaits no reply."""
    world = ready.world
    me = ready.connection["platformUserId"]
    others = [user for user in world.gateway.world.users if user != me]
    for n in range(14):
        added = world.gateway.world.add_conversation(me, others[n % len(others)], world.clock.now())
        world.gateway.world.add_message(added, me, f"hello {n}", world.clock.now())
    first = world.get("/v1/dms", ready.key).json
    second = world.get("/v1/dms", ready.key, params={"cursor": first["nextCursor"]}).json
    assert (len(first["conversations"]), first["nextCursor"]) == (30, "30")
    assert (len(second["conversations"]), second["nextCursor"]) == (29, None)
    empty = world.gateway.world.add_conversation(me, others[0], world.clock.now())
    thread = world.get(f"/v1/dms/{empty.id}", ready.key).json
    assert thread["messages"] == [] and thread["conversation"]["lastMessage"] is None
    assert thread["conversation"]["awaitingReply"] is False


def test_awaiting_reply_scans_pages_and_keeps_only_those(ready: Ready) -> None:
    world = ready.world
    own_id = ready.connection["platformUserId"]
    every = (
        world.get("/v1/dms", ready.key).json["conversations"]
        + world.get("/v1/dms", ready.key, params={"cursor": "30"}).json["conversations"]
    )
    expected = [c["id"] for c in every if c["lastMessage"] and c["lastMessage"]["senderId"] != own_id]
    assert expected and len(expected) < len(every)
    awaiting = world.get("/v1/dms", ready.key, params={"awaitingReply": "true"}).json
    assert [c["id"] for c in awaiting["conversations"]] == expected
    assert all(c["awaitingReply"] for c in awaiting["conversations"])
    assert awaiting["nextCursor"] is None


def test_awaiting_reply_scans_at_most_five_pages_and_says_where_to_go_on(ready: Ready) -> None:
    # The seed's inbox holds two pages (45 conversations); this one holds eight: 195 more, all older than the
    # seed's, a third of them answered last by the account itself.
    world = ready.world
    gateway = world.gateway
    own_id = ready.connection["platformUserId"]
    seeded = next(c for c in gateway.world.conversations.values() if own_id in c.user_ids and c.messages)
    someone = next(u for u in seeded.user_ids if u != own_id)
    oldest = min(c.messages[0].created_at for c in gateway.world.conversations.values() if c.messages)
    for i in range(8 * 30 - 45):
        at = oldest - timedelta(days=1, minutes=i)
        conversation = gateway.world.add_conversation(own_id, someone, at)
        gateway.world.add_message(conversation, someone if i % 3 else own_id, f"message {i}", at)
    inbox = []
    for offset in range(0, 8 * 30, 30):
        inbox += world.get("/v1/dms", ready.key, params={"cursor": str(offset)}).json["conversations"]
    assert len(inbox) == 8 * 30

    pages_before = gateway.calls["list_conversations"]
    first = world.get("/v1/dms", ready.key, params={"awaitingReply": "true"}).json
    assert gateway.calls["list_conversations"] - pages_before == 5
    assert [c["id"] for c in first["conversations"]] == [c["id"] for c in inbox[:150] if c["awaitingReply"]]
    assert first["nextCursor"] == "150"
    rest = world.get("/v1/dms", ready.key, params={"awaitingReply": "true", "cursor": "150"}).json
    assert [c["id"] for c in rest["conversations"]] == [c["id"] for c in inbox[150:] if c["awaitingReply"]]
    assert rest["nextCursor"] is None


def test_a_conversation_moved_up_while_the_inbox_is_scanned_is_answered_once(ready: Ready) -> None:
    """The awaiting-reply scan reads its pages one after another; a conversation that gets a message
    meanwhile moves to the top and the rest move down a place, so the second page starts with the last
    conversation of the first. It is answered once, as it is in the inbox."""
    world = ready.world
    gateway = world.gateway
    own_id = ready.connection["platformUserId"]
    read_pages = gateway.list_conversations
    mine = [c for c in gateway.world.conversations.values() if own_id in c.user_ids and c.messages]
    mine.sort(key=lambda c: (c.messages[-1].created_at, c.id), reverse=True)  # the inbox's order

    def other(conversation: ConversationRec) -> str:
        return next(u for u in conversation.user_ids if u != own_id)

    # The last conversation of the first page awaits a reply (a message to alice, a moment after its last).
    last_of_first = mine[29]
    at = last_of_first.messages[-1].created_at + timedelta(microseconds=1)
    gateway.world.add_message(last_of_first, other(last_of_first), "did you see this?", at)

    def a_message_arrives_after_the_first_page(session: PlatformSession, offset: int, limit: int) -> list[Any]:
        page = read_pages(session, offset, limit)
        if offset == 0:
            gateway.world.add_message(mine[-1], other(mine[-1]), "are you there?", world.clock.now())
        return page

    gateway.list_conversations = a_message_arrives_after_the_first_page  # type: ignore[method-assign]
    scanned = world.get("/v1/dms", ready.key, params={"awaitingReply": "true"}).json["conversations"]
    ids = [c["id"] for c in scanned]
    assert len(ids) == len(set(ids))
    gateway.list_conversations = read_pages  # type: ignore[method-assign]
    inbox = (
        world.get("/v1/dms", ready.key).json["conversations"]
        + (world.get("/v1/dms", ready.key, params={"cursor": "30"}).json["conversations"])
    )
    awaiting_now = {c["id"] for c in inbox if c["awaitingReply"]}
    assert set(ids) <= awaiting_now


@pytest.mark.parametrize(
    "params",
    [{"cursor": "-1"}, {"cursor": "abc"}, {"cursor": "1.5"}, {"awaitingReply": "yes"}, {"awaitingReply": "TRUE!"}],
)
def test_bad_inbox_parameters(ready: Ready, params: dict[str, str]) -> None:
    result = ready.world.get("/v1/dms", ready.key, params=params)
    assert result.status_code == 400


def test_thread_is_oldest_to_newest_and_cursor_returns_older(ready: Ready) -> None:
    world = ready.world
    inbox = world.get("/v1/dms", ready.key).json["conversations"]
    bob = next(c for c in inbox if c["with"]["handle"] == "bob")
    page = world.get(f"/v1/dms/{bob['id']}", ready.key).json
    assert set(page) == {"conversation", "messages", "nextCursor"}
    times = [m["createdAt"] for m in page["messages"]]
    assert times == sorted(times)
    assert page["nextCursor"] == page["messages"][0]["id"]
    seen = [m["id"] for m in page["messages"]]
    cursor = page["nextCursor"]
    while cursor:
        older = world.get(f"/v1/dms/{bob['id']}", ready.key, params={"cursor": cursor}).json
        assert older["messages"][-1]["createdAt"] <= page["messages"][0]["createdAt"]
        seen = [m["id"] for m in older["messages"]] + seen
        cursor = older["nextCursor"]
    assert len(seen) == len(set(seen)) == 70


def test_someone_elses_thread_is_404(ready: Ready) -> None:
    assert ready.world.get("/v1/dms/not-a-conversation", ready.key).status_code == 404


def send(ready: Ready, body: dict[str, Any], **kwargs: Any) -> falcon.testing.Result:
    return ready.world.post("/v1/dms", ready.key, body, **kwargs)


def test_send_to_a_member_and_to_a_conversation(ready: Ready) -> None:
    world = ready.world
    bob = world.gateway.user("bob")
    sent = send(ready, {"to": bob.id, "content": "hi bob"}, params={"group": "builders-club"})
    assert sent.status_code == 201
    assert set(sent.json) == {"message", "conversation"}
    assert sent.json["message"]["content"] == "hi bob"
    assert sent.json["conversation"]["with"]["handle"] == "bob"
    world.clock.advance(seconds=DM_GAP)
    again = send(ready, {"conversationId": sent.json["conversation"]["id"], "content": "again"})
    assert again.status_code == 201
    assert [m.content for m in world.gateway.sent_messages()] == ["hi bob", "again"]


def test_a_sent_message_brings_its_conversation_up_to_date(ready: Ready) -> None:
    # The answer's conversation is the one the message went to, as it stands after the send: its last
    # message is the one sent and it was updated then (not when it was last read), as the inbox shows it.
    world = ready.world
    bob = world.gateway.user("bob")
    world.clock.advance(seconds=3600)
    sent = send(ready, {"to": bob.id, "content": "hi bob"}, params={"group": "builders-club"}).json
    conversation, message = sent["conversation"], sent["message"]
    assert conversation["lastMessage"] == message
    assert conversation["updatedAt"] == message["createdAt"]
    inbox = world.get("/v1/dms", ready.key).json["conversations"]
    listed = next(c for c in inbox if c["id"] == conversation["id"])
    assert listed["updatedAt"] == conversation["updatedAt"]
    assert listed["lastMessage"] == conversation["lastMessage"]


@pytest.mark.parametrize(
    "body",
    [
        {"content": "x"},
        {"to": "u", "conversationId": "c", "content": "x"},
        {"to": "u"},
        {"to": "u", "content": ""},
        {"to": 5, "content": "x"},
        {"to": "u", "content": "x", "conversationID": "c"},
        {"to": "u", "content": "x" * 10_001},
    ],
)
def test_send_validation(ready: Ready, body: dict) -> None:
    assert send(ready, body).status_code == 400
    assert ready.world.gateway.sent_messages() == []
    # A refused request used no quota.
    assert ready.world.throttle.quota(ready.connection["platformUserId"]).next_allowed_at is None


def test_second_send_inside_the_gap_gets_429_with_exact_retry_after(ready: Ready) -> None:
    world = ready.world
    bob = world.gateway.user("bob")
    assert send(ready, {"to": bob.id, "content": "one"}).status_code == 201
    world.clock.advance(seconds=10)
    refused = send(ready, {"to": bob.id, "content": "two"})
    assert refused.status_code == 429
    assert refused.json["error"]["code"] == "rate_limited"
    assert refused.headers["Retry-After"] == str(int(DM_GAP - 10))
    assert refused.json["error"]["details"]["retryAfter"] == int(DM_GAP - 10)
    assert refused.json["error"]["details"]["reason"] == "dm_throttle"  # not the write pace: a longer wait
    assert len(world.gateway.sent_messages()) == 1


def test_a_dm_to_oneself_is_refused_naming_the_field_and_uses_no_quota(ready: Ready) -> None:
    me = ready.world.get("/v1/whoami", ready.key).json["id"]
    refused = send(ready, {"to": me, "content": "a note to self"})
    assert refused.status_code == 400, refused.text
    assert refused.json["error"]["details"] == {"field": "to"}
    assert "yourself" in refused.json["error"]["message"]
    bob = ready.world.gateway.user("bob")
    assert send(ready, {"to": bob.id, "content": "then to bob"}).status_code == 201  # no DM pace was taken


def test_a_send_the_platform_refuses_uses_no_quota(ready: Ready) -> None:
    world = ready.world
    bob = world.gateway.user("bob")
    world.gateway.fail_next("send_message", InvalidRequest("the platform refused the message"))
    assert send(ready, {"to": bob.id, "content": "one"}).status_code == 400
    assert send(ready, {"to": bob.id, "content": "one"}).status_code == 201
    world.clock.advance(seconds=DM_GAP)
    assert send(ready, {"conversationId": "0" * 32, "content": "x"}).status_code == 404
    assert world.throttle.quota(ready.connection["platformUserId"]).sent_last_hour == 1
    assert [m.content for m in world.gateway.sent_messages()] == ["one"]


def test_a_send_with_unknown_outcome_keeps_its_quota(ready: Ready) -> None:
    world = ready.world
    bob = world.gateway.user("bob")
    world.gateway.fail_next("send_message", PlatformUnavailable("no answer in time"))
    assert send(ready, {"to": bob.id, "content": "one"}).status_code == 503
    assert send(ready, {"to": bob.id, "content": "one"}).status_code == 429
    assert world.throttle.quota(ready.connection["platformUserId"]).sent_last_hour == 1


def test_a_send_that_failed_opening_the_chat_sent_nothing_and_may_be_retried(ready: Ready) -> None:
    # Opening the chat with a member comes before the message: however it fails (here no answer in time),
    # the message was not sent, so its quota is given back and the same Idempotency-Key may act again.
    world = ready.world
    bob = world.gateway.user("bob")
    headers = {"Idempotency-Key": "dm-open"}
    world.gateway.fail_next("open_conversation", PlatformUnavailable("no answer in time"))
    failed = send(ready, {"to": bob.id, "content": "hi"}, params={"group": "builders-club"}, headers=headers)
    assert failed.status_code == 503 and "outcomeUnknown" not in failed.json["error"]["details"]
    assert world.throttle.quota(ready.connection["platformUserId"]).sent_last_hour == 0
    again = send(ready, {"to": bob.id, "content": "hi"}, params={"group": "builders-club"}, headers=headers)
    assert again.status_code == 201
    assert [m.content for m in world.gateway.sent_messages()] == ["hi"]


def test_a_send_that_failed_reading_its_thread_sent_nothing_and_may_be_retried(ready: Ready) -> None:
    # A DM to a conversation reads the thread first: that read timing out sent nothing.
    world = ready.world
    conversation = world.get("/v1/dms", ready.key).json["conversations"][0]["id"]
    headers = {"Idempotency-Key": "dm-thread"}
    world.gateway.fail_next("get_messages", PlatformUnavailable("no answer in time"))
    failed = send(ready, {"conversationId": conversation, "content": "hi"}, headers=headers)
    assert failed.status_code == 503 and "outcomeUnknown" not in failed.json["error"]["details"]
    again = send(ready, {"conversationId": conversation, "content": "hi"}, headers=headers)
    assert again.status_code == 201
    assert [m.content for m in world.gateway.sent_messages()] == ["hi"]


def test_dm_idempotency_sends_once(ready: Ready) -> None:
    world = ready.world
    bob = world.gateway.user("bob")
    headers = {"Idempotency-Key": "dm-1"}
    first = send(ready, {"to": bob.id, "content": "once"}, headers=headers)
    second = send(ready, {"to": bob.id, "content": "once"}, headers=headers)
    assert first.status_code == second.status_code == 201 and first.json == second.json
    assert len(world.gateway.sent_messages()) == 1


def test_an_idempotency_key_used_again_with_another_query_is_a_different_request(ready: Ready) -> None:
    """The query is part of the request: the same body sent with another ``group`` is not a retry."""
    world = ready.world
    bob = world.gateway.user("bob")
    headers = {"Idempotency-Key": "dm-query"}
    first = send(ready, {"to": bob.id, "content": "once"}, params={"group": "builders-club"}, headers=headers)
    assert first.status_code == 201, first.text
    other = send(ready, {"to": bob.id, "content": "once"}, headers=headers)
    assert other.status_code == 409 and other.json["error"]["details"] == {"reason": "different_request"}
    assert len(world.gateway.sent_messages()) == 1


def test_throttle_is_per_connection(ready: Ready) -> None:
    world = ready.world
    bob_connection = world.link(ready.browser, "bob")
    alice = world.gateway.user("alice")
    carol = world.gateway.user("carol")
    assert send(ready, {"to": carol.id, "content": "from alice"}).status_code == 201
    other = send(
        ready, {"to": alice.id, "content": "from bob"}, headers={"X-Community-Connection": bob_connection["id"]}
    )
    assert other.status_code == 201


def test_me_shows_the_dm_quota(ready: Ready) -> None:
    world = ready.world
    bob = world.gateway.user("bob")
    send(ready, {"to": bob.id, "content": "one"})
    dms = world.client.simulate_get("/v1/me", headers=ready.browser.headers()).json["usage"]["dms"]
    assert dms["sentLastHour"] == 1 and dms["sentToday"] == 1
    assert dms["hourlyLimit"] == 20 and dms["dailyLimit"] == 100
    assert dms["nextAllowedAt"] is not None
