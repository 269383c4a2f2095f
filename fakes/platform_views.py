"""What ``FakePlatformGateway`` answers, made from its world's records: the port's model objects as the
Selenium gateway reads them off the platform (counts as the platform counts them, deleted things gone)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection

import attrs

from community_api.model import Comment, Conversation, Group, Label, Message, PlatformUser, Post
from fakes.platform_seed import CommentRec, ConversationRec, GroupRec, MessageRec, PostRec, World

BASE_URL = "https://community.sandbox.test"


def is_live(world: World, comment: CommentRec) -> bool:
    """Not deleted, nor its post, nor the comment it answers (a deleted comment's replies go with it)."""
    if comment.deleted or world.posts[comment.post_id].deleted:
        return False
    parent = world.comments.get(comment.parent_id) if comment.parent_id else None
    return parent is None or not parent.deleted


def live_comments(world: World, post_id: str) -> list[CommentRec]:
    """Top-level comments oldest first, each followed by its replies oldest first."""
    mine = [c for c in world.post_comments.get(post_id, []) if is_live(world, c)]
    mine.sort(key=lambda c: (c.created_at, c.id))
    ordered: list[CommentRec] = []
    for top in (c for c in mine if c.parent_id is None):
        ordered.append(top)
        ordered.extend(c for c in mine if c.parent_id == top.id)
    return ordered


def public_user(world: World, user_id: str) -> PlatformUser:
    user = world.users[user_id]
    return PlatformUser(id=user.id, handle=user.handle, name=user.name)


def group_view(world: World, grp: GroupRec) -> Group:
    counts = Counter(p.label_id for p in world.posts.values() if p.group_id == grp.id and not p.deleted)
    labels = tuple(Label(id=lb.id, name=lb.name, post_count=counts[lb.id]) for lb in grp.labels)
    return Group(
        id=grp.id,
        slug=grp.slug,
        name=grp.name,
        description=grp.description,
        member_count=len(grp.members),
        labels=labels,
    )


def post_view(world: World, post: PostRec) -> Post:
    slug = world.groups[post.group_id].slug
    return Post(
        id=post.id,
        group_id=post.group_id,
        title=post.title,
        content=post.content,
        label_id=post.label_id or None,  # "" is no label, as the platform writes it
        author_id=post.author_id,
        author=public_user(world, post.author_id),
        created_at=post.created_at,
        updated_at=post.created_at,
        upvotes=post.upvotes,
        # Top-level comments, as the platform counts them (PLATFORM.md): replies are not counted.
        comment_count=sum(c.parent_id is None for c in live_comments(world, post.id)),
        pinned=post.pinned,
        url=f"{BASE_URL}/{slug}/{post.id}",
    )


def comment_view(world: World, comment: CommentRec) -> Comment:
    return Comment(
        id=comment.id,
        post_id=comment.post_id,
        parent_id=comment.parent_id,
        author_id=comment.author_id,
        author=public_user(world, comment.author_id),
        content=comment.content,
        created_at=comment.created_at,
        upvotes=comment.upvotes,
        pinned=comment.pinned,
    )


def conversation_view(
    world: World, conv: ConversationRec, me: str, members_without_handle: Collection[str] = ()
) -> Conversation:
    """``me``'s view of ``conv``; when ``me``'s handle is in ``members_without_handle``, the other member
    comes without a handle (``FakePlatformGateway.members_without_handle``)."""
    last = conv.messages[-1] if conv.messages else None
    unread = sum(1 for m in conv.messages[conv.read_upto.get(me, 0) :] if m.sender_id != me)
    member = public_user(world, conv.other(me))
    if world.users[me].handle in members_without_handle:
        member = attrs.evolve(member, handle="")
    return Conversation(
        id=conv.id,
        with_=member,
        last_message=message_view(last) if last else None,
        unread_count=unread,
        awaiting_reply=False,
        updated_at=last.created_at if last else conv.created_at,
    )


def message_view(message: MessageRec) -> Message:
    return Message(
        id=message.id,
        conversation_id=message.conversation_id,
        sender_id=message.sender_id,
        content=message.content,
        created_at=message.created_at,
    )
