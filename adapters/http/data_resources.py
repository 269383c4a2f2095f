"""REST resources of the data API: thin — check the key, parse input, call one use case, serialize."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import falcon

from adapters.http.auth import api_actor
from adapters.http.body import read_json
from adapters.http.errors import error_answer
from adapters.wire import dumps, encode
from community_api import dms, feed, groups, posts, scopes
from community_api.access import Actor
from community_api.deps import Deps
from community_api.errors import InvalidRequest
from community_api.idempotency import run_once


def query(req: falcon.Request, allowed: Iterable[str]) -> dict[str, str | None]:
    """The query parameters a route takes, each at most once; any other name is refused, so a typo such
    as ``page=3`` is not silently ignored."""
    allowed = tuple(allowed)
    unknown = sorted(set(req.params) - set(allowed))
    if unknown:
        raise InvalidRequest(f"unknown query parameter: {', '.join(unknown)}", allowed=list(allowed))
    values: dict[str, str | None] = {}
    for name in allowed:
        value = req.params.get(name)
        if isinstance(value, list):
            raise InvalidRequest(f"{name} may be given once", parameter=name)
        values[name] = value
    return values


def send_json(resp: falcon.Response, value: object, status: int = 200) -> None:
    resp.status = status
    resp.content_type = falcon.MEDIA_JSON
    resp.data = encode(value)


class Resource:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    def actor(self, req: falcon.Request, scope: str) -> Actor:
        return api_actor(self.deps, req, scope)

    def create_once(
        self, req: falcon.Request, resp: falcon.Response, actor: Actor, raw: bytes, make: Callable[[], object]
    ) -> None:
        """Answer 201 with what ``make`` created, at most once per ``Idempotency-Key``."""

        fingerprint = b"\n".join([req.method.encode(), req.relative_uri.encode(), (actor.connection.id).encode(), raw])
        answer = run_once(
            self.deps.store,
            self.deps.clock,
            account_id=actor.key.account_id,
            idempotency_key=req.get_header("Idempotency-Key"),
            request_fingerprint=fingerprint,
            act=lambda: dumps(make()),
            render_error=error_answer,
        )
        resp.status = answer.status
        resp.content_type = falcon.MEDIA_JSON
        resp.text = answer.body
        if answer.replayed:
            resp.set_header("Idempotent-Replayed", "true")


class WhoamiResource(Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        actor = self.actor(req, scopes.GROUPS_READ)
        query(req, ())
        send_json(resp, groups.whoami(self.deps, actor))


class GroupsResource(Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        actor = self.actor(req, scopes.GROUPS_READ)
        query(req, ())
        send_json(resp, {"groups": groups.list_groups(self.deps, actor)})


class GroupResource(Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response, gid: str) -> None:
        actor = self.actor(req, scopes.GROUPS_READ)
        query(req, ())
        send_json(resp, groups.get_group(self.deps, actor, gid))


class FeedResource(Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response, gid: str) -> None:
        actor = self.actor(req, scopes.POSTS_READ)
        params = query(req, ("pages", "sort", "since"))
        wanted = feed.parse_feed_query(params["pages"], params["sort"], params["since"])
        send_json(resp, feed.read_feed(self.deps, actor, gid, wanted))

    def on_post(self, req: falcon.Request, resp: falcon.Response, gid: str) -> None:
        actor = self.actor(req, scopes.POSTS_WRITE)
        query(req, ())
        body, raw = read_json(req)
        self.create_once(req, resp, actor, raw, lambda: posts.create_post(self.deps, actor, gid, body))


class PostResource(Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response, post_id: str) -> None:
        actor = self.actor(req, scopes.POSTS_READ)
        group = query(req, ("group",))["group"]
        send_json(resp, posts.post_detail(self.deps, actor, post_id, group))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, post_id: str) -> None:
        actor = self.actor(req, scopes.POSTS_WRITE)
        query(req, ())
        posts.delete_post(self.deps, actor, post_id)
        resp.status = falcon.HTTP_204


class CommentsResource(Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response, post_id: str) -> None:
        actor = self.actor(req, scopes.COMMENTS_READ)
        group = query(req, ("group",))["group"]
        send_json(resp, {"comments": posts.list_comments(self.deps, actor, post_id, group)})

    def on_post(self, req: falcon.Request, resp: falcon.Response, post_id: str) -> None:
        actor = self.actor(req, scopes.COMMENTS_WRITE)
        group = query(req, ("group",))["group"]
        body, raw = read_json(req)
        self.create_once(req, resp, actor, raw, lambda: posts.create_comment(self.deps, actor, post_id, group, body))


class CommentResource(Resource):
    def on_delete(self, req: falcon.Request, resp: falcon.Response, comment_id: str) -> None:
        actor = self.actor(req, scopes.COMMENTS_WRITE)
        query(req, ())
        posts.delete_comment(self.deps, actor, comment_id)
        resp.status = falcon.HTTP_204


class InboxResource(Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        actor = self.actor(req, scopes.DMS_READ)
        params = query(req, ("cursor", "awaitingReply"))
        send_json(resp, dms.inbox(self.deps, actor, params["cursor"], params["awaitingReply"]))

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        actor = self.actor(req, scopes.DMS_WRITE)
        group = query(req, ("group",))["group"]
        body, raw = read_json(req)
        self.create_once(req, resp, actor, raw, lambda: dms.send(self.deps, actor, group, body))


class ThreadResource(Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response, conversation_id: str) -> None:
        actor = self.actor(req, scopes.DMS_READ)
        cursor = query(req, ("cursor",))["cursor"]
        send_json(resp, dms.thread(self.deps, actor, conversation_id, cursor))
