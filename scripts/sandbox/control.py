"""The control API for tests: ``/__sandbox/…`` (JSON, no session, no firewall, no faults).

POST ``reset`` ``{"seed"?}``, ``latency`` ``{"route", "ms"}``, ``errors`` ``{"route", "status", "count",
"seconds"?, "retryAfter"?, "message"?}`` (``status`` 0 or ``"hang"``: hold the request ``seconds``, default
60, or until ``clear-faults``, then 504; ``retryAfter``: the failure's Retry-After header, e.g. with a 429;
``message``: an api2 failure's ``{"message"}``, else the status's phrase in lower case),
``clear-faults``, ``expire-session`` ``{"user"}`` (handle or id), ``expire-firewall``, ``build-id``
``{"buildId"?}`` (none: a new random one), ``captcha`` ``{"user", "enabled"?}`` (that user's sign-ins meet
a captcha until a reset or ``enabled: false``), ``antispam`` ``{"enabled"?, "minGapSeconds"?, "perHour"?,
"clearFlags"?}``, ``ttl`` ``{"firewallSeconds"?, "sessionSeconds"?}`` (for tokens issued from then on).

GET ``created``, ``sent``, ``requests`` (every request served but the control API's, oldest first:
``{method, path, rawPath, query}`` — ``path`` decoded, ``rawPath`` and ``query`` as they came), ``users``,
``state`` and ``ordering?group=&s=&fl=&c=&user=alice&pages=N`` which answers ``{"group", "sortType",
"pinned": [ids], "pages": [[ids of page 1], …], "ids": [every id of those pages once, in order]}`` —
``pages`` stops at the first empty page; nothing is marked read.
``route`` is a path prefix, or a regular expression when it starts with ``^``.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import falcon

from scripts.sandbox import feed
from scripts.sandbox.state import ApiError, FaultRule, Sandbox
from scripts.sandbox.web import body


def _number(data: dict[str, Any], key: str, default: float | None = None) -> float:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ApiError(400, f"{key} must be a number")
    return float(value)


def _route(data: dict[str, Any]) -> str:
    route = data.get("route")
    if not isinstance(route, str) or not route:
        raise ApiError(400, "route required")
    return route


class Control:
    def __init__(self, sb: Sandbox) -> None:
        self.sb = sb
        self.posts: dict[str, Callable[[dict[str, Any]], Any]] = {
            "reset": self.reset,
            "latency": self.latency,
            "errors": self.errors,
            "clear-faults": self.clear_faults,
            "expire-session": self.expire_session,
            "expire-firewall": self.expire_firewall,
            "build-id": self.build_id,
            "captcha": self.captcha,
            "antispam": self.antispam,
            "ttl": self.ttl,
        }
        self.gets: dict[str, Callable[[falcon.Request], Any]] = {
            "created": lambda req: {"created": list(self.sb.created)},
            "sent": lambda req: {"sent": list(self.sb.sent)},
            "requests": lambda req: {"requests": list(self.sb.requests)},
            "users": self.users,
            "state": self.state,
            "ordering": self.ordering,
        }

    def on_get(self, req: falcon.Request, resp: falcon.Response, action: str) -> None:
        if action not in self.gets:
            raise ApiError(404, "not found")
        with self.sb.lock:
            resp.media = self.gets[action](req)

    def on_post(self, req: falcon.Request, resp: falcon.Response, action: str) -> None:
        if action not in self.posts:
            raise ApiError(404, "not found")
        data = body(req) if req.content_length else {}
        with self.sb.lock:  # every action counts as a change: no cached page outlives one
            resp.media = self.posts[action](data) or {"ok": True}
            self.sb.changed()

    # -- actions ---------------------------------------------------------------------------------
    def reset(self, data: dict[str, Any]) -> dict[str, Any]:
        seed = data.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ApiError(400, "seed must be an integer")
        self.sb.reset(seed)
        return self.state(None)

    def latency(self, data: dict[str, Any]) -> None:
        self.sb.add_fault(FaultRule(route=_route(data), ms=int(_number(data, "ms"))))

    def errors(self, data: dict[str, Any]) -> None:
        status = data.get("status", 500)
        status = 0 if status == "hang" else status
        if isinstance(status, bool) or not isinstance(status, int) or not (status == 0 or 400 <= status < 600):
            raise ApiError(400, 'status must be 0, "hang" or an HTTP error status')
        retry_after = data.get("retryAfter")
        if retry_after is not None and not isinstance(retry_after, str | int):
            raise ApiError(400, "retryAfter must be a string or a number of seconds")
        message = data.get("message")
        if message is not None and not isinstance(message, str):
            raise ApiError(400, "message must be a string")
        self.sb.add_fault(
            FaultRule(
                route=_route(data),
                status=status,
                remaining=int(_number(data, "count", 1)),
                hang_seconds=_number(data, "seconds", 60.0),
                retry_after=None if retry_after is None else str(retry_after),
                message=message,
            )
        )

    def clear_faults(self, data: dict[str, Any]) -> None:
        self.sb.clear_faults()

    def expire_session(self, data: dict[str, Any]) -> None:
        user = self.sb.world.user_by_handle_or_id(str(data.get("user") or ""))
        if user is None:
            raise ApiError(404, "unknown user")
        self.sb.expire_sessions(user)

    def captcha(self, data: dict[str, Any]) -> None:
        user = self.sb.world.user_by_handle_or_id(str(data.get("user") or ""))
        if user is None:
            raise ApiError(404, "unknown user")
        user.requires_captcha = bool(data.get("enabled", True))

    def expire_firewall(self, data: dict[str, Any]) -> None:
        self.sb.expire_firewall()

    def build_id(self, data: dict[str, Any]) -> dict[str, Any]:
        new = data.get("buildId") or secrets.token_hex(10)
        if not isinstance(new, str) or "/" in new:
            raise ApiError(400, "invalid buildId")
        with self.sb.lock:
            self.sb.world.build_id = new
        return {"buildId": new}

    def antispam(self, data: dict[str, Any]) -> dict[str, Any]:
        with self.sb.lock:
            cfg = self.sb.antispam
            if "enabled" in data:
                cfg.enabled = bool(data["enabled"])
            if "minGapSeconds" in data:
                cfg.min_gap_seconds = _number(data, "minGapSeconds")
            if "perHour" in data:
                cfg.per_hour = int(_number(data, "perHour"))
            if data.get("clearFlags"):
                self.sb.flagged.clear()
                self.sb.dm_times.clear()
            return {"enabled": cfg.enabled, "minGapSeconds": cfg.min_gap_seconds, "perHour": cfg.per_hour}

    def ttl(self, data: dict[str, Any]) -> dict[str, Any]:
        with self.sb.lock:
            if "firewallSeconds" in data:
                self.sb.firewall_ttl = _number(data, "firewallSeconds")
            if "sessionSeconds" in data:
                self.sb.session_ttl = _number(data, "sessionSeconds")
            return {"firewallSeconds": self.sb.firewall_ttl, "sessionSeconds": self.sb.session_ttl}

    # -- read-outs -------------------------------------------------------------------------------
    def users(self, req: falcon.Request) -> dict[str, Any]:
        return {
            "users": [
                {
                    "id": u.id,
                    "name": u.handle,
                    "firstName": u.first_name,
                    "lastName": u.last_name,
                    "email": u.email,
                    "canLogin": u.email is not None and not u.requires_2fa,
                    "requires2fa": u.requires_2fa,
                    "flagged": u.id in self.sb.flagged,
                    "groups": [g.slug for g in self.sb.world.groups.values() if u.id in g.members],
                }
                for u in self.sb.world.users.values()
            ]
        }

    def state(self, req: falcon.Request | None) -> dict[str, Any]:
        w = self.sb.world
        cfg = self.sb.antispam
        return {
            "seed": w.seed,
            "buildId": w.build_id,
            "now": w.now_us,
            "groups": {
                g.slug: {"id": g.id, "posts": sum(not w.posts[p].deleted for p in w.group_posts.get(g.id, []))}
                for g in w.groups.values()
            },
            "counts": {
                "users": len(w.users),
                "posts": sum(p.is_root and not p.deleted for p in w.posts.values()),
                "comments": sum(not p.is_root and not p.deleted for p in w.posts.values()),
                "channels": len(w.channels),
                "messages": sum(len(c.messages) for c in w.channels.values()),
                "created": len(self.sb.created),
                "sent": len(self.sb.sent),
            },
            "antispam": {"enabled": cfg.enabled, "minGapSeconds": cfg.min_gap_seconds, "perHour": cfg.per_hour},
            "flagged": sorted(w.users[u].handle for u in self.sb.flagged),
            "faults": [f.describe() for f in self.sb.faults],
        }

    def ordering(self, req: falcon.Request) -> dict[str, Any]:
        w = self.sb.world
        group = w.group_by_slug(req.get_param("group") or "")
        user = w.user_by_handle_or_id(req.get_param("user") or "alice")
        if group is None or user is None:
            raise ApiError(404, "unknown group or user")
        params = {k: str(v) for k, v in req.params.items() if k in ("s", "fl", "c")}
        q = feed.FeedQuery.parse(params)
        now = self.sb.now_us()
        pinned, _ = feed.ordered(w, group.id, q, user, now)
        pages: list[list[str]] = []
        for n in range(1, int(req.get_param_as_int("pages", min_value=1, default=1)) + 1):
            page = [p.id for p in feed.page(w, group.id, replace(q, page=n), user, now)]
            if not page:
                break
            pages.append(page)
        seen: dict[str, None] = {}
        for page in pages:
            seen.update(dict.fromkeys(page))
        return {
            "group": group.slug,
            "sortType": q.sort,
            "pinned": [p.id for p in pinned],
            "pages": pages,
            "ids": list(seen),
        }
