"""The api2 host: the platform's internal JSON API under ``/api2/`` (snake_case answers).

Session quirks mirrored: with a missing, expired or revoked ``auth_token``, ``GET self`` answers 200 with
an empty body, every other route 401 ``{"message": "unauthorized"}``. A member check that fails answers
401 ``{"message": "action not permitted"}`` instead. ``limit`` above 30 (or below 1) is 400
``{"message": "invalid limit"}``. Errors are ``{"message": ...}``.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import falcon

from scripts.sandbox import chat, posts, serialize
from scripts.sandbox.model import Group, User
from scripts.sandbox.state import ApiError, Sandbox
from scripts.sandbox.web import CLIENT_COOKIE, SESSION_COOKIE, body, int_param, require_user, viewer

MAX_LIMIT = 30


class Resource:
    def __init__(self, sb: Sandbox) -> None:
        self.sb = sb


def _limit(req: falcon.Request, default: int) -> int:
    return int_param(req, "limit", default, "invalid limit", lo=1, hi=MAX_LIMIT)


class Login(Resource):
    """``POST auth/login {email, password}``: sets ``auth_token`` (HttpOnly) and ``client_id``."""

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        data = body(req)
        email, password = data.get("email"), data.get("password")
        user = self.sb.world.user_by_email(email) if isinstance(email, str) else None
        if (
            user is None
            or not isinstance(password, str)
            or not secrets.compare_digest(password.encode(), (user.password or "").encode())
        ):
            raise ApiError(401, "invalid credentials")
        if user.requires_2fa:  # the real site asks for a code here; no cookie is set
            resp.media = {"requires2fa": True}
            return
        if user.requires_captcha:  # a captcha to solve before the session is given; no cookie is set
            resp.media = {"requiresCaptcha": True}
            return
        token = self.sb.issue_session(user)
        resp.set_cookie(
            SESSION_COOKIE,
            token,
            max_age=int(self.sb.session_ttl),
            path="/",
            secure=False,
            http_only=True,
            same_site="Lax",
        )
        resp.set_cookie(
            CLIENT_COOKIE,
            cookie_or_new(req),
            max_age=int(self.sb.session_ttl),
            path="/",
            secure=False,
            http_only=False,
            same_site="Lax",
        )
        resp.media = {"user": serialize.snake(serialize.public_user(user))}


def cookie_or_new(req: falcon.Request) -> str:
    values = req.get_cookie_values(CLIENT_COOKIE)
    return values[0] if values else secrets.token_hex(16)


class Self(Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        user = viewer(self.sb, req)
        if user is None:  # the platform's answer to a dead session here: 200 and nothing
            resp.content_type = falcon.MEDIA_JSON
            resp.data = b""
            return
        with self.sb.lock:
            resp.media = serialize.snake(serialize.self_user(self.sb.world, user))


class UserGroups(Resource):
    """``GET users/{id}/groups``: your groups, or the groups you share with another user."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, user_id: str) -> None:
        me = require_user(self.sb, req)
        limit, offset = _limit(req, MAX_LIMIT), int_param(req, "offset", 0, "invalid offset")
        with self.sb.lock:
            if user_id not in self.sb.world.users:
                raise ApiError(404, "not found")
            page, _ = _group_page(self.sb, me, lambda g: user_id in g.members and me.id in g.members, limit, offset)
            resp.media = {"groups": page}


class SelfGroups(Resource):
    """``GET self/groups?offset=&limit=30``: your groups, and ``has_more`` (PLATFORM.md, "Groups")."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        me = require_user(self.sb, req)
        limit, offset = _limit(req, MAX_LIMIT), int_param(req, "offset", 0, "invalid offset")
        with self.sb.lock:
            page, has_more = _group_page(self.sb, me, lambda g: me.id in g.members, limit, offset)
            resp.media = {"groups": page, "has_more": has_more}


def _group_page(
    sb: Sandbox, me: User, listed: Callable[[Group], bool], limit: int, offset: int
) -> tuple[list[dict[str, Any]], bool]:
    """The ``listed`` groups from ``offset``, at most ``limit``, as api2 answers them to ``me``, and whether
    more follow. Called under the sandbox's lock."""
    groups = [g for g in sb.world.groups.values() if listed(g)]
    page = [serialize.api2_group(sb.world, g, me) for g in groups[offset : offset + limit]]
    return page, offset + limit < len(groups)


class GroupItem(Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response, group_id: str) -> None:
        me = require_user(self.sb, req)
        with self.sb.lock:
            group = posts.member_group(self.sb, me, group_id)
            record = serialize.api2_group(self.sb.world, group, me)
            # ``groups/{id}`` names its labels as comma-joined ids (PLATFORM.md, "Groups").
            record["metadata"]["labels"] = ",".join(label.id for label in group.labels)
            resp.media = record


class GroupLabels(Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response, group_id: str) -> None:
        me = require_user(self.sb, req)
        with self.sb.lock:
            group = posts.member_group(self.sb, me, group_id)
            resp.media = {"labels": serialize.snake(serialize.labels(self.sb.world, group))}


class LabelItem(Resource):
    """``GET labels/{id}``: one label, as PLATFORM.md gives it — ``{id, metadata: {display_name}}`` and no
    more, so that a reader relying on anything else is caught. Only a member of its group may read it."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, label_id: str) -> None:
        me = require_user(self.sb, req)
        with self.sb.lock:
            found = next(((g, lb) for g in self.sb.world.groups.values() for lb in g.labels if lb.id == label_id), None)
            if found is None:
                raise ApiError(404, "not found")
            posts.member_group(self.sb, me, found[0].id)
            resp.media = {"id": found[1].id, "metadata": {"display_name": found[1].display_name}}


class Comments(Resource):
    """``GET posts/{id}/comments?group-id=&limit=25&pinned=true&created-gt=<microseconds>``, or ``tail=true``
    for the newest page."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, post_id: str) -> None:
        me = require_user(self.sb, req)
        limit = _limit(req, 25)
        after = int_param(req, "created-gt", 0, "invalid created-gt")
        pinned = (req.get_param("pinned") or "").lower() == "true"
        tail = (req.get_param("tail") or "").lower() == "true"
        resp.media = posts.comments(self.sb, me, post_id, req.get_param("group-id"), limit, after, pinned, tail)


class Posts(Resource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        me = require_user(self.sb, req)
        resp.media = posts.create(self.sb, me, body(req))


class PostItem(Resource):
    def on_delete(self, req: falcon.Request, resp: falcon.Response, post_id: str) -> None:
        me = require_user(self.sb, req)
        group = posts.delete(self.sb, me, post_id)
        if group.slug == posts.NO_CONTENT_DELETE_GROUP:
            resp.status = falcon.HTTP_204
        else:
            resp.media = {}


class ChatChannels(Resource):
    """``GET self/chat-channels?offset=&limit=&last=true&unread-only=false``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        me = require_user(self.sb, req)
        limit = _limit(req, MAX_LIMIT)
        offset = int_param(req, "offset", 0, "invalid offset")
        unread_only = (req.get_param("unread-only") or "").lower() == "true"
        resp.media = chat.inbox(self.sb, me, offset, limit, unread_only)


class ChannelMessages(Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response, channel_id: str) -> None:
        me = require_user(self.sb, req)
        before = int_param(req, "before", chat.DEFAULT_BEFORE, "invalid before", 0, chat.MAX_COUNT)
        after = int_param(req, "after", 0, "invalid after", 0, chat.MAX_COUNT)
        resp.media = chat.messages(self.sb, me, channel_id, before, after, req.get_param("msg"))

    def on_post(self, req: falcon.Request, resp: falcon.Response, channel_id: str) -> None:
        me = require_user(self.sb, req)
        resp.media = chat.send(self.sb, me, channel_id, body(req))


class ChannelRead(Resource):
    def on_post(self, req: falcon.Request, resp: falcon.Response, channel_id: str) -> None:
        me = require_user(self.sb, req)
        resp.media = chat.mark_read(self.sb, me, channel_id)


class ChatRequest(Resource):
    def on_post(self, req: falcon.Request, resp: falcon.Response, user_id: str) -> None:
        me = require_user(self.sb, req)
        resp.media = chat.chat_request(self.sb, me, user_id, req.get_param("g"))


def add_routes(app: falcon.App, sb: Sandbox) -> None:
    routes = {
        "/api2/auth/login": Login,
        "/api2/self": Self,
        "/api2/users/{user_id}/groups": UserGroups,
        "/api2/self/groups": SelfGroups,
        "/api2/groups/{group_id}": GroupItem,
        "/api2/groups/{group_id}/labels": GroupLabels,
        "/api2/labels/{label_id}": LabelItem,
        "/api2/posts/{post_id}/comments": Comments,
        "/api2/posts": Posts,
        "/api2/posts/{post_id}": PostItem,
        "/api2/self/chat-channels": ChatChannels,
        "/api2/channels/{channel_id}/messages": ChannelMessages,
        "/api2/channels/{channel_id}/read": ChannelRead,
        "/api2/users/{user_id}/chat-request": ChatRequest,
    }
    for path, cls in routes.items():
        app.add_route(path, cls(sb))
