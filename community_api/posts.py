"""Posts and comments: read a post with all its comments, publish and delete as the connected account.

Rules (spec §2, §4):
- post detail is the post and every comment in one answer; the comment list is flat, each comment with
  ``post_id`` (the root post), ``parent_id`` (None at top level) and ``author_id``;
- a new post needs a ``title``; ``content`` and ``label`` are optional; a label is named by id or by name
  (in any case, its letters written any way Unicode holds the same: ``_name_key``) and must be a label of
  the group, else ``invalid_request``;
- the answer to a new post has null author fields (the platform does not return them);
- a comment needs ``content``; ``parent_id``, when given, must be a comment of the same post (the
  platform checks it and the gateway reports ``invalid_request``).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager

import attrs

from community_api.access import Actor
from community_api.commands import at_most, blank_as_none, filled, label_name, platform_id, sendable
from community_api.deps import GROUP_READS, ONE_WRITE, POST_DETAIL_READS, Deps, on_platform
from community_api.errors import InvalidRequest, NotFound, before_the_write
from community_api.model import Comment, Post, PostDetail
from community_api.platform_ids import MAX_LABEL_NAME, field_group, path_group, path_id

MAX_TITLE = 300
MAX_CONTENT = 20_000
MAX_ID = 200


@attrs.frozen
class NewPost:
    """A post to publish: its title, and optionally its text and its label (the label's id or name)."""

    title: str = attrs.field(validator=[filled, sendable, at_most(MAX_TITLE)])
    content: str | None = attrs.field(default=None, converter=blank_as_none, validator=[sendable, at_most(MAX_CONTENT)])
    # label_name first: a name too long is refused in its words, as before the limit was published.
    label: str | None = attrs.field(
        default=None, converter=blank_as_none, validator=[label_name, at_most(MAX_LABEL_NAME)]
    )


@attrs.frozen
class NewComment:
    """A comment to publish: its text, and the comment it answers (None: the post itself)."""

    content: str = attrs.field(validator=[filled, sendable, at_most(MAX_CONTENT)])
    parent_id: str | None = attrs.field(default=None, converter=blank_as_none, validator=[at_most(MAX_ID), platform_id])


@contextmanager
def _looked_for_in(post_id: str, group: str | None) -> Iterator[None]:
    """A post looked for in the group the caller named and not found is not found *there*: the answer says
    so, since the post may well be in another group (the group is optional: it spares a look-up)."""
    try:
        yield
    except NotFound as error:
        if group is None:
            raise
        raise NotFound(
            f"post {post_id} not found in group {group}; without a group, it is looked for in every group "
            "of the account"
        ) from error


def post_detail(deps: Deps, actor: Actor, post_id: str, group: str | None) -> PostDetail:
    post_id, group = path_id(post_id, "post"), field_group(group)
    with _looked_for_in(post_id, group), on_platform(deps, actor.connection, reads=POST_DETAIL_READS):
        return deps.gateway.post_detail(actor.session, post_id, group)


def list_comments(deps: Deps, actor: Actor, post_id: str, group: str | None) -> tuple[Comment, ...]:
    return post_detail(deps, actor, post_id, group).comments


def create_post(deps: Deps, actor: Actor, group: str, new: NewPost) -> Post:
    group = path_group(group)
    label_id = None
    if new.label is not None:
        # The group's labels come from the platform: reads, paced like any other.
        with before_the_write(), on_platform(deps, actor.connection, reads=GROUP_READS):
            label_id = _label_id(deps, actor, group, new.label)
    with on_platform(deps, actor.connection, writes=ONE_WRITE):
        return deps.gateway.create_post(actor.session, group, new.title, new.content or "", label_id)


def _label_id(deps: Deps, actor: Actor, group: str, wanted: str) -> str:
    labels = deps.gateway.get_group(actor.session, group).labels
    for label in labels:
        if label.id == wanted:
            return label.id
    matches = [label for label in labels if _name_key(label.name) == _name_key(wanted)]
    if len(matches) == 1:
        return matches[0].id
    raise InvalidRequest(
        f"unknown label: {wanted}",
        field="label",
        allowed=[{"id": label.id, "name": label.name} for label in labels],
    )


def _name_key(name: str) -> str:
    """A label's name as names are compared: the same words however they are written — case folded, and
    in NFKC (``é`` one character or ``e`` with a combining accent, as keyboards differ; full-width letters);
    close to Unicode's compatibility caseless match (§3.13, D146), in NFKC rather than NFKD."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name.strip()).casefold())


def delete_post(deps: Deps, actor: Actor, post_id: str) -> None:
    post_id = path_id(post_id, "post")
    with on_platform(deps, actor.connection, writes=ONE_WRITE):
        deps.gateway.delete_post(actor.session, post_id)


def create_comment(deps: Deps, actor: Actor, post_id: str, group: str | None, new: NewComment) -> Comment:
    post_id, group = path_id(post_id, "post"), field_group(group)
    with _looked_for_in(post_id, group), on_platform(deps, actor.connection, writes=ONE_WRITE):
        return deps.gateway.create_comment(actor.session, post_id, new.content, new.parent_id, group)


def delete_comment(deps: Deps, actor: Actor, comment_id: str) -> None:
    comment_id = path_id(comment_id, "comment")
    with on_platform(deps, actor.connection, writes=ONE_WRITE):
        deps.gateway.delete_comment(actor.session, comment_id)
