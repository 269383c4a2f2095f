"""The gateway's readers against payloads written in the shapes PLATFORM.md reports, one test per variant
where its sources disagree (the DM-thread and page-data variants are in ``test_platform_threads.py`` and
``test_platform_mapping.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.platform import platform_mapping as m
from adapters.platform.platform_posts import COMMENTS_PAGE, _next_page
from adapters.platform.selenium_platform_gateway import _once

BASE = "https://www.example-community.com"
POST = "p" * 32


def feed_post(pid: str, slug: str, *, pinned: int | None) -> dict[str, Any]:
    """A post of ``pageProps.postTrees`` as captured (camelCase, ``metadata.pinned`` an integer or absent)."""
    metadata: dict[str, Any] = {
        "title": "Seed swap",
        "content": "Bring seeds",
        "comments": 2,
        "upvotes": 5,
        "labels": "",
        "hasNewComments": 0,
        "lastComment": 1731068076116300123,
        "lastCommentId": "c" * 32,
        "imagePreview": "",
        "attachments": "",
    }
    if pinned is not None:
        metadata["pinned"] = pinned
    return {
        "id": pid,
        "name": slug,
        "postType": "generic",
        "groupId": "g" * 32,
        "userId": "u" * 32,
        "rootId": pid,
        "labelId": "",
        "createdAt": "2024-11-08T12:14:36.1163Z",
        "updatedAt": "2024-11-08T12:14:36.1163Z",
        "metadata": metadata,
        "user": {
            "id": "u" * 32,
            "name": "alice",
            "firstName": "Alice",
            "lastName": "Andersen",
            "metadata": {"pictureProfile": "", "spData": '{"pts": 3, "lv": 1}'},
        },
    }


@pytest.mark.parametrize("repeat_id", ["a" * 32, "b" * 32], ids=["same-id", "another-id-same-slug"])
def test_a_pinned_post_and_its_repeat_are_listed_once(repeat_id: str) -> None:
    page = [
        feed_post("a" * 32, "seed-swap", pinned=1),
        feed_post("d" * 32, "other", pinned=0),
        feed_post(repeat_id, "seed-swap", pinned=None),
    ]  # the repeat carries no metadata.pinned
    posts = _once([m.post(record, BASE, "quiet-garden") for record in page])
    assert [(p.id, p.pinned) for p in posts] == [("a" * 32, True), ("d" * 32, False)]


def comment_node(cid: str, created: str) -> dict[str, Any]:
    return {
        "post": {
            "id": cid,
            "post_type": "comment",
            "root_id": POST,
            "parent_id": "",
            "user_id": "u" * 32,
            "created_at": created,
            "metadata": {"content": "hi", "upvotes": 0},
        },
        "children": [],
    }


def comments_answer(count: int, **extra: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    tree = {
        "post": {"id": POST},
        "children": [comment_node(f"{n:032x}", "2024-11-08T12:14:36.9Z") for n in range(count)],
    }
    return {"post_tree": tree, **extra}, tree


def test_comments_page_on_with_the_answers_last_while_meta_says_there_is_more() -> None:
    data, tree = comments_answer(COMMENTS_PAGE, last=1731068076900001, meta={"has_more": True})
    assert _next_page(data, tree, POST) == 1731068076900001
    data, tree = comments_answer(COMMENTS_PAGE, last=1731068076900001, meta={"has_more": False})
    assert _next_page(data, tree, POST) is None


def test_without_last_or_meta_a_full_page_asks_again_from_its_last_comment() -> None:
    data, tree = comments_answer(COMMENTS_PAGE)
    assert _next_page(data, tree, POST) == 1731068076900000  # "….9Z", read to the microsecond
    data, tree = comments_answer(COMMENTS_PAGE - 1)
    assert _next_page(data, tree, POST) is None
    data, tree = comments_answer(0, meta={"has_more": True})
    assert _next_page(data, tree, POST) is None  # nothing to page from


def test_a_group_names_its_labels_by_comma_joined_ids_and_they_are_read_from_its_label_list() -> None:
    record = {
        "id": "g" * 32,
        "name": "design-guild",
        "metadata": {
            "display_name": "Design Guild",
            "description": "",
            "total_members": 4,
            "labels": "1" * 32 + "," + "2" * 32,
        },
    }
    labels = [
        {"id": "1" * 32, "metadata": {"display_name": "General", "posts": 3}},
        {"id": "2" * 32, "metadata": {"display_name": "Critique", "posts": 5}},
    ]
    group = m.group(record, labels=labels)
    assert [(lb.id, lb.name) for lb in group.labels] == [("1" * 32, "General"), ("2" * 32, "Critique")]
    # Page data whose currentGroup lists no labels (one client's report) reads as a group without them;
    # the gateway asks api2 for the list (tests/contract/gateway_cases.py, TestReportedVariants).
    assert m.group({**record, "labels": None}).labels == ()
    assert m.group({**record, "labels": []}).labels == ()
