"""The registry of data operations: one entry per Implemented data route, from which the REST route
(``adapters/http/operation_resources.py``), the MCP tool (``adapters/mcp/server.py``) and the OpenAPI
operation (``adapters/http/openapi.py``) are all generated. Adding an operation is one entry here and one
use case in the core.

An operation is data: its name (the MCP tool's, and the OpenAPI ``operationId``), the scope it needs, what
an agent reads about it, its input schema, what it answers, its annotations, its REST method, path and
status with where each argument goes there (``Http``), and ``run``, a thin call into the core. Limits in
the schemas come from the core's constants, so the schema an agent or a REST client reads and the check
the core makes cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_types import ToolAnnotations

from adapters.operation import Http, Operation
from adapters.operation_arguments import (
    FEED_ARGS,
    GROUP,
    GROUP_HINT,
    ID,
    IDEMPOTENCY_KEY,
    POST_ID,
    SEND_ARGS,
    cursor,
)
from adapters.schemas import (
    Deleted,
    ListOf,
    arguments,
    filled_text,
    optional_text,
    text,
)
from community_api import dms, feed, groups, posts, scopes
from community_api.access import Actor
from community_api.commands import SENDABLE_PATTERN
from community_api.deps import Deps
from community_api.model import Comment, Group, PlatformUser, Post, PostDetail
from community_api.platform_ids import (
    MAX_LABEL_NAME,
    PLATFORM_ID_LENGTH,
    PLATFORM_ID_PATTERN,
)
from community_api.readable import READABLE_PATTERN


def _read(title: str) -> ToolAnnotations:
    return ToolAnnotations(title=title, read_only_hint=True, open_world_hint=True)


def _write(title: str, *, destructive: bool, idempotent: bool) -> ToolAnnotations:
    return ToolAnnotations(
        title=title,
        read_only_hint=False,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=True,
    )


_DM_PACE = (
    "DMs are throttled per connected account: about one send every 30 to 45 seconds, at most 20 an hour "
    "and 100 a day. A refused send is a tool error with code rate_limited, details.reason dm_throttle and "
    "details.retryAfter, the seconds to wait before the next send is allowed; it did not go out."
)


def _whoami(deps: Deps, actor: Actor, args: Mapping[str, Any], command: None) -> object:
    return groups.whoami(deps, actor)


def _list_groups(deps: Deps, actor: Actor, args: Mapping[str, Any], command: None) -> object:
    return {"groups": groups.list_groups(deps, actor)}


def _get_group(deps: Deps, actor: Actor, args: Mapping[str, Any], command: None) -> object:
    return groups.get_group(deps, actor, args["group"])


def _get_feed(deps: Deps, actor: Actor, args: Mapping[str, Any], query: feed.FeedQuery) -> object:
    return feed.read_feed(deps, actor, args["group"], query)


def _get_post(deps: Deps, actor: Actor, args: Mapping[str, Any], command: None) -> object:
    return posts.post_detail(deps, actor, args["postId"], args.get("group"))


def _list_comments(deps: Deps, actor: Actor, args: Mapping[str, Any], command: None) -> object:
    return {"comments": posts.list_comments(deps, actor, args["postId"], args.get("group"))}


def _create_post(deps: Deps, actor: Actor, args: Mapping[str, Any], new: posts.NewPost) -> object:
    return posts.create_post(deps, actor, args["group"], new)


def _delete_post(deps: Deps, actor: Actor, args: Mapping[str, Any], command: None) -> object:
    posts.delete_post(deps, actor, args["postId"])
    return {"deleted": True, "postId": args["postId"]}


def _create_comment(deps: Deps, actor: Actor, args: Mapping[str, Any], new: posts.NewComment) -> object:
    return posts.create_comment(deps, actor, args["postId"], args.get("group"), new)


def _delete_comment(deps: Deps, actor: Actor, args: Mapping[str, Any], command: None) -> object:
    posts.delete_comment(deps, actor, args["commentId"])
    return {"deleted": True, "commentId": args["commentId"]}


def _list_dms(deps: Deps, actor: Actor, args: Mapping[str, Any], query: dms.InboxQuery) -> object:
    return dms.inbox(deps, actor, query)


def _get_dm_thread(deps: Deps, actor: Actor, args: Mapping[str, Any], query: dms.ThreadQuery) -> object:
    return dms.thread(deps, actor, args["conversationId"], query)


def _send_dm(deps: Deps, actor: Actor, args: Mapping[str, Any], new: dms.NewMessage) -> object:
    return dms.send(deps, actor, args.get("group"), new)


OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "whoami",
        "Who am I",
        scopes.GROUPS_READ,
        "The connected community account this key acts as: {id, handle, name}. Compare id with a post's or "
        "comment's authorId to tell your own posts and comments apart.",
        arguments({}),
        PlatformUser,
        _read("Who am I"),
        _whoami,
        Http("GET", "/v1/whoami", 200),
    ),
    Operation(
        "list_groups",
        "List groups",
        scopes.GROUPS_READ,
        "The groups the connected account belongs to: {groups: [{id, slug, name, description, memberCount, "
        "labels}]}. Labels are the group's post categories. Costs one platform read for the list and one per "
        "group (its labels) against the account's reads a minute: to look at one group, get_group costs two.",
        arguments({}),
        ListOf("groups", Group),
        _read("List groups"),
        _list_groups,
        Http("GET", "/v1/groups", 200),
    ),
    Operation(
        "get_group",
        "Get group",
        scopes.GROUPS_READ,
        "One group's metadata and its labels (categories), each {id, name, postCount}.",
        arguments({"group": GROUP}, ("group",)),
        Group,
        _read("Get group"),
        _get_group,
        Http("GET", "/v1/groups/{gid}", 200, {"group": ("path", "gid")}),
    ),
    Operation(
        "get_feed",
        "Read a group's feed",
        scopes.POSTS_READ,
        "Posts of a group, read through the platform's web feed: about 30 posts per page, 1 to 30 pages per "
        "call (more pages take longer). Answers {posts, pagesRequested, pagesFetched, stoppedEarly, sort, "
        "since}. Posts hold title and content but not comments: use get_post for those (commentCount "
        "counts top-level comments; replies are not counted). Pinned posts are listed once. Each page is "
        "one platform read against the account's reads a minute.",
        FEED_ARGS,
        feed.FeedPage,
        _read("Read a group's feed"),
        _get_feed,
        Http("GET", "/v1/groups/{gid}/posts", 200, {"group": ("path", "gid")}),
        command=feed.FeedQuery,
    ),
    Operation(
        "get_post",
        "Get a post with its comments",
        scopes.POSTS_READ,
        "A post and all its comments in one answer: {post, comments}. Comments are a flat list; postId is "
        "the root post, parentId the comment replied to (null at top level); a comment the group pinned says "
        "pinned: true. Two platform reads, and one more for each further 25 top-level comments.",
        arguments({"postId": POST_ID, "group": GROUP_HINT}, ("postId",)),
        PostDetail,
        _read("Get a post with its comments"),
        _get_post,
        Http("GET", "/v1/posts/{post_id}", 200, {"postId": ("path", "post_id")}),
    ),
    Operation(
        "list_comments",
        "List a post's comments",
        scopes.COMMENTS_READ,
        "All comments of a post as a flat list {comments: [{id, postId, parentId, authorId, author, content, "
        "createdAt, upvotes, pinned}]}, oldest thread first; parentId null means a top-level comment, pinned "
        "true one the group pinned.",
        arguments({"postId": POST_ID, "group": GROUP_HINT}, ("postId",)),
        ListOf("comments", Comment),
        _read("List a post's comments"),
        _list_comments,
        Http("GET", "/v1/posts/{post_id}/comments", 200, {"postId": ("path", "post_id")}),
    ),
    Operation(
        "create_post",
        "Publish a post",
        scopes.POSTS_WRITE,
        "Publish a post in a group as the connected account; everyone in the group sees it. Answers the new "
        "post; its author fields are null (the platform does not return them). An unknown label is refused "
        "with the group's labels in details.allowed.",
        arguments(
            {
                "group": GROUP,
                "title": filled_text("Post title.", posts.MAX_TITLE),
                "content": optional_text("Post body (optional).", posts.MAX_CONTENT, SENDABLE_PATTERN),
                "label": optional_text(
                    "Label (category) id or name, from get_group (optional).", MAX_LABEL_NAME, READABLE_PATTERN
                ),
                "idempotencyKey": IDEMPOTENCY_KEY,
            },
            ("group", "title"),
        ),
        Post,
        _write("Publish a post", destructive=False, idempotent=False),
        _create_post,
        Http("POST", "/v1/groups/{gid}/posts", 201, {"group": ("path", "gid")}),
        creates=True,
        command=posts.NewPost,
    ),
    Operation(
        "delete_post",
        "Delete a post",
        scopes.POSTS_WRITE,
        "Delete a post of the connected account, with its comments. It cannot be undone. Answers "
        "{deleted: true, postId}; deleting it again is a not_found error.",
        arguments({"postId": POST_ID}, ("postId",)),
        Deleted("postId"),
        _write("Delete a post", destructive=True, idempotent=True),
        _delete_post,
        Http("DELETE", "/v1/posts/{post_id}", 204, {"postId": ("path", "post_id")}),
    ),
    Operation(
        "create_comment",
        "Comment on a post",
        scopes.COMMENTS_WRITE,
        "Comment on a post, or reply to one of its comments with parentId, as the connected account. Answers "
        "the new comment.",
        arguments(
            {
                "postId": POST_ID,
                "content": filled_text("Comment text.", posts.MAX_CONTENT),
                "parentId": optional_text(
                    "Id of the comment to reply to (optional: none, or blank, is the post itself).",
                    PLATFORM_ID_LENGTH,
                    PLATFORM_ID_PATTERN,
                ),
                "group": GROUP_HINT,
                "idempotencyKey": IDEMPOTENCY_KEY,
            },
            ("postId", "content"),
        ),
        Comment,
        _write("Comment on a post", destructive=False, idempotent=False),
        _create_comment,
        Http("POST", "/v1/posts/{post_id}/comments", 201, {"postId": ("path", "post_id"), "group": ("query", "group")}),
        creates=True,
        command=posts.NewComment,
    ),
    Operation(
        "delete_comment",
        "Delete a comment",
        scopes.COMMENTS_WRITE,
        "Delete a comment of the connected account. It cannot be undone. Answers {deleted: true, commentId}.",
        arguments({"commentId": text("Comment id (from get_post).", PLATFORM_ID_LENGTH, **ID)}, ("commentId",)),
        Deleted("commentId"),
        _write("Delete a comment", destructive=True, idempotent=True),
        _delete_comment,
        Http("DELETE", "/v1/comments/{comment_id}", 204, {"commentId": ("path", "comment_id")}),
    ),
    Operation(
        "list_dms",
        "List DM conversations",
        scopes.DMS_READ,
        f"The private DM inbox, newest activity first, {dms.INBOX_PAGE} conversations a page: {{conversations: "
        "[{id, with, lastMessage, unreadCount, awaitingReply, updatedAt}], nextCursor}; with is the other member "
        "{id, handle, name} (handle empty where the platform does not send it). Pass nextCursor back "
        "as cursor for the next page (null at the end). awaitingReply true keeps only conversations whose "
        f"last message is not yours, scanning up to {dms.AWAITING_SCAN_PAGES} pages.",
        arguments(
            {
                "cursor": cursor("nextCursor of the previous answer.", 7, dms.OFFSET_PATTERN),
                "awaitingReply": {
                    "type": "boolean",
                    "default": False,
                    "description": "Only conversations awaiting your reply.",
                },
            }
        ),
        dms.Inbox,
        _read("List DM conversations"),
        _list_dms,
        Http("GET", "/v1/dms", 200),
        command=dms.InboxQuery,
    ),
    Operation(
        "get_dm_thread",
        "Read a DM thread",
        scopes.DMS_READ,
        "Messages of one conversation, oldest to newest: {conversation, messages, nextCursor}. Pass nextCursor "
        "back as cursor to get older messages (null when there are none).",
        arguments(
            {
                "conversationId": text("Conversation id (from list_dms).", PLATFORM_ID_LENGTH, **ID),
                "cursor": cursor(
                    "nextCursor of the previous answer: returns older messages.",
                    PLATFORM_ID_LENGTH,
                    PLATFORM_ID_PATTERN,
                ),
            },
            ("conversationId",),
        ),
        dms.Thread,
        _read("Read a DM thread"),
        _get_dm_thread,
        Http("GET", "/v1/dms/{conversation_id}", 200, {"conversationId": ("path", "conversation_id")}),
        command=dms.ThreadQuery,
    ),
    Operation(
        "send_dm",
        "Send a DM",
        scopes.DMS_WRITE,
        "Send a direct message as the connected account, to a member (to) or in an existing conversation "
        "(conversationId): give exactly one of them. Sent messages cannot be deleted. Answers {message, "
        f"conversation}}. {_DM_PACE}",
        SEND_ARGS,
        dms.SentMessage,
        _write("Send a DM", destructive=False, idempotent=False),
        _send_dm,
        Http("POST", "/v1/dms", 201, {"group": ("query", "group")}),
        creates=True,
        command=dms.NewMessage,
    ),
)

OPERATIONS_BY_NAME: dict[str, Operation] = {tool.name: tool for tool in OPERATIONS}
