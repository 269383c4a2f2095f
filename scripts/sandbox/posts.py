"""Post and comment operations of api2, with the platform's refusals.

- Not a member of the group: 401 ``action not permitted`` (distinct from an expired session).
- A generic post's label (``metadata.labels``, the first id if several are comma-separated) must be one of
  the group's labels, else 400 ``cannot post to this label``; an empty label means the group's first label
  (its default "General" category).
- A comment needs ``root_id`` (a live root post) and ``parent_id`` (the root, or a live comment of it, else
  400 ``invalid parent``). Threads are two deep: a reply to a reply is attached to the top-level comment
  it belongs to (as the platform's UI does), so its ``parent_id`` is that comment.
- Only the author may delete; anyone else gets 403 ``must be admin or level 5 to do this``. Deleting a
  comment removes its replies too; deleting a post removes it from every feed.
- The create answer is the snake_case post without the author (no ``user``, no ``user_id``). PLATFORM.md
  promises no more than ``{id, name, …}``: in ``BARE_CREATE_ANSWER_GROUP`` the answer to a new post or
  comment is just ``{id, name}``, so that a reader relying on anything else is caught.
- PLATFORM.md does not say what a deletion answers: ``{}`` here, and in ``NO_CONTENT_DELETE_GROUP`` a 204
  with no body.
- A pinned comment (PLATFORM.md: ``pinned_post_tree?`` in the comments answer) comes apart from the pages
  as ``pinned_post_tree`` when the first page is asked with ``pinned=true``. The two readings of that name
  are both served: elsewhere the tree *is* the pinned comment's (``{post: comment, children: replies}``) and
  the pages leave it out; in ``PINNED_UNDER_ROOT_GROUP`` it is the post's (``{post: root, children:
  [comment's tree]}``) and the comment stays in its place in the pages too.
"""

from __future__ import annotations

import uuid
from typing import Any

from scripts.sandbox import serialize
from scripts.sandbox.model import Group, Post, User, iso
from scripts.sandbox.seed import post_name
from scripts.sandbox.state import ApiError, Sandbox

PINNED_UNDER_ROOT_GROUP = "night-owls"
BARE_CREATE_ANSWER_GROUP = "quiet-garden"
NO_CONTENT_DELETE_GROUP = "quiet-garden"


def member_group(sb: Sandbox, user: User, group_id: str) -> Group:
    group = sb.world.groups.get(group_id)
    if group is None:
        raise ApiError(404, "not found")
    if user.id not in group.members:
        raise ApiError(401, "action not permitted")
    return group


def live_post(sb: Sandbox, post_id: str) -> Post:
    p = sb.world.posts.get(post_id)
    if p is None or p.deleted:
        raise ApiError(404, "not found")
    return p


def mark_read(sb: Sandbox, user: User, post: Post) -> None:
    with sb.lock:
        sb.world.reads.setdefault(user.id, {})[post.id] = sb.now_us()
        sb.changed()  # the unread tab and hasNewComments of this viewer


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def create(sb: Sandbox, user: User, body: dict[str, Any]) -> dict[str, Any]:
    with sb.lock:
        raw_meta = body.get("metadata")
        meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        content = _text(meta.get("content"))
        now = sb.now_us()
        pid = uuid.uuid4().hex
        post_type = body.get("post_type")
        if post_type == "generic":
            group = member_group(sb, user, str(body.get("group_id") or ""))
            title = _text(meta.get("title"))
            if not title:
                raise ApiError(400, "title required")
            wanted = _text(meta.get("labels")).split(",")[0].strip()
            label = group.label(wanted) if wanted else group.labels[0]
            if label is None:
                raise ApiError(400, "cannot post to this label")
            post = Post(
                id=pid,
                name=post_name(title, pid),
                post_type="generic",
                group_id=group.id,
                user_id=user.id,
                root_id=pid,
                parent_id="",
                label_id=label.id,
                created_us=now,
                updated_us=now,
                title=title,
                content=content,
            )
        elif post_type == "comment":
            root = live_post(sb, str(body.get("root_id") or ""))
            if not root.is_root:
                raise ApiError(400, "invalid root")
            group = member_group(sb, user, root.group_id)
            if body.get("group_id") not in (None, "", group.id):
                raise ApiError(400, "invalid group")
            parent = sb.world.posts.get(str(body.get("parent_id") or ""))
            if parent is None or parent.deleted or parent.root_id != root.id:
                raise ApiError(400, "invalid parent")
            if not parent.is_root and parent.parent_id != root.id:
                parent = sb.world.posts[parent.parent_id]  # two deep at most
            if not content:
                raise ApiError(400, "content required")
            post = Post(
                id=pid,
                name=pid,
                post_type="comment",
                group_id=group.id,
                user_id=user.id,
                root_id=root.id,
                parent_id=parent.id,
                label_id=root.label_id,
                created_us=now,
                updated_us=now,
                title="",
                content=content,
            )
        else:
            raise ApiError(400, "invalid post_type")
        sb.world.add_post(post)
        if post.is_root:
            sb.world.reads.setdefault(user.id, {})[post.id] = now  # your own post is read
        sb.changed()
        sb.created.append(
            {
                "id": post.id,
                "type": post.post_type,
                "author": user.handle,
                "authorId": user.id,
                "group": group.slug,
                "groupId": group.id,
                "title": post.title,
                "content": post.content,
                "labelId": post.label_id,
                "rootId": post.root_id,
                "parentId": post.parent_id or None,
                "name": post.name,
                "createdAt": iso(post.created_us),
                "deleted": False,
            }
        )
        if group.slug == BARE_CREATE_ANSWER_GROUP:
            return {"id": post.id, "name": post.name}
        answer = serialize.snake(serialize.post(sb.world, post, user, with_user=False))
        answer.pop("user_id", None)
        return answer


def delete(sb: Sandbox, user: User, post_id: str) -> Group:
    """Delete a post or comment; the group it was in."""
    with sb.lock:
        post = live_post(sb, post_id)
        group = member_group(sb, user, post.group_id)
        if post.user_id != user.id:
            raise ApiError(403, "must be admin or level 5 to do this")
        # A post takes its whole thread with it; a comment takes its replies.
        gone, queue = [], [post]
        while queue:
            current = queue.pop()
            gone.append(current)
            queue.extend(sb.world.posts[c] for c in current.children)
        for p in gone:
            p.deleted = True
        sb.world.posts_changed()
        if not post.is_root:
            _recount(sb, sb.world.posts[post.root_id])
        sb.changed()
        ids = {p.id for p in gone}
        for rec in sb.created:
            if rec["id"] in ids:
                rec["deleted"] = True
        return group


def _recount(sb: Sandbox, root: Post) -> None:
    tops = [sb.world.posts[c] for c in root.children if not sb.world.posts[c].deleted]
    live = tops + [sb.world.posts[r] for c in tops for r in c.children if not sb.world.posts[r].deleted]
    root.num_comments = len(tops)  # top-level comments only, as the platform counts them (PLATFORM.md)
    last = max(live, key=lambda c: c.created_us, default=None)
    root.last_comment_us, root.last_comment_id = (last.created_us, last.id) if last else (0, "")


def comments(
    sb: Sandbox,
    user: User,
    post_id: str,
    group_id: str | None,
    limit: int,
    created_gt: int,
    pinned: bool = False,
    tail: bool = False,
) -> dict[str, Any]:
    """``post_tree`` of the root post and its next ``limit`` top-level comments after ``created_gt``, with
    ``last`` (the next page's ``created-gt``) and ``meta.has_more``; the first page asked with ``pinned``
    also answers the pinned comment's ``pinned_post_tree`` (the module's docstring). ``tail``: the newest
    page instead, whatever ``created_gt`` says (PLATFORM.md: ``tail=true`` jumps to it); nothing after it."""
    with sb.lock:
        root = live_post(sb, post_id)
        if not root.is_root or (group_id and group_id != root.group_id):
            raise ApiError(404, "not found")
        group = member_group(sb, user, root.group_id)
        world = sb.world
        tops = sorted((world.posts[c] for c in root.children), key=lambda c: (c.created_us, c.id))
        pin = next((c for c in tops if c.pinned and not c.deleted), None)
        under_root = group.slug == PINNED_UNDER_ROOT_GROUP
        after = 0 if tail else created_gt
        later = [c for c in tops if not c.deleted and c.created_us > after and (under_root or c is not pin)]
        page = later[-limit:] if tail else later[:limit]
        children = [serialize.tree(world, c, user) for c in page]
        tree = {"post": serialize.post(world, root, user), "children": children}
        # ``last``: the cursor of the next page (microseconds of the last comment answered), and whether
        # there is one (PLATFORM.md, "Posts and comments").
        answer: dict[str, Any] = {
            "post_tree": serialize.snake(tree),
            "last": page[-1].created_us if page else created_gt,
            "meta": {"has_more": not tail and len(later) > limit},
        }
        if pinned and created_gt == 0 and pin is not None:
            pinned_tree = serialize.tree(world, pin, user)
            if under_root:
                pinned_tree = {"post": serialize.post(world, root, user), "children": [pinned_tree]}
            answer["pinned_post_tree"] = serialize.snake(pinned_tree)
        return answer
