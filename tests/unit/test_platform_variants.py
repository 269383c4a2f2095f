"""The gateway's readers against payloads written in the shapes PLATFORM.md reports, one test per variant
where its sources disagree (the DM-thread and page-data variants are in ``test_platform_threads.py`` and
``test_platform_mapping.py``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from adapters.platform import platform_mapping as m
from adapters.platform.page_fetch import PageRunner, Req
from adapters.platform.platform_answers import Resp
from adapters.platform.platform_client import GroupRef, PlatformClient
from adapters.platform.platform_posts import COMMENTS_PAGE, PlatformPosts, _next_page
from adapters.platform.selenium_platform_gateway import _once
from community_api.errors import NotFound, PlatformUnavailable
from community_api.model import PlatformSession, PlatformUser

BASE = "https://www.example-community.com"
POST = "p" * 32
SESSION = PlatformSession(connection_id="con_1", token="t")


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


@pytest.mark.parametrize(("has_more", "pages_on"), [(1, True), (0, False), (True, True), (False, False)])
def test_meta_has_more_is_read_as_the_platform_writes_flags_true_false_or_1_0(has_more: object, pages_on: bool) -> None:
    """The platform writes some flags as 0/1: ``has_more: 0`` after a full page is the end, not a page to
    guess at (which would be one more read)."""
    data, tree = comments_answer(COMMENTS_PAGE, last=1731068076900001, meta={"has_more": has_more})
    assert _next_page(data, tree, POST) == (1731068076900001 if pages_on else None)


@pytest.mark.parametrize("last", [True, 0, -5, "1731068076900001", 1.7e15, None])
def test_a_last_that_is_no_time_is_not_a_cursor_the_last_comments_time_is(last: object) -> None:
    """``last`` is microseconds, a positive integer; anything else (``true``, which Python counts as 1, zero,
    a negative, text, a float) would restart the walk from the thread's beginning: the page's last comment
    gives the cursor instead."""
    data, tree = comments_answer(COMMENTS_PAGE, last=last, meta={"has_more": True})
    assert _next_page(data, tree, POST) == 1731068076900000


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


def test_a_group_that_does_not_say_how_many_members_it_has_counts_none_rather_than_zero() -> None:
    record = {"id": "g" * 32, "name": "design-guild", "metadata": {"display_name": "Design Guild"}}
    assert m.group(record).member_count is None  # unknown, which 0 would misstate
    assert m.group({**record, "metadata": {"totalMembers": 0}}).member_count == 0
    assert m.group({**record, "metadata": {"total_members": "12"}}).member_count == 12


class GroupListClient(PlatformClient):
    """The account's group list (``users/{id}/groups``) served as a platform variant would: pages held to
    ``cap`` groups whatever ``limit`` asks, ``has_more`` sent or not, ``offset`` heeded or not."""

    def __init__(
        self,
        count: int,
        *,
        cap: int = 30,
        has_more: bool = False,
        as_number: bool = False,
        heeds_offset: bool = True,
        camel: bool = False,
    ) -> None:
        super().__init__(PageRunner(BASE, "https://api2.example-community.com", timeout=5), pool=None, timeout=5)  # type: ignore[arg-type]
        self.groups = [{"id": f"{n:032x}", "name": f"group-{n}"} for n in range(count)]
        self.cap, self.has_more, self.as_number, self.heeds_offset = cap, has_more, as_number, heeds_offset
        self.flag_name = "hasMore" if camel else "has_more"  # page data's spelling, read on api2 too
        self.reads = 0

    def me(self, session: PlatformSession, *, fresh: bool = False) -> PlatformUser:
        return PlatformUser(id="a" * 32, handle="alice", name="Alice A")

    def one(self, session: PlatformSession, req: Req, what: str, *, read: bool = True) -> Any:
        self.reads += 1
        if self.reads > 50:
            raise AssertionError("the walk does not end")
        query = parse_qs(urlsplit(req.url).query)
        offset = int(query["offset"][0]) if self.heeds_offset else 0
        end = offset + min(int(query["limit"][0]), self.cap)
        answer: dict[str, Any] = {"groups": self.groups[offset:end]}
        if self.has_more:
            answer[self.flag_name] = int(end < len(self.groups)) if self.as_number else end < len(self.groups)
        return answer


@pytest.mark.parametrize(
    ("count", "variant", "reads"),
    [
        (25, {}, 1),  # a short page ends the list
        (60, {}, 3),  # 30, 30, then an empty page
        (30, {"has_more": True}, 1),  # a full page that says it is the last
        (30, {"has_more": True, "as_number": True}, 1),  # has_more written 0/1
        (45, {"has_more": True, "cap": 20}, 3),  # pages held to 20: has_more, not the page's length, says more
        (45, {"has_more": True, "cap": 20, "camel": True}, 3),  # the flag spelt hasMore
        (30, {"has_more": True, "camel": True}, 1),
        (45, {"heeds_offset": False}, 2),  # the same page again brings nothing new: the end
        (45, {"heeds_offset": False, "has_more": True}, 2),
    ],
)
def test_the_account_s_groups_are_read_to_the_end_of_the_list_and_no_further(
    count: int, variant: dict[str, Any], reads: int
) -> None:
    """PLATFORM.md gives a group list's answer as ``{groups, has_more}``: ``has_more`` is believed when it
    comes, so a platform that pages by fewer than the 30 asked for loses no group; a platform that answered
    the same page whatever the ``offset`` is not asked again and again, each time a read against the pace."""
    client = GroupListClient(count, **variant)
    listed = [g["id"] for g in client.my_groups(SESSION)]
    expected = client.groups if client.heeds_offset else client.groups[:30]
    assert listed == [g["id"] for g in expected]
    assert client.reads == reads


def test_a_comments_cursor_that_does_not_move_on_ends_the_walk() -> None:
    """A ``last`` at or before the page's own ``created-gt`` (or a platform that disregarded it and
    answered the same page) would ask for that page for ever: the last comment's time is the cursor when
    it moves on, and the walk ends when neither does."""
    data, tree = comments_answer(COMMENTS_PAGE, last=1731068076900000, meta={"has_more": True})
    assert _next_page(data, tree, POST, after=1731068076800000) == 1731068076900000
    assert _next_page(data, tree, POST, after=1731068076900000) is None  # the same page again
    data, tree = comments_answer(COMMENTS_PAGE, last=1731068076700000, meta={"has_more": True})
    assert _next_page(data, tree, POST, after=1731068076800000) == 1731068076900000  # its last comment's time


class PostTreeClient(PlatformClient):
    """Answers a post's comments route with a tree rooted at ``root``, deletes whatever it is asked to, and
    fails the page-data read that marks a post read when ``mark_fails``."""

    def __init__(self, root: dict[str, Any], *, mark_fails: bool = False) -> None:
        super().__init__(PageRunner(BASE, "https://api2.example-community.com", timeout=5), pool=None, timeout=5)  # type: ignore[arg-type]
        self.root, self.mark_fails = root, mark_fails
        self.sent: list[Req] = []

    def group_ref(self, session: PlatformSession, group: str) -> GroupRef:
        return GroupRef(id="g" * 32, slug="quiet-garden")

    def call(self, session: PlatformSession, reqs: Sequence[Req], *, read: bool = True) -> list[Resp]:
        self.sent.extend(reqs)
        if self.mark_fails and any(r.data_path for r in reqs):
            raise PlatformUnavailable("the platform could not be reached")
        tree = {"post_tree": {"post": self.root, "children": [comment_node("c" * 32, "2024-11-08T12:14:36.9Z")]}}
        return [Resp(200, "application/json", json.dumps(tree if "/comments" in r.url else {})) for r in reqs]


@pytest.mark.parametrize(
    "root",
    [
        comment_node(POST, "2024-11-08T12:14:36.9Z")["post"],  # the route answered a comment's own tree
        feed_post("d" * 32, "another-post", pinned=0),  # or another post's
    ],
    ids=["rooted-at-a-comment", "rooted-at-another-post"],
)
def test_a_tree_that_is_not_the_post_asked_for_is_not_found_and_nothing_is_deleted(root: dict[str, Any]) -> None:
    """The comments route is how the gateway tells a post from a comment before ``DELETE posts/{id}``, which
    deletes either: an answer whose root is a comment, or is not the post asked for, means no such post,
    and the deletion is never sent."""
    client = PostTreeClient(root)
    posts = PlatformPosts(client, BASE)
    with pytest.raises(NotFound, match=f"post {POST} not found"):
        posts.post_detail(SESSION, POST, None)
    with pytest.raises(NotFound, match=f"post {POST} not found"):
        posts.delete_post(SESSION, POST)
    assert [r.method for r in client.sent] == ["GET", "GET"]


def test_comments_are_asked_for_25_at_a_time_with_the_pinned_one() -> None:
    """Every client asks the comments route for ``limit=25``; 50 and 100 are refused ("invalid limit",
    PLATFORM.md): the gateway asks for 25, never more, and for the pinned comment on the first page."""
    client = PostTreeClient(feed_post(POST, "seed-swap", pinned=0))
    PlatformPosts(client, BASE).post_detail(SESSION, POST, "quiet-garden")
    asked = [parse_qs(urlsplit(r.url).query) for r in client.sent if "/comments" in r.url]
    assert asked == [{"limit": ["25"], "group-id": ["g" * 32], "pinned": ["true"]}]


def test_a_post_whose_read_mark_fails_is_still_answered() -> None:
    """Opening the post's page marks it read on the site (sent after the last comments page): when that
    one request fails, the post and its comments were read all the same and are answered."""
    root = feed_post(POST, "seed-swap", pinned=0)
    client = PostTreeClient(root, mark_fails=True)
    detail = PlatformPosts(client, BASE).post_detail(SESSION, POST, "quiet-garden")
    assert detail.post.id == POST and [c.id for c in detail.comments] == ["c" * 32]
    assert any(r.data_path and "seed-swap" in r.data_path for r in client.sent)  # the mark was asked for
