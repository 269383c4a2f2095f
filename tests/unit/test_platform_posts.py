"""``PlatformPosts`` against a small platform that keeps its posts and comments and answers the comments route
as PLATFORM.md describes it (25 top-level comments a page, the ``created-gt`` cursor, ``group-id``): what
each call sends, and how few reads it takes. Every read counts against the account's pace, so a look that
is not needed is a defect a user pays for; a write sent twice, or to the wrong thing, is worse."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from adapters.platform import platform_mapping as m
from adapters.platform.page_fetch import PageRunner, Req
from adapters.platform.platform_answers import Resp
from adapters.platform.platform_client import PlatformClient
from adapters.platform.platform_posts import PlatformPosts
from community_api.errors import InvalidRequest, NotFound
from community_api.model import PlatformSession

WWW, API = "https://www.example-community.com", "https://api2.example-community.com"
JSON = "application/json"
SESSION = PlatformSession(connection_id="con_1", token="t")
ALICE = "a" * 32
QUIET, LOUD = "1" * 32, "2" * 32  # the account's two groups: quiet-garden, loud-garden
POST, OTHER_POST = "b" * 32, "d" * 32
T0 = datetime(2024, 11, 8, 12, 0, tzinfo=UTC).timestamp()


def micros(n: int) -> int:
    return int(T0 * 1_000_000) + n * 1_000_000


def iso(us: int) -> str:
    return datetime.fromtimestamp(us / 1_000_000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def comment_id(post: str, n: int) -> str:
    return f"{post[:8]}{n:024x}"


class CommentsPlatform(PlatformClient):
    """The platform's posts and comments routes over a little world: ``POST`` in quiet-garden and
    ``OTHER_POST`` in loud-garden, each with ``comments`` top-level comments a second apart.

    ``without_group``: the status the comments route answers when asked without ``group-id`` (what the real
    one answers is not known; PLATFORM.md); ``wrong_group``: its answer for a group the post is not in.
    ``tree_key``: the answer's name for the tree. ``ignore_cursor``: answer the first page whatever
    ``created-gt`` says, and say there is more."""

    def __init__(
        self,
        *,
        comments: int = 3,
        without_group: int = 404,
        wrong_group: int = 404,
        tree_key: str = "post_tree",
        ignore_cursor: bool = False,
    ) -> None:
        super().__init__(PageRunner(WWW, API, timeout=5), pool=None, timeout=5)  # type: ignore[arg-type]
        self.without_group, self.wrong_group = without_group, wrong_group
        self.tree_key, self.ignore_cursor = tree_key, ignore_cursor
        self.groups = {POST: QUIET, OTHER_POST: LOUD}
        self.comments: dict[str, list[dict[str, Any]]] = {
            post: [self._comment(post, comment_id(post, n), "", micros(n)) for n in range(comments)]
            for post in self.groups
        }
        self.deleted: list[str] = []
        self.refuse_writes: str | None = None  # the platform's message when it refuses every new post or comment
        self.created: list[dict[str, Any]] = []
        self.sent: list[Req] = []

    @staticmethod
    def _comment(post: str, cid: str, parent: str, created_us: int) -> dict[str, Any]:
        return {
            "id": cid,
            "post_type": "comment",
            "root_id": post,
            "parent_id": parent or post,
            "user_id": ALICE,
            "created_at": iso(created_us),
            "metadata": {"content": f"comment {cid}", "upvotes": 0},
        }

    def comments_asked(self) -> list[dict[str, list[str]]]:
        return [
            parse_qs(urlsplit(r.url).query) for r in self.sent if r.url.endswith("/comments") or "/comments?" in r.url
        ]

    def _send(self, session: PlatformSession, reqs: Sequence[Req], *, read: bool) -> list[Resp]:
        self.sent.extend(reqs)
        if len(self.sent) > 100:
            raise AssertionError("the gateway does not stop asking")
        return [self._answer(req) for req in reqs]

    def _answer(self, req: Req) -> Resp:
        if req.data_path is not None:
            return Resp(200, JSON, "{}")
        parts = urlsplit(req.url)
        path, query = parts.path, {k: v[0] for k, v in parse_qs(parts.query).items()}
        if path == "/self":
            return ok({"id": ALICE, "name": "alice", "first_name": "Alice", "last_name": "Andersen"})
        if path == f"/users/{ALICE}/groups":
            groups = [{"id": QUIET, "name": "quiet-garden"}, {"id": LOUD, "name": "loud-garden"}]
            return ok({"groups": groups, "has_more": False})
        if req.method == "GET" and (found := re.fullmatch(r"/posts/(\w+)/comments", path)):
            return self._comments(found[1], query)
        if req.method == "DELETE" and (found := re.fullmatch(r"/posts/(\w+)", path)):
            return self._delete(found[1])
        if req.method == "POST" and path == "/posts":
            return self._create(req.body)
        return Resp(404, JSON, '{"message": "not found"}')

    def _comments(self, post: str, query: dict[str, str]) -> Resp:
        if post not in self.groups:
            return Resp(404, JSON, '{"message": "not found"}')
        if "group-id" not in query:
            return Resp(self.without_group, JSON, '{"message": "action not permitted"}')
        if query["group-id"] != self.groups[post]:
            return Resp(self.wrong_group, JSON, '{"message": "invalid group"}')
        after = 0 if self.ignore_cursor else int(query.get("created-gt", "0"))
        newer = [c for c in self.comments[post] if to_micros(c["created_at"]) > after]
        page = newer[: int(query["limit"])]
        root = {
            "id": post,
            "name": "seed-swap",
            "post_type": "generic",
            "root_id": post,
            "group_id": self.groups[post],
            "user_id": ALICE,
            "created_at": iso(micros(-60)),
            "updated_at": iso(micros(-60)),
            "metadata": {"title": "Seed swap", "content": "Bring seeds", "comments": len(self.comments[post])},
        }
        answer: dict[str, Any] = {
            self.tree_key: {"post": root, "children": [{"post": c, "children": []} for c in page]},
            "meta": {"has_more": self.ignore_cursor or len(newer) > len(page)},
        }
        if page:
            answer["last"] = to_micros(page[-1]["created_at"])
        return ok(answer)

    def _create(self, body: dict[str, Any]) -> Resp:
        if self.refuse_writes is not None:
            return Resp(400, JSON, json.dumps({"message": self.refuse_writes}))
        self.created.append(body)
        if body["post_type"] == "generic":
            made = f"{len(self.created):032x}"
            self.groups[made], self.comments[made] = body["group_id"], []
            return ok({"id": made, "name": "made-here"})  # no author, as the platform answers
        post, parent = body["root_id"], body["parent_id"]
        if parent != post and parent not in {c["id"] for c in self.comments[post]}:
            return Resp(400, JSON, '{"message": "invalid parent"}')
        record = self._comment(post, comment_id(post, 900 + len(self.created)), parent, micros(900))
        self.comments[post].append(record)
        return ok(record)

    def _delete(self, target: str) -> Resp:
        if self.groups.pop(target, None) is None:
            found = [(post, c) for post, cs in self.comments.items() for c in cs if c["id"] == target]
            if not found:
                return Resp(404, JSON, '{"message": "not found"}')
            self.comments[found[0][0]].remove(found[0][1])
        self.deleted.append(target)
        return ok({})


def ok(data: object) -> Resp:
    return Resp(200, JSON, json.dumps(data))


def to_micros(stamp: str) -> int:
    return m.micros(datetime.fromisoformat(stamp))


def test_an_id_seen_as_a_comment_is_no_post_without_asking_the_platform() -> None:
    platform = CommentsPlatform()
    posts = PlatformPosts(platform, WWW)
    posts.post_detail(SESSION, POST, "quiet-garden")
    before = len(platform.sent)
    for ask in (
        lambda: posts.post_detail(SESSION, comment_id(POST, 1), None),
        lambda: posts.delete_post(SESSION, comment_id(POST, 1)),
    ):
        with pytest.raises(NotFound, match="not found"):
            ask()
    assert len(platform.sent) == before and platform.deleted == []


@pytest.mark.parametrize("without_group", [400, 404, 401])
def test_a_post_found_in_one_group_is_asked_for_there_from_then_on(without_group: int) -> None:
    """Asked without a group, the platform's refusal sends the gateway through every group of the account;
    the group that answered is remembered, so the next read of the post is one request, with its group."""
    platform = CommentsPlatform(without_group=without_group)
    posts = PlatformPosts(platform, WWW)
    assert posts.post_detail(SESSION, POST, None).post.id == POST
    assert len(platform.comments_asked()) == 3  # without a group, then each of the two groups at once
    platform.sent.clear()
    assert posts.post_detail(SESSION, POST, None).post.id == POST
    assert platform.comments_asked() == [{"limit": ["25"], "group-id": [QUIET], "pinned": ["true"]}]


@pytest.mark.parametrize("wrong_group", [400, 403, 404, 401])
def test_every_group_is_asked_and_the_one_that_answers_is_the_posts(wrong_group: int) -> None:
    """The other groups refuse in whatever way (400, 403, 404, or the 401 "action not permitted"): only the
    answer that holds the post is taken, whichever place its group has in the account's list."""
    platform = CommentsPlatform(wrong_group=wrong_group)
    detail = PlatformPosts(platform, WWW).post_detail(SESSION, OTHER_POST, None)  # in loud-garden, listed second
    assert detail.post.id == OTHER_POST and detail.post.group_id == LOUD


@pytest.mark.parametrize("wrong_group", [400, 404, 401])
def test_a_post_not_in_the_group_the_caller_named_is_not_found_there(wrong_group: int) -> None:
    """The caller said where to look: however the platform words "not in this group" (PLATFORM.md does not
    say), the post is not found there — never the platform's 400 passed on as the caller's bad request — and
    it is not looked for elsewhere, nor is a comment sent."""
    platform = CommentsPlatform(wrong_group=wrong_group)
    posts = PlatformPosts(platform, WWW)
    with pytest.raises(NotFound, match=f"post {POST} not found"):
        posts.post_detail(SESSION, POST, "loud-garden")
    with pytest.raises(NotFound, match=f"post {POST} not found"):
        posts.create_comment(SESSION, POST, "hello", None, "loud-garden")
    assert [q["group-id"] for q in platform.comments_asked()] == [[LOUD], [LOUD]]
    assert platform.created == []


@pytest.mark.parametrize("tree_key", ["post_tree", "postTree"])
def test_the_tree_is_read_under_either_name_on_every_page(tree_key: str) -> None:
    """api2 writes ``post_tree``, the post's page data ``postTree`` (PLATFORM.md): either is read, on the
    first page and on every later one."""
    platform = CommentsPlatform(comments=30, tree_key=tree_key)
    detail = PlatformPosts(platform, WWW).post_detail(SESSION, POST, "quiet-garden")
    assert [c.id for c in detail.comments] == [comment_id(POST, n) for n in range(30)]


def test_a_long_thread_is_read_page_by_page_and_the_post_marked_read_once() -> None:
    platform = CommentsPlatform(comments=60)
    detail = PlatformPosts(platform, WWW).post_detail(SESSION, POST, "quiet-garden")
    assert [c.id for c in detail.comments] == [comment_id(POST, n) for n in range(60)]
    cursors = [q.get("created-gt") for q in platform.comments_asked()]
    assert cursors == [None, [str(micros(24))], [str(micros(49))]]
    assert len([r for r in platform.sent if r.data_path is not None]) == 1  # the page that marks it read


def test_a_platform_that_disregards_the_cursor_does_not_keep_the_gateway_asking() -> None:
    """The same full page, "has more" every time: the second answer brings nothing new and the walk ends,
    rather than asking for the same page until the account's pace runs out."""
    platform = CommentsPlatform(comments=30, ignore_cursor=True)
    detail = PlatformPosts(platform, WWW).post_detail(SESSION, POST, "quiet-garden")
    assert [c.id for c in detail.comments] == [comment_id(POST, n) for n in range(25)]
    assert len(platform.comments_asked()) == 2


def test_a_new_post_is_sent_as_the_site_sends_it_and_read_back_in_one_request() -> None:
    """PLATFORM.md's body, ``labels`` "" for none (never null); its group is known from then on."""
    platform = CommentsPlatform()
    posts = PlatformPosts(platform, WWW)
    made = posts.create_post(SESSION, "quiet-garden", "Seed swap", "Bring seeds", None)
    write = next(r for r in platform.sent if r.method == "POST")
    assert parse_qs(urlsplit(write.url).query) == {"follow": ["true"]}
    assert platform.created == [
        {
            "post_type": "generic",
            "group_id": QUIET,
            "metadata": {
                "title": "Seed swap",
                "content": "Bring seeds",
                "labels": "",
                "attachments": "",
                "action": 0,
                "video_ids": "",
            },
        }
    ]
    platform.sent.clear()
    assert posts.post_detail(SESSION, made.id, None).post.id == made.id
    assert [q["group-id"] for q in platform.comments_asked()] == [[QUIET]]


def test_a_comment_and_a_reply_are_sent_as_the_site_sends_them_and_deleted_with_the_delete_alone() -> None:
    platform = CommentsPlatform()
    posts = PlatformPosts(platform, WWW)
    top = posts.create_comment(SESSION, POST, "first", None, "quiet-garden")
    reply = posts.create_comment(SESSION, POST, "second", top.id, "quiet-garden")
    assert (top.parent_id, reply.parent_id) == (None, top.id)
    metadata = {"attachments": "", "action": 0, "video_ids": ""}
    assert platform.created == [
        {
            "post_type": "comment",
            "group_id": QUIET,
            "root_id": POST,
            "parent_id": POST,
            "metadata": {"content": "first", **metadata},
        },
        {
            "post_type": "comment",
            "group_id": QUIET,
            "root_id": POST,
            "parent_id": top.id,
            "metadata": {"content": "second", **metadata},
        },
    ]
    platform.sent.clear()
    posts.delete_comment(SESSION, reply.id)
    assert [(r.method, urlsplit(r.url).path) for r in platform.sent] == [("DELETE", f"/posts/{reply.id}")]


def test_a_reply_under_a_comment_of_another_post_is_refused_before_anything_is_sent() -> None:
    platform = CommentsPlatform()
    posts = PlatformPosts(platform, WWW)
    elsewhere = posts.post_detail(SESSION, OTHER_POST, "loud-garden").comments[0]
    platform.sent.clear()
    with pytest.raises(InvalidRequest, match="not a comment of this post") as refused:
        posts.create_comment(SESSION, POST, "astray", elsewhere.id, "quiet-garden")
    assert refused.value.details["field"] == "parentId"
    assert platform.sent == [] and platform.created == []


@pytest.mark.parametrize(
    ("parent", "refusal", "field"),
    [
        (comment_id(POST, 77), None, "parentId"),  # a parent the platform does not know: "invalid parent"
        (comment_id(POST, 1), "Invalid parent", "parentId"),
        (None, "invalid parent", None),  # no parent was sent: the refusal is not about one the caller gave
        (comment_id(POST, 1), "content too long", None),  # a reply refused for something else
    ],
)
def test_a_refusal_names_parent_id_only_when_it_is_about_the_parent_the_caller_gave(
    parent: str | None, refusal: str | None, field: str | None
) -> None:
    platform = CommentsPlatform()
    platform.refuse_writes = refusal
    with pytest.raises(InvalidRequest) as refused:
        PlatformPosts(platform, WWW).create_comment(SESSION, POST, "hello", parent, "quiet-garden")
    assert refused.value.details.get("field") == field
    assert refused.value.message.lower() == (refusal or "invalid parent").lower()


def test_what_was_deleted_is_not_found_again_with_one_request() -> None:
    """The gateway keeps what it learnt of a deleted post's group and of a deleted comment: asking again is
    the one request that says it is gone, not a look through every group first."""
    platform = CommentsPlatform()
    posts = PlatformPosts(platform, WWW)
    gone = posts.post_detail(SESSION, POST, None).comments[0]
    posts.delete_comment(SESSION, gone.id)
    posts.delete_post(SESSION, POST)
    platform.sent.clear()
    with pytest.raises(NotFound):
        posts.post_detail(SESSION, POST, None)
    with pytest.raises(NotFound):
        posts.delete_comment(SESSION, gone.id)
    assert [(r.method, urlsplit(r.url).path) for r in platform.sent] == [
        ("GET", f"/posts/{POST}/comments"),
        ("DELETE", f"/posts/{gone.id}"),
    ]
    assert platform.deleted == [gone.id, POST]
