"""Records to the platform's JSON shapes.

Two conventions, as on the real site: page data (``__NEXT_DATA__`` and ``/_next/data``) is camelCase
(``createdAt``, ``metadata.hasNewComments``, ``displayName``); the api2 host is snake_case throughout,
metadata keys included (``created_at``, ``metadata.display_name``, ``metadata.num_unread``). A root post has
``rootId`` equal to its own id and no ``parentId`` (empty fields are left out, as the platform's Go backend
does); a comment has both.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from scripts.sandbox.model import Channel, Group, Message, Post, User, World, iso

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")

# Where the sources disagree (PLATFORM.md): a top-level comment's parent is the post's id, or "" — here ""
# in this group, the post's id everywhere else.
EMPTY_TOP_LEVEL_PARENT_GROUP = "quiet-garden"
# PLATFORM.md describes a channel's other member as ``user: {first_name, last_name, …}`` beside ``user_ids``:
# its id and handle are not promised. The channels this member sees carry only what is promised (and the
# picture); everyone else's carry the member's id and handle too. A chat request, answered ``{channel: {id,
# …}}``, answers this member the channel's id alone (``chat_request_channel``).
LEAN_CHANNEL_USER_VIEWER = "carol"


def snake(obj: Any) -> Any:
    """Deep-convert camelCase keys to snake_case (the api2 convention)."""
    if isinstance(obj, dict):
        return {_CAMEL.sub("_", k).lower(): snake(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [snake(v) for v in obj]
    return obj


def public_user(user: User) -> dict[str, Any]:
    return {
        "id": user.id,
        "name": user.handle,
        "firstName": user.first_name,
        "lastName": user.last_name,
        "metadata": {"pictureProfile": user.picture, "spData": _sp_data(user.points, user.level)},
    }


@lru_cache(maxsize=1024)
def _sp_data(points: int, level: int) -> str:
    return json.dumps({"pts": points, "lv": level})


def self_user(world: World, user: User) -> dict[str, Any]:
    """The signed-in user with the private fields a client must never pass on (PLATFORM.md: payment
    details, third-party API keys, ``metadata.unreadChats``)."""
    public = public_user(user)
    unread = sum(1 for cid in world.user_channels.get(user.id, []) if world.channels[cid].num_unread(user.id))
    public["metadata"] = {**public["metadata"], "unreadChats": unread}
    return {**public, "email": user.email, **user.private}


def post(world: World, p: Post, viewer: User | None, with_user: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": p.id,
        "name": p.name,
        "postType": p.post_type,
        "groupId": p.group_id,
        "userId": p.user_id,
        "rootId": p.root_id,
        "labelId": p.label_id,
        "createdAt": iso(p.created_us),
        "updatedAt": iso(p.updated_us),
    }
    if p.parent_id:
        top_level = p.parent_id == p.root_id
        out["parentId"] = (
            "" if top_level and world.groups[p.group_id].slug == EMPTY_TOP_LEVEL_PARENT_GROUP else p.parent_id
        )
    if p.is_root:
        read_at = world.reads.get(viewer.id, {}).get(p.id) if viewer else None
        out["metadata"] = {
            "title": p.title,
            "content": p.content,
            "comments": p.num_comments,
            "upvotes": p.upvotes,
            "labels": p.label_id,
            "pinned": 1 if p.pinned else 0,
            "hasNewComments": 1 if read_at is not None and p.last_comment_us > read_at else 0,
            # Integer nanoseconds, 19 digits: above 2**53, so a JavaScript JSON.parse would round it.
            "lastComment": p.last_comment_us * 1000,
            "lastCommentId": p.last_comment_id,
            "imagePreview": p.image_preview,
            "attachments": "",
            # JSON held in a string (PLATFORM.md): nobody here adds videos; the contributors are not listed.
            "videoLinksData": "[]",
            "contributors": "[]",
            "myVote": 0,  # the viewer's vote: nobody votes here
        }
    else:
        out["metadata"] = {"content": p.content, "upvotes": p.upvotes, "attachments": ""}
    if with_user:
        out["user"] = public_user(world.users[p.user_id])
    return out


def tree(world: World, p: Post, viewer: User | None) -> dict[str, Any]:
    """``{post, children}`` with every live comment and reply, oldest first."""
    kids = [world.posts[c] for c in p.children]
    return {
        "post": post(world, p, viewer),
        "children": [tree(world, k, viewer) for k in sorted(kids, key=lambda k: k.created_us) if not k.deleted],
    }


def label_counts(world: World, group: Group) -> dict[str, int]:
    return dict(world.memo(("label-counts", group.id), lambda: _label_counts(world, group)))


def _label_counts(world: World, group: Group) -> dict[str, int]:
    counts = {lb.id: 0 for lb in group.labels}
    for pid in world.group_posts.get(group.id, []):
        p = world.posts[pid]
        if not p.deleted and p.label_id in counts:
            counts[p.label_id] += 1
    return counts


def live_posts(world: World, group: Group) -> int:
    """How many root posts of the group are not deleted (memoised until the posts change)."""
    return world.memo(
        ("live-posts", group.id),
        lambda: sum(1 for pid in world.group_posts.get(group.id, []) if not world.posts[pid].deleted),
    )


def labels(world: World, group: Group) -> list[dict[str, Any]]:
    counts = label_counts(world, group)
    return [
        {"id": lb.id, "groupId": group.id, "metadata": {"displayName": lb.display_name, "posts": counts[lb.id]}}
        for lb in group.labels
    ]


def group(world: World, g: Group, with_labels: bool = False) -> dict[str, Any]:
    """``name`` is the slug; metadata: displayName, description, totalMembers, totalPosts, privacy."""
    live = live_posts(world, g)
    out: dict[str, Any] = {
        "id": g.id,
        "name": g.slug,
        "createdAt": iso(g.created_us),
        "metadata": {
            "displayName": g.display_name,
            "description": g.description,
            "totalMembers": len(g.members),
            "totalPosts": live,
            "privacy": "private",
        },
    }
    if with_labels:
        out["labels"] = labels(world, g)
    return out


def api2_group(world: World, g: Group, viewer: User) -> dict[str, Any]:
    """A group as api2 answers it: snake_case, and two metadata fields that hold JSON in a string, named as
    the site names them (PLATFORM.md, "Groups"): ``member`` (the viewer's membership) and ``currentMBp``."""
    out = snake(group(world, g))
    out["metadata"]["member"] = json.dumps({"role": "member", "userId": viewer.id})
    out["metadata"]["currentMBp"] = "{}"
    return out


def message(m: Message) -> dict[str, Any]:
    return {
        "id": m.id,
        "channel_id": m.channel_id,
        "created_at": iso(m.created_us),
        "updated_at": iso(m.created_us),
        # PLATFORM.md names ``attachments_data`` beside ``attachments`` without its shape: here the list's own
        # data, which stays empty as nobody sends a file to the stand-in.
        "metadata": {
            "content": m.content,
            "src": m.src,
            "dst": m.dst,
            "attachments": m.attachments,
            "attachments_data": [],
        },
    }


def channel(world: World, c: Channel, viewer: User) -> dict[str, Any]:
    other = world.users[c.other(viewer.id)]
    member: dict[str, Any] = {
        "first_name": other.first_name,
        "last_name": other.last_name,
        "metadata": {"picture_profile": other.picture},
    }
    if viewer.handle != LEAN_CHANNEL_USER_VIEWER:
        member = {"id": other.id, "name": other.handle} | member
    return {
        "id": c.id,
        "user": member,
        "user_ids": list(c.user_ids),
        "metadata": {"num_unread": c.num_unread(viewer.id)},
        "last_message": message(c.messages[-1]) if c.messages else None,
        "created_at": iso(c.created_us),
        "updated_at": iso(c.updated_us),
    }


def chat_request_channel(world: World, c: Channel, viewer: User) -> dict[str, Any]:
    """A chat request's channel: PLATFORM.md promises ``{channel: {id, …}}``, so the lean viewer gets its id
    alone, everyone else the channel as the inbox shows it."""
    if viewer.handle == LEAN_CHANNEL_USER_VIEWER:
        return {"id": c.id}
    return channel(world, c, viewer)
