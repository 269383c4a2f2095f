"""Chat records as the platform sends them (PLATFORM.md, "Chat") → conversations and messages."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from adapters.platform import chat_mapping as chat
from community_api.errors import PlatformError
from community_api.model import PlatformUser

ME = "a" * 32
BOB = "b" * 32


def _no_self_id() -> str:
    raise AssertionError("the signed-in user was asked for although the channel names its member")


@pytest.mark.parametrize(
    "last_message",
    [
        {"id": "m" * 32, "created_at": "2026-11-01T10:00:00.5Z", "metadata": {"content": "hi", "src": "b" * 32}},
        {"id": "m" * 32, "created_at": "2026-11-01T10:00:00.5Z", "src": "b" * 32, "metadata": {"content": "hi"}},
    ],
)
def test_an_inbox_last_message_names_its_sender_in_its_metadata_or_beside_it(last_message: dict[str, Any]) -> None:
    """PLATFORM.md: a channel's ``last_message`` comes "with metadata.content, src"; either reading."""
    channel = {"id": "c" * 32, "user": {"id": "b" * 32, "name": "bob"}, "last_message": last_message}
    found = chat.conversation(channel).last_message
    assert found is not None and (found.sender_id, found.content) == ("b" * 32, "hi")
    with pytest.raises(PlatformError):  # no sender anywhere is still a shape we cannot read
        chat.message({"id": "m" * 32, "created_at": "2026-11-01T10:00:00Z", "metadata": {"content": "hi"}})


def test_a_channel_that_names_its_member_is_read_without_asking_who_we_are() -> None:
    channel = {"id": "c" * 32, "user": {"id": BOB, "name": "bob", "first_name": "Bob", "last_name": "Brennan"}}
    assert chat.conversation(channel, _no_self_id).with_ == PlatformUser(id=BOB, handle="bob", name="Bob Brennan")


@pytest.mark.parametrize(
    ("channel", "member"),
    [
        # PLATFORM.md's own description: ``user: {first_name, last_name, …}`` beside ``user_ids``
        (
            {"id": "c" * 32, "user": {"first_name": "Bob", "last_name": "Brennan"}, "user_ids": [ME, BOB]},
            PlatformUser(id=BOB, handle="", name="Bob Brennan"),
        ),
        (
            {"id": "c" * 32, "user": {"firstName": "Bob", "lastName": ""}, "userIds": [BOB, ME]},
            PlatformUser(id=BOB, handle="", name="Bob"),
        ),
        # an id without a handle, and a handle without an id
        ({"id": "c" * 32, "user": {"id": BOB, "first_name": "Bob"}}, PlatformUser(id=BOB, handle="", name="Bob")),
        (
            {"id": "c" * 32, "user": {"name": "bob"}, "user_ids": [ME, BOB]},
            PlatformUser(id=BOB, handle="bob", name="bob"),
        ),
        # no ``user`` at all: the member's id alone
        ({"id": "c" * 32, "user_ids": [ME, BOB]}, PlatformUser(id=BOB, handle="", name="")),
        # nothing tells the other member apart: still a conversation, with no member
        ({"id": "c" * 32, "user": {"first_name": "Bob"}}, None),
        ({"id": "c" * 32, "user": {"first_name": "Bob"}, "user_ids": [ME]}, None),
        ({"id": "c" * 32, "user": {"first_name": "Bob"}, "user_ids": [ME, BOB, "d" * 32]}, None),
        ({"id": "c" * 32, "user": {"first_name": "Bob"}, "user_ids": "a,b"}, None),
        (
            {"id": "c" * 32, "user": {"first_name": "Bob"}, "user_ids": [None, 7, "", ME, BOB]},
            PlatformUser(BOB, "", "Bob"),
        ),
        ({"id": "c" * 32, "user": "bob", "user_ids": [ME, BOB]}, PlatformUser(id=BOB, handle="", name="")),
    ],
)
def test_a_channel_s_other_member_is_read_from_what_the_platform_promises(
    channel: dict[str, Any], member: PlatformUser | None
) -> None:
    assert chat.conversation(channel, lambda: ME).with_ == member


def test_without_a_way_to_ask_who_we_are_a_lean_channel_has_no_member() -> None:
    assert chat.conversation({"id": "c" * 32, "user": {"first_name": "Bob"}, "user_ids": [ME, BOB]}).with_ is None


def test_a_channel_without_an_id_is_still_a_shape_we_cannot_read() -> None:
    with pytest.raises(PlatformError):
        chat.conversation({"user": {"id": BOB, "name": "bob"}}, lambda: ME)


@pytest.mark.parametrize("name", ["last_message", "lastMessage"])
def test_a_channel_without_a_time_of_its_own_is_as_recent_as_its_last_message(name: str) -> None:
    """The last message is read under either name; it belongs to the channel it came in (the record need
    not say so), and a channel with no ``updated_at`` is dated by it, so that the inbox can still be ordered."""
    last = {"id": "m" * 32, "created_at": "2026-11-01T10:00:00.5Z", "metadata": {"content": "hi", "src": BOB}}
    found = chat.conversation({"id": "c" * 32, "user": {"id": BOB, "name": "bob"}, name: last})
    assert found.last_message is not None
    assert (found.last_message.conversation_id, found.last_message.content) == ("c" * 32, "hi")
    assert found.updated_at == found.last_message.created_at == datetime(2026, 11, 1, 10, 0, 0, 500_000, tzinfo=UTC)
    silent = chat.conversation({"id": "c" * 32, "user": {"id": BOB, "name": "bob"}})
    assert silent.last_message is None and silent.updated_at is None


@pytest.mark.parametrize("user_ids", [[], [None, 7, ""]])
def test_a_channel_that_names_no_member_at_all_costs_no_read_of_who_we_are(user_ids: list[object]) -> None:
    """Asking who the signed-in user is may be a platform read: not for a channel whose ids name nobody."""
    found = chat.conversation({"id": "c" * 32, "user": {"first_name": "Bob"}, "user_ids": user_ids}, _no_self_id)
    assert found.with_ is None


@pytest.mark.parametrize(
    ("names", "spelling"),
    [(("channel_id", "num_unread", "created_at"), "snake_case"), (("channelId", "numUnread", "createdAt"), "camel")],
)
def test_a_message_and_a_channel_are_read_in_either_spelling(names: tuple[str, str, str], spelling: str) -> None:
    channel_id, num_unread, created_at = names
    message = chat.message({"id": "m" * 32, channel_id: "c" * 32, created_at: "2026-11-01T10:00:00Z", "src": BOB})
    assert message.conversation_id == "c" * 32, spelling
    channel = {"id": "c" * 32, "user": {"id": BOB, "name": "bob"}, "metadata": {num_unread: 3}}
    assert chat.conversation(channel).unread_count == 3, spelling
