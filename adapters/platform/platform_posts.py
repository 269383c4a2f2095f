"""Posts and comments through the platform's comments route and ``POST``/``DELETE api2 /posts`` (PLATFORM.md,
"Posts and comments").

Quirks handled here:
- comments come as a snake_case tree from ``posts/{id}/comments``, 25 top-level comments a call (50 and 100
  are refused), walked with the ``created-gt`` cursor (microseconds); the first page asks for the pinned
  comment too; a reply's ``parent_id`` equal to the post (or ``""``) means top level;
- that route may need the group (``group-id``). When the caller names none: the group the gateway saw the
  post in (feeds, details), else the route is asked without it, and if the platform refuses that (400,
  404, or 401 "action not permitted": what it answers without a group is not known) every group of the
  account is asked at once and the one that answers is the post's group. With a group, any of those
  refusals means the post is not in that group (``NotFound``), however the platform words it;
- ``DELETE posts/{id}`` deletes posts and comments alike, so the kind is checked first with the comments
  route, which answers a post's tree and refuses (404) a comment id; an id already seen as a comment (in a
  post's tree, or made here) is known to be no post: it is deleted without that look, and asked for as a
  post it is a 404 without a read;
- reading a post marks it read on the real site only when its page is opened, so ``post_detail`` also
  loads the post's page data (``/_next/data/…/{group}/{post}.json``), as the site's reader does; the
  ``unread`` feed then behaves as on the site.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from adapters.platform import platform_mapping as m
from adapters.platform.page_fetch import Req
from adapters.platform.platform_answers import Resp, checked_json
from adapters.platform.platform_client import PlatformClient
from adapters.platform.platform_created import created_comment, created_post
from community_api.errors import InvalidRequest, NotFound, ServiceError, before_the_write
from community_api.model import Comment, PlatformSession, Post, PostDetail

log = logging.getLogger(__name__)

COMMENTS_PAGE = 25  # what every client asks for; 50 and 100 are refused ("invalid limit"; PLATFORM.md)


class PlatformPosts:
    def __init__(self, client: PlatformClient, platform_url: str) -> None:
        self._client = client
        self.platform_url = platform_url

    def _comments_req(self, post_id: str, group_id: str | None, limit: int, after: int | None = None) -> Req:
        """A page of a post's comments: the first asks for the pinned comment too (``pinned=true``, as
        PLATFORM.md's clients do: it may come apart from the pages), later ones start after ``after``."""
        query: dict[str, object] = {"limit": limit}
        if group_id:
            query["group-id"] = group_id
        if after is None:
            query["pinned"] = "true"
        else:
            query["created-gt"] = after
        return Req("GET", self._client.api("posts", post_id, "comments", query=query))

    def _post_tree(
        self, session: PlatformSession, post_id: str, group: str | None, limit: int = COMMENTS_PAGE
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The first page of a post's tree, and the whole answer it came in (its paging fields); ``NotFound``
        for an unknown post or a comment id."""
        if self._client.comment_posts.get(post_id) is not None:
            raise NotFound(f"post {post_id} not found")  # seen as a comment: no post, and no read to say so
        group_id = self._client.group_ref(session, group).id if group else self._client.post_groups.get(post_id)
        resp = self._client.call(session, [self._comments_req(post_id, group_id, limit)])[0]
        if _refused_for_the_group(resp):
            found = None if group_id is not None else self._ask_every_group(session, post_id, limit)
            if found is None:  # in no group of the account, or not in the one asked (however it says so)
                raise NotFound(f"post {post_id} not found")
            resp = found
        data = m.obj(checked_json(resp, f"post {post_id}"), "comments")
        tree = m.obj(data.get("post_tree", data.get("postTree")), "post_tree")
        root = m.obj(tree.get("post"), "post")
        if m.is_comment(root) or m.text(root, "id") != post_id:
            raise NotFound(f"post {post_id} not found")
        self._client.post_groups.put(post_id, m.text(root, "groupId", "group_id"))
        return tree, data

    def _ask_every_group(self, session: PlatformSession, post_id: str, limit: int) -> Resp | None:
        groups = [m.text(g, "id") for g in self._client.my_groups(session)]
        resps = self._client.call(session, [self._comments_req(post_id, g, limit) for g in groups])
        return next((r for r in resps if r.status == 200), None)

    def post_detail(self, session: PlatformSession, post_id: str, group: str | None) -> PostDetail:
        tree, data = self._post_tree(session, post_id, group)
        root = tree["post"]
        slug = self._client.group_ref(session, m.text(root, "groupId", "group_id")).slug
        post = m.post(root, self.platform_url, slug)
        tops = m.items(tree.get("children"), "children")
        pinned = m.pinned_trees(data)
        # Opening the post's page is what marks it read on the site; sent along with the next call.
        name = m.text(root, "name", default="")
        pending = [Req.data([slug, name], {"group": slug, "post": name})] if name else []
        cursor = _next_page(data, tree, post_id)
        while cursor is not None:
            resps = self._client.call(
                session, [self._comments_req(post_id, post.group_id, COMMENTS_PAGE, cursor), *pending]
            )
            pending = []
            data = m.obj(checked_json(resps[0], f"post {post_id}"), "comments")
            page = m.obj(data.get("post_tree", data.get("postTree")), "post_tree")
            tops += m.items(page.get("children"), "children")
            cursor = _next_page(data, page, post_id, after=cursor)
        if pending:
            try:
                self._client.call(session, pending)
            except ServiceError as error:  # the post was read; failing to mark it so is not the client's
                log.info("marking post read failed: %s", error.code)
        comments = tuple(m.flat_comments(tops, pinned, post_id))
        self._client.comment_posts.put_many((c.id, post_id) for c in comments)
        return PostDetail(post=post, comments=comments)

    def create_post(self, session: PlatformSession, group: str, title: str, content: str, label_id: str | None) -> Post:
        with before_the_write():
            ref = self._client.group_ref(session, group)
        body = {
            "post_type": "generic",
            "group_id": ref.id,
            "metadata": {
                "title": title,
                "content": content,
                "labels": label_id or "",
                "attachments": "",
                "action": 0,
                "video_ids": "",
            },
        }
        req = Req("POST", self._client.api("posts", query={"follow": "true"}), body=body)

        def read_answer(data: object) -> Post:  # ``{id, name, …}``, no author
            return created_post(
                data,
                platform_url=self.platform_url,
                slug=ref.slug,
                group_id=ref.id,
                title=title,
                content=content,
                label_id=label_id,
                now=datetime.now(UTC),
            )

        post = self._client.write(session, req, f"group {group}", read_answer)
        self._client.post_groups.put(post.id, post.group_id)
        return post

    def delete_post(self, session: PlatformSession, post_id: str) -> None:
        self._post_tree(session, post_id, None, limit=1)  # NotFound for a comment id
        # Its group is kept: asked for again, the post is then one request that says it is gone (a post never
        # moves, and an id is never reused), not a look through every group first.
        self._client.act(session, Req("DELETE", self._client.api("posts", post_id)), f"post {post_id}")

    def create_comment(
        self,
        session: PlatformSession,
        post_id: str,
        content: str,
        parent_id: str | None,
        group: str | None,
    ) -> Comment:
        if parent_id is not None and self._client.comment_posts.get(parent_id) not in (None, post_id):
            # Seen as a comment of another post: refused here, before any read, not left to the platform
            # (which may or may not check it) to file the reply under a thread of another post.
            raise InvalidRequest("invalid parent: not a comment of this post", field="parentId")
        # Checked first: the platform refuses a comment id or a post of another group (a 400 or a 404),
        # which to our clients is an unknown post; this also finds the group the body needs.
        with before_the_write():
            tree, _ = self._post_tree(session, post_id, group, limit=1)
            me = self._client.me(session)
        body = {
            "post_type": "comment",
            "group_id": m.text(tree["post"], "groupId", "group_id"),
            "root_id": post_id,
            "parent_id": parent_id or post_id,
            "metadata": {"content": content, "attachments": "", "action": 0, "video_ids": ""},
        }
        req = Req("POST", self._client.api("posts", query={"follow": "true"}), body=body)
        # The answer carries no author; it is the signed-in user.
        try:
            comment = self._client.write(
                session,
                req,
                f"post {post_id}",
                lambda data: created_comment(
                    data, post_id=post_id, parent_id=parent_id, content=content, author=me, now=datetime.now(UTC)
                ),
            )
        except InvalidRequest as refused:
            # The platform's 400 for a parent it does not take ("invalid parent") names no field; the client
            # sent one parentId, so the error names it, as when the gateway refuses the parent itself.
            if parent_id is None or "parent" not in refused.message.lower() or "field" in refused.details:
                raise
            raise InvalidRequest(refused.message, **refused.details, field="parentId") from refused
        self._client.comment_posts.put(comment.id, post_id)
        return comment

    def delete_comment(self, session: PlatformSession, comment_id: str) -> None:
        # The DELETE takes posts too: an id not known as a comment is first made sure to be no post.
        if self._client.comment_posts.get(comment_id) is None:
            try:
                self._post_tree(session, comment_id, None, limit=1)
            except NotFound:
                pass  # not a post: a comment, or nothing (the DELETE says which)
            else:
                raise NotFound(f"comment {comment_id} not found")
        # A known comment stays known once deleted: deleting it again is the DELETE alone, which says it is gone.
        self._client.act(session, Req("DELETE", self._client.api("posts", comment_id)), f"comment {comment_id}")


def _refused_for_the_group(resp: Resp) -> bool:
    """Whether the comments route refused the post for its ``group-id``, or for want of one, as far as we
    can tell. Every client sends one (PLATFORM.md), and what the platform answers without one, or with a
    group the post is not in, is not known: a 400, a 404, or the 401 that means "not a member of that
    group" may each be that refusal, as is any other 401 once ``self`` has shown the session alive
    (``PlatformClient.call``). Without a group the post is then looked for in every group (which also
    keeps ``delete_comment`` from taking a post for a comment); with one, it is not in that group.
    A 401 of a dead session (raised before this is asked), a 429 or a 5xx are not."""
    return resp.status in (400, 404) or resp.not_a_member or (resp.status == 401 and resp.session_alive)


def _next_page(data: dict[str, Any], tree: dict[str, Any], post_id: str, after: int | None = None) -> int | None:
    """The ``created-gt`` of the next page of top-level comments, or None at the end. The platform's own
    ``meta.has_more`` and ``last`` (microseconds) when it sends them; else a full page means "ask again",
    from the last comment's time. ``after`` is the page's own ``created-gt`` (None: the first page): a
    cursor that would not move past it ends the walk, since asking again would bring the same page back
    for ever (a platform that disregarded ``created-gt``, or a ``last`` that does not move on), each
    time one more read against the pace."""
    children = m.items(tree.get("children"), "children")
    meta = data.get("meta")
    more = meta.get("has_more") if isinstance(meta, dict) else None
    if not isinstance(more, bool | int):
        more = len(children) >= COMMENTS_PAGE
    if not more or not children:
        return None
    last = data.get("last")
    candidates = [last] if isinstance(last, int) and not isinstance(last, bool) and last > 0 else []
    candidates.append(m.micros(m.comment(children[-1].get("post"), post_id).created_at))
    return next((cursor for cursor in candidates if after is None or cursor > after), None)
