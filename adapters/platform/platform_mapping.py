"""Platform JSON → the core's attrs model, checked on the way.

The platform has two spellings: page data (``__NEXT_DATA__``, ``/_next/data``) is camelCase, the api2 host
snake_case (``createdAt`` / ``created_at``, ``firstName`` / ``first_name``); every reader here accepts both.
Any shape we did not expect raises ``PlatformError``: an unannounced change on the platform must give the
client a clean 502, never a crash or a half-filled record.

Privacy: a user maps to id, handle (the platform's ``name``) and display name (first and last name) and
nothing else, so the private fields of ``self`` (email, payment methods, other services' keys) cannot leave
the gateway through a mapper.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

import attrs

from community_api.errors import ConnectionExpired, NotFound, PlatformError
from community_api.model import (
    Comment,
    Group,
    Label,
    PlatformUser,
    Post,
)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
EXPIRED = "the platform session has expired: link the account again"


def obj(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise PlatformError(f"unexpected answer from the platform ({what} is not an object)")
    return value


def items(value: object, what: str) -> list[dict[str, Any]]:
    """A list of objects. ``null`` is an empty list: the platform answers ``"channels": null`` for an empty
    page (PLATFORM.md, "Chat"), never meaning an error."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise PlatformError(f"unexpected answer from the platform ({what} is not a list)")
    return [obj(v, what) for v in value]


# These readers run for every field of every post of a feed (30 pages are about 900 posts), so each
# takes the common case (a plain str or int under the first name) first.
def pick(data: Mapping[str, Any], *names: str) -> Any:
    """The value under the first of ``names`` the record holds (not null): ``createdAt`` or ``created_at``."""
    for name in names:
        value = data.get(name)
        if value is not None:
            return value
    return None


def text(data: Mapping[str, Any], *names: str, default: str | None = None) -> str:
    value = pick(data, *names)
    if type(value) is str:
        return value
    if value is None and default is not None:
        return default
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise PlatformError(f"unexpected answer from the platform (no {names[0]})")
    return str(value)


def optional_text(data: Mapping[str, Any], *names: str) -> str | None:
    value = pick(data, *names)
    if type(value) is str:
        return value or None
    return str(value) if isinstance(value, str | int) and not isinstance(value, bool) and value != "" else None


def number(data: Mapping[str, Any], *names: str) -> int:
    value = pick(data, *names)
    if type(value) is int:
        return value
    if value is None:
        return 0
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.isascii() and value.strip().isdigit():  # not "²": int() refuses it
        return int(value)
    raise PlatformError(f"unexpected answer from the platform ({names[0]} is not a number)")


def timestamp(data: Mapping[str, Any], *names: str) -> datetime:
    value = pick(data, *names)
    if not isinstance(value, str):
        raise PlatformError(f"unexpected answer from the platform (no {names[0]})")
    return _time(value, names[0])


def _time(value: str, what: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)  # ISO 8601, "Z" included (Python 3.11)
    except ValueError:
        raise PlatformError(f"unexpected answer from the platform ({what} is not a time)") from None
    if parsed.tzinfo is UTC:  # the platform's own spelling (…Z): already what we want
        return parsed
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def micros(moment: datetime) -> int:
    """Microseconds since the epoch: the platform's comment cursor (``created-gt``)."""
    return (moment - EPOCH) // _MICROSECOND


_MICROSECOND = datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC) - EPOCH


def meta(data: Mapping[str, Any]) -> dict[str, Any]:
    value = data.get("metadata")
    return value if isinstance(value, dict) else {}


# --- users --------------------------------------------------------------------------------------------
_USER_FIELDS = ("id", "name", "firstName", "first_name", "lastName", "last_name")
Authors = dict[tuple[Any, ...], PlatformUser]


def user(data: object, seen: Authors | None = None) -> PlatformUser:
    """A member: only id, handle (``name``) and ``first last``, whatever else the record holds.
    ``seen`` remembers the members already read (by the fields read), for a page of posts by a few
    authors."""
    record = obj(data, "user")
    if seen is not None:
        # Page data's usual shape: the four camelCase fields are strings, and then they alone decide the
        # member (a string under the camelCase name hides its snake_case twin).
        key: tuple[Any, ...] = (record.get("id"), record.get("name"), record.get("firstName"), record.get("lastName"))
        if not (type(key[0]) is str and type(key[1]) is str and type(key[2]) is str and type(key[3]) is str):
            key = tuple(record.get(name) for name in _USER_FIELDS)
            if not all(value is None or type(value) is str for value in key):
                return user(record)  # checked afresh, never remembered
        found = seen.get(key)
        if found is None:
            found = seen[key] = user(record)
        return found
    handle = text(record, "name")
    return PlatformUser(id=text(record, "id"), handle=handle, name=display_name(record, handle))


def display_name(record: Mapping[str, Any], handle: str) -> str:
    """A member's ``first last``, or their handle when the record names neither."""
    first = optional_text(record, "firstName", "first_name") or ""
    last = optional_text(record, "lastName", "last_name") or ""
    return f"{first} {last}".strip() or handle


def self_user(resp_text: str, data: object) -> PlatformUser:
    """``api2/self``: a dead session answers 200 with an empty body (PLATFORM.md)."""
    if not resp_text.strip() or data in (None, {}):
        raise ConnectionExpired(EXPIRED)
    return user(data)


# --- groups -------------------------------------------------------------------------------------------
def label(data: object) -> Label:
    record = obj(data, "label")
    info = meta(record)
    return Label(
        id=text(record, "id"),
        name=text(info, "displayName", "display_name", default=""),
        post_count=number(info, "posts"),
    )


def group(data: object, labels: list[dict[str, Any]] | None = None) -> Group:
    record = obj(data, "group")
    info = meta(record)
    slug = text(record, "name")
    members = pick(info, "totalMembers", "total_members")
    raw_labels = labels if labels is not None else record.get("labels") or []
    return Group(
        id=text(record, "id"),
        slug=slug,
        name=text(info, "displayName", "display_name", default=slug),
        description=text(info, "description", default=""),
        member_count=number(info, "totalMembers", "total_members") if members is not None else None,
        labels=tuple(label(lb) for lb in items(raw_labels, "labels")),
    )


# --- posts and comments -------------------------------------------------------------------------------
def is_comment(record: Mapping[str, Any]) -> bool:
    """A comment has a parent; a root post is its own root (and its type is not "comment")."""
    own = record.get("id")
    root = pick(record, "rootId", "root_id")
    return (
        pick(record, "postType", "post_type") == "comment"
        or bool(pick(record, "parentId", "parent_id"))
        or (root not in (None, "") and root != own)
    )


def post(data: object, platform_url: str, slug: str | None, *, authors: Authors | None = None) -> Post:
    """``authors``: see ``user``; pass one dict for the posts of one answer. (A new post's answer is read by
    ``platform_created``.)"""
    if type(data) is dict:
        usual = usual_post(data, platform_url, slug, authors)
        if usual is not None:
            return usual
    return checked_post(data, platform_url, slug, authors=authors)


def checked_post(data: object, platform_url: str, slug: str | None, *, authors: Authors | None = None) -> Post:
    """A post of any shape the platform sends, each field through its reader."""
    record = obj(data, "post")
    info = meta(record)
    name = optional_text(record, "name")
    author = user(record["user"], authors) if isinstance(record.get("user"), dict) else None
    author_id = optional_text(record, "userId", "user_id")
    return Post(
        id=text(record, "id"),
        group_id=text(record, "groupId", "group_id"),
        title=text(info, "title", default=""),
        content=text(info, "content", default=""),
        label_id=optional_text(record, "labelId", "label_id"),
        author_id=author_id or (author.id if author else None),
        author=author,
        created_at=timestamp(record, "createdAt", "created_at"),
        updated_at=timestamp(record, "updatedAt", "updated_at") if pick(record, "updatedAt", "updated_at") else None,
        upvotes=number(info, "upvotes"),
        comment_count=number(info, "comments"),
        pinned=bool(number(info, "pinned")),
        url=f"{platform_url}/{slug}/{name}" if slug and name else None,
    )


def usual_post(record: dict[str, Any], platform_url: str, slug: str | None, authors: Authors | None) -> Post | None:
    """A post in page data's usual shape, read in one go (a 30-page feed is about 900 of them): every
    field present under its camelCase name with its usual type, so that each reader of ``checked_post``
    would take the value as it is. None for any other record, which ``checked_post`` then reads and
    judges. Where both answer, they answer the same (tests/unit/test_platform_mapping.py holds them to
    that), errors included: the author and the times are read by the same functions."""
    info = record.get("metadata")
    author = record.get("user")
    if type(info) is not dict or type(author) is not dict:
        return None
    post_id, group_id, name = record.get("id"), record.get("groupId"), record.get("name")
    label_id, user_id = record.get("labelId"), record.get("userId")
    created, updated = record.get("createdAt"), record.get("updatedAt")
    title, content = info.get("title"), info.get("content")
    upvotes, comments, pinned = info.get("upvotes"), info.get("comments"), info.get("pinned")
    if (
        type(post_id) is not str
        or type(group_id) is not str
        or type(name) is not str
        or type(label_id) is not str
        or type(user_id) is not str
        or type(created) is not str
        or type(updated) is not str
        or type(title) is not str
        or type(content) is not str
        or type(upvotes) is not int
        or type(comments) is not int
        or type(pinned) is not int
    ):
        return None  # (a bool is no int here: ``number`` reads it)
    member = user(author, authors)
    created_at = _time(created, "createdAt")
    # A post never edited was updated when it was created: one parse for both.
    updated_at = (created_at if updated == created else _time(updated, "updatedAt")) if updated else None
    url = f"{platform_url}/{slug}/{name}" if slug and name else None
    # Positional, in the order of Post's fields (the test of this module checks that order): with 13
    # keywords, attrs' __init__ costs a third more (about 1 ms more for 900 posts here).
    return Post(
        post_id,
        group_id,
        title,
        content,
        label_id or None,
        user_id or member.id,
        member,
        created_at,
        updated_at,
        upvotes,
        comments,
        bool(pinned),
        url,
    )


def comment(data: object, root_id: str) -> Comment:
    record = obj(data, "comment")
    parent = optional_text(record, "parentId", "parent_id")
    author = user(record["user"]) if isinstance(record.get("user"), dict) else None
    return Comment(
        id=text(record, "id"),
        post_id=optional_text(record, "rootId", "root_id") or root_id,
        parent_id=None if parent in (None, root_id) else parent,
        author_id=optional_text(record, "userId", "user_id") or (author.id if author else None),
        author=author,
        content=text(meta(record), "content", default=""),
        created_at=timestamp(record, "createdAt", "created_at"),
        upvotes=number(meta(record), "upvotes"),
        pinned=bool(number(meta(record), "pinned")),
    )


def walk_tree(children: object, root_id: str) -> Iterator[Comment]:
    """The comment tree flattened depth first: each comment followed by its replies, oldest first."""
    for node in items(children, "children"):
        yield comment(node.get("post"), root_id)
        yield from walk_tree(node.get("children") or [], root_id)


def pinned_trees(answer: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The trees of the pinned comments in a comments answer (PLATFORM.md: ``pinned_post_tree?``, asked for
    with ``pinned=true``). The name is read both ways it allows: the pinned comment's own tree
    ``{post: comment, children: replies}``, or the post's tree holding it ``{post: root, children:
    [comment trees]}``; a list of either; absent or ``null``, none."""
    value = pick(answer, "pinned_post_tree", "pinnedPostTree")
    found: list[dict[str, Any]] = []
    for node in items(value if isinstance(value, list) else [value] if value else [], "pinned_post_tree"):
        post = node.get("post")
        if isinstance(post, dict) and not is_comment(post):
            found += items(node.get("children"), "children")
        else:
            found.append(node)
    return found


def flat_comments(tops: list[dict[str, Any]], pinned: list[dict[str, Any]], root_id: str) -> list[Comment]:
    """Every comment once, flattened depth first, top-level threads oldest first. ``tops`` are the pages'
    top-level trees; ``pinned`` the pinned ones (``pinned_trees``), which may come apart from the pages or
    in them as well: each takes its place by time, marked ``pinned``."""
    pinned_threads = [list(walk_tree([node], root_id)) for node in pinned]
    pinned_ids = {thread[0].id for thread in pinned_threads}
    threads = [list(walk_tree([node], root_id)) for node in tops] + pinned_threads
    threads.sort(key=lambda thread: thread[0].created_at)  # stable: the pages' own order otherwise
    seen: set[str] = set()
    flat: list[Comment] = []
    for thread in threads:
        for found in thread:
            if found.id not in seen:
                seen.add(found.id)
                flat.append(attrs.evolve(found, pinned=True) if found.id in pinned_ids else found)
    return flat


def page_props(data: object, what: str) -> dict[str, Any]:
    """``pageProps`` of a page-data answer (``notFound``: ``NotFound``)."""
    record = obj(data, "page data")
    if record.get("notFound"):
        raise NotFound(f"{what} not found")
    return obj(record.get("pageProps"), "pageProps")


def is_about_page(props: Mapping[str, Any]) -> bool:
    """A feed asked for signed out or by a non-member comes back as the group's about page (PLATFORM.md),
    or as Next's redirect to it (``__N_REDIRECT``, the other variant reported): no ``postTrees`` either way.
    It is never an empty feed; the caller asks ``self`` which of the two."""
    return "postTrees" not in props


def is_signed_out_view(props: Mapping[str, Any]) -> bool:
    """``self`` null: the page as a signed-out visitor sees it. Taken for an expired session only once
    ``self`` (api2) says so: a connection marked expired stays so until the account is linked again."""
    return "self" in props and props["self"] is None
