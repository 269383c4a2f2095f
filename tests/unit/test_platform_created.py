"""Reading the answers to creates (adapters/platform/platform_created.py): PLATFORM.md promises ``{id, name,
…}`` for a new post or comment and nothing for a sent DM, so whatever an answer leaves out is taken from
what was sent, and whatever it says wins."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from adapters.platform.platform_created import created_comment, created_post, sent_message
from community_api.errors import PlatformError
from community_api.model import PlatformUser

NOW = datetime(2026, 11, 26, 12, 0, 0, tzinfo=UTC)
POST, GROUP, LABEL, PARENT = "a" * 32, "b" * 32, "c" * 32, "d" * 32
ME = PlatformUser(id="e" * 32, handle="alice", name="Alice Andersen")
SENT = {"title": "Hello", "content": "Body", "label_id": LABEL}


def post_from(answer: object) -> Any:
    return created_post(answer, platform_url="https://example.test", slug="club", group_id=GROUP, now=NOW, **SENT)


def comment_from(answer: object, parent: str | None = PARENT) -> Any:
    return created_comment(answer, post_id=POST, parent_id=parent, content="Hi", author=ME, now=NOW)


@pytest.mark.parametrize(
    "answer",
    [
        {"id": POST, "name": "hello-aaaa"},  # no more than PLATFORM.md promises
        {"id": POST, "name": "hello-aaaa", "metadata": {}},
        {"id": POST, "name": "hello-aaaa", "metadata": None, "created_at": None, "group_id": ""},
    ],
)
def test_a_post_answered_with_its_id_alone_is_what_was_sent(answer: dict[str, Any]) -> None:
    post = post_from(answer)
    assert (post.id, post.group_id, post.title, post.content, post.label_id) == (POST, GROUP, "Hello", "Body", LABEL)
    assert post.created_at == post.updated_at == NOW
    assert (post.author, post.author_id, post.upvotes, post.comment_count, post.pinned) == (None, None, 0, 0, False)
    assert post.url == "https://example.test/club/hello-aaaa"


@pytest.mark.parametrize("spelling", ["snake", "camel"])
def test_what_the_post_answer_says_wins(spelling: str) -> None:
    names = {
        "snake": ("group_id", "label_id", "created_at", "updated_at"),
        "camel": ("groupId", "labelId", "createdAt", "updatedAt"),
    }[spelling]
    answer = {
        "id": POST,
        "name": "hello-bbbb",
        names[0]: "f" * 32,
        names[1]: "0" * 32,
        names[2]: "2026-11-26T11:59:58.5Z",
        names[3]: "2026-11-26T11:59:59Z",
        "metadata": {"title": "Hello (trimmed)", "content": "", "upvotes": 1, "comments": 2, "pinned": 1},
    }
    post = post_from(answer)
    assert (post.comment_count, post.pinned) == (2, True)
    assert (post.group_id, post.label_id, post.title, post.content, post.upvotes) == (
        "f" * 32,
        "0" * 32,
        "Hello (trimmed)",
        "",
        1,
    )
    assert post.created_at == datetime(2026, 11, 26, 11, 59, 58, 500000, tzinfo=UTC)
    assert post.updated_at == datetime(2026, 11, 26, 11, 59, 59, tzinfo=UTC)


def test_a_post_answered_with_its_time_of_creation_alone_was_last_updated_then() -> None:
    post = post_from({"id": POST, "name": "hello-cccc", "created_at": "2026-11-26T11:59:58Z"})
    assert post.created_at == post.updated_at == datetime(2026, 11, 26, 11, 59, 58, tzinfo=UTC)


def test_a_post_label_from_its_metadata_when_the_post_names_none() -> None:
    assert post_from({"id": POST, "metadata": {"labels": "1" * 32}}).label_id == "1" * 32
    # No label sent and none answered: none.
    none = created_post(
        {"id": POST}, platform_url="u", slug=None, group_id=GROUP, title="t", content="", label_id=None, now=NOW
    )
    assert none.label_id is None and none.url is None
    named = created_post(
        {"id": POST, "name": "t-aaaa"},
        platform_url="u",
        slug=None,
        group_id=GROUP,
        title="t",
        content="",
        label_id=None,
        now=NOW,
    )
    assert named.url is None  # a post's address needs its group's slug as well as its own name


@pytest.mark.parametrize(
    ("answer", "parent"),
    [
        ({"id": "9" * 32}, PARENT),  # bare: the reply is to what was asked
        ({"id": "9" * 32, "name": "9" * 32, "parent_id": PARENT}, PARENT),
        ({"id": "9" * 32, "parent_id": "8" * 32}, "8" * 32),  # the platform moved the reply: its word wins
        ({"id": "9" * 32, "parentId": "8" * 32}, "8" * 32),
        ({"id": "9" * 32, "parent_id": POST}, None),  # a top-level comment's parent is the post …
        ({"id": "9" * 32, "parent_id": ""}, None),  # … or ""
    ],
)
def test_a_reply_names_the_comment_it_went_under(answer: dict[str, Any], parent: str | None) -> None:
    comment = comment_from(answer)
    assert (comment.id, comment.post_id, comment.parent_id) == ("9" * 32, POST, parent)
    assert (comment.author_id, comment.author, comment.content, comment.created_at) == (ME.id, ME, "Hi", NOW)


def test_a_top_level_comment_answered_bare_has_no_parent() -> None:
    assert comment_from({"id": "9" * 32}, parent=None).parent_id is None


def test_what_the_comment_answer_says_wins() -> None:
    answer = {
        "id": "9" * 32,
        "root_id": POST,
        "created_at": "2026-11-26T11:00:00.04203Z",
        "metadata": {"content": "Hi!"},
    }
    comment = comment_from(answer | {"root_id": "7" * 32, "metadata": {"content": "Hi!", "upvotes": 3}})
    assert (comment.post_id, comment.upvotes) == ("7" * 32, 3)
    comment = comment_from(answer)
    assert comment.content == "Hi!"
    assert comment.created_at == datetime(2026, 11, 26, 11, 0, 0, 42030, tzinfo=UTC)


@pytest.mark.parametrize(
    "answer",
    [
        {"message": {"id": "9" * 32}},  # no id of its own: nothing says what was created
        {"id": None, "name": "x"},
        {"id": ["9"]},
        {"id": "9" * 32, "created_at": 5},
        {"id": "9" * 32, "created_at": "yesterday"},
        [],
        None,
        "ok",
    ],
)
def test_an_answer_that_says_nothing_readable_is_a_platform_error(answer: object) -> None:
    for read in (post_from, comment_from):
        with pytest.raises(PlatformError):
            read(answer)


@pytest.mark.parametrize(
    ("answer", "sender"),
    [
        ({"id": "9" * 32}, ME.id),
        ({"id": "9" * 32, "metadata": {"content": "Hi", "src": "7" * 32}}, "7" * 32),
        ({"id": "9" * 32, "src": "7" * 32}, "7" * 32),
        ({"message": {"id": "9" * 32, "channel_id": "c" * 32}}, ME.id),  # wrapped, as the chat request's channel
        ({"id": "9" * 32, "message": "sent"}, ME.id),
    ],
)
def test_a_sent_message_is_read_from_whatever_its_answer_holds(answer: dict[str, Any], sender: str) -> None:
    message = sent_message(answer, conversation_id="c" * 32, content="Hi", sender_id=ME.id, now=NOW)
    assert (message.id, message.conversation_id, message.sender_id, message.content, message.created_at) == (
        "9" * 32,
        "c" * 32,
        sender,
        "Hi",
        NOW,
    )
    for unreadable in ({"content": "Hi"}, {"message": "sent"}, {"message": {"content": "Hi"}}):
        with pytest.raises(PlatformError):
            sent_message(unreadable, conversation_id="c" * 32, content="Hi", sender_id=ME.id, now=NOW)


def test_what_the_sent_message_answer_says_wins() -> None:
    """Its own id before a ``message`` member's, its channel and its (trimmed) text before what was sent."""
    answer = {
        "id": "9" * 32,
        "channel_id": "f" * 32,
        "metadata": {"content": "Hi (trimmed)", "src": ME.id},
        "message": {"id": "8" * 32},
    }
    message = sent_message(answer, conversation_id="c" * 32, content="Hi", sender_id=ME.id, now=NOW)
    assert (message.id, message.conversation_id, message.content) == ("9" * 32, "f" * 32, "Hi (trimmed)")
