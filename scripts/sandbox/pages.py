"""The www host: HTML pages with ``__NEXT_DATA__`` and their page data as JSON (camelCase).

- ``/{group}?c=&s=&fl=&p=``: the feed; ``pageProps = {postTrees, currentGroup (with labels), sortType,
  self}``. ``/{group}/{postName}``: ``pageProps = {postTree, currentGroup, self}``; reading it (page or
  data) marks the post read.
- ``/_next/data/{buildId}/{group}.json?group={group}&…`` and ``/_next/data/{buildId}/{group}/{post}.json``
  answer ``{"pageProps": …, "__N_SSP": true}``. A stale build id answers Next's 404 HTML page; an unknown
  group or post answers 404 ``{"notFound": true, "__N_SSP": true}``.
- Signed out (no, expired or revoked session): 200 and a logged-out view: ``self`` null and no posts
  (``postTrees: []``, ``postTree: null``) — a private group shows visitors nothing.
- Signed in but not a member: Next's redirect to the group's about page: the HTML page answers 307 to
  ``/{group}/about``, the page data 200 ``{"pageProps": {"__N_REDIRECT": "/{group}/about",
  "__N_REDIRECT_STATUS": 307}, "__N_SSP": true}``.
- Every page carries the firewall script (see ``firewall.py``); the login page waits for it.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from typing import Any

import falcon

from scripts.sandbox import feed, posts, serialize
from scripts.sandbox.firewall import FIREWALL_SCRIPT
from scripts.sandbox.model import User
from scripts.sandbox.state import Sandbox
from scripts.sandbox.web import html_page, viewer

ABOUT = "about"
RESERVED = {"api2", "__sandbox", "__fw", "_next"}  # never group slugs: their 404 comes from web.not_found


@dataclass(slots=True)
class PageResult:
    props: dict[str, Any] = field(default_factory=dict)
    redirect: str | None = None
    not_found: bool = False


def feed_result(sb: Sandbox, slug: str, params: dict[str, str], user: User | None) -> PageResult:
    with sb.lock:
        world = sb.world
        group = world.group_by_slug(slug)
        if group is None:
            return PageResult(not_found=True)
        if user is not None and user.id not in group.members:
            return PageResult(redirect=f"/{slug}/{ABOUT}")
        q = feed.FeedQuery.parse(params)
        page = feed.page(world, group.id, q, user, sb.now_us()) if user else []
        return PageResult(props={
            "postTrees": [{"post": serialize.post(world, p, user)} for p in page],
            "currentGroup": serialize.group(world, group, with_labels=True),
            "sortType": q.sort,
            "self": serialize.self_user(user) if user else None,
        })


def post_result(sb: Sandbox, slug: str, name: str, user: User | None) -> PageResult:
    with sb.lock:
        world = sb.world
        group = world.group_by_slug(slug)
        if group is None:
            return PageResult(not_found=True)
        props: dict[str, Any] = {"currentGroup": serialize.group(world, group, with_labels=True),
                                 "self": serialize.self_user(user) if user else None}
        if name == ABOUT:
            return PageResult(props=props)
        if user is not None and user.id not in group.members:
            return PageResult(redirect=f"/{slug}/{ABOUT}")
        post = next((world.posts[pid] for pid in world.group_posts.get(group.id, [])
                     if world.posts[pid].name == name and not world.posts[pid].deleted), None)
        if post is None:
            return PageResult(not_found=True)
        props["postTree"] = None
        if user is not None:
            posts.mark_read(sb, user, post)
            props["postTree"] = serialize.tree(world, post, user)
        return PageResult(props=props)


def _next_data(sb: Sandbox, page: str, query: dict[str, str], props: dict[str, Any]) -> str:
    data = {"props": {"pageProps": props, "__N_SSP": True}, "page": page, "query": query,
            "buildId": sb.world.build_id, "isFallback": False, "gssp": True, "scriptLoader": []}
    text = json.dumps(data, separators=(",", ":")).replace("<", "\\u003c")
    return f'<script id="__NEXT_DATA__" type="application/json">{text}</script>'


def _document(title: str, main: str, next_data: str, extra_script: str = "") -> str:
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}"
            f"</title>{FIREWALL_SCRIPT}</head><body><div id=\"__next\">{main}</div>{next_data}"
            f"{extra_script}</body></html>")


def _send_result(sb: Sandbox, resp: falcon.Response, result: PageResult, page: str, query: dict[str, str],
                 title: str, main: str) -> None:
    if result.not_found:
        html_page(resp, 404, "404", "<h1>404</h1><p>This page could not be found.</p>")
        return
    if result.redirect:
        raise falcon.HTTPTemporaryRedirect(result.redirect)
    resp.content_type = falcon.MEDIA_HTML
    resp.text = _document(title, main, _next_data(sb, page, query, result.props))


class FeedPage:
    def __init__(self, sb: Sandbox) -> None:
        self.sb = sb

    def on_get(self, req: falcon.Request, resp: falcon.Response, slug: str) -> None:
        if slug in RESERVED:
            raise falcon.HTTPNotFound()
        params = {k: str(v) for k, v in req.params.items()}
        result = feed_result(self.sb, slug, params, viewer(self.sb, req))
        items = "".join(
            f'<li class="post"><a class="post-link" href="/{html.escape(slug)}/{html.escape(t["post"]["name"])}">'
            f'{html.escape(t["post"]["metadata"]["title"])}</a></li>'
            for t in result.props.get("postTrees", []))
        main = f'<h1>{html.escape(slug)}</h1><ul id="feed">{items}</ul>'
        _send_result(self.sb, resp, result, "/[group]", {"group": slug, **params}, slug, main)


class PostPage:
    def __init__(self, sb: Sandbox) -> None:
        self.sb = sb

    def on_get(self, req: falcon.Request, resp: falcon.Response, slug: str, name: str) -> None:
        if slug in RESERVED:
            raise falcon.HTTPNotFound()
        result = post_result(self.sb, slug, name, viewer(self.sb, req))
        tree = result.props.get("postTree")
        main = "<h1>About</h1>" if name == ABOUT else "<p>Sign in to see this post.</p>"
        if tree:
            post = tree["post"]
            main = (f'<article><h1>{html.escape(post["metadata"]["title"])}</h1>'
                    f'<div class="content">{html.escape(post["metadata"]["content"])}</div></article>')
        _send_result(self.sb, resp, result, "/[group]/[post]", {"group": slug, "post": name}, name, main)


class PageData:
    """``/_next/data/{buildId}/{group}.json`` and ``/_next/data/{buildId}/{group}/{post}.json``."""

    def __init__(self, sb: Sandbox) -> None:
        self.sb = sb

    def on_get(self, req: falcon.Request, resp: falcon.Response, build_id: str, slug: str,
               name: str | None = None) -> None:
        last = name if name is not None else slug
        if build_id != self.sb.world.build_id or not last.endswith(".json"):
            html_page(resp, 404, "404", "<h1>404</h1><p>This page could not be found.</p>")
            return
        user = viewer(self.sb, req)
        if name is None:
            params = {k: str(v) for k, v in req.params.items() if k != "group"}
            result = feed_result(self.sb, slug.removesuffix(".json"), params, user)
        else:
            result = post_result(self.sb, slug, name.removesuffix(".json"), user)
        if result.not_found:
            resp.status = 404
            resp.media = {"notFound": True, "__N_SSP": True}
        elif result.redirect:
            resp.media = {"pageProps": {"__N_REDIRECT": result.redirect, "__N_REDIRECT_STATUS": 307},
                          "__N_SSP": True}
        else:
            resp.media = {"pageProps": result.props, "__N_SSP": True}


class HomePage:
    """``/``: the signed-in user's groups (signed out: a redirect to ``/login``)."""

    def __init__(self, sb: Sandbox) -> None:
        self.sb = sb

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        user = viewer(self.sb, req)
        if user is None:
            raise falcon.HTTPFound("/login")
        with self.sb.lock:
            groups = [serialize.group(self.sb.world, g) for g in self.sb.world.groups.values()
                      if user.id in g.members]
        links = "".join(f'<li><a class="group-link" href="/{g["name"]}">'
                        f'{html.escape(g["metadata"]["displayName"])}</a></li>' for g in groups)
        resp.content_type = falcon.MEDIA_HTML
        resp.text = _document("Home", f'<ul id="groups">{links}</ul>',
                              _next_data(self.sb, "/", {}, {"groups": groups,
                                                            "self": serialize.self_user(user)}))


LOGIN_SCRIPT = """<script>(function () {
  var next = %s;
  var form = document.getElementById("login-form");
  var err = document.getElementById("login-error");
  form.addEventListener("submit", async function (ev) {
    ev.preventDefault();
    err.textContent = "";
    try { await window.__fwReadyPromise; } catch (e) { err.textContent = "Request blocked"; return; }
    var r = await fetch("/api2/auth/login", {method: "POST", credentials: "same-origin",
      headers: {"content-type": "application/json"},
      body: JSON.stringify({email: document.getElementById("email").value,
                            password: document.getElementById("password").value})});
    var d = {};
    try { d = await r.json(); } catch (e) { d = {}; }
    if (r.ok && d.requires2fa) {
      var box = document.createElement("div");
      box.id = "two-factor";
      box.setAttribute("role", "alert");
      box.textContent = "Two-factor authentication required: enter the code we sent to your email.";
      form.parentNode.insertBefore(box, form.nextSibling);
      return;
    }
    if (r.ok) { window.location.assign(next); return; }
    err.textContent = d.message || ("Login failed (" + r.status + ")");
  });
})();</script>"""


class LoginPage:
    def __init__(self, sb: Sandbox) -> None:
        self.sb = sb

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        nxt = req.get_param("next") or "/"
        if not nxt.startswith("/") or nxt.startswith("//"):
            nxt = "/"
        main = ('<h1>Log in</h1><form id="login-form" method="post" action="#">'
                '<input id="email" name="email" type="email" autocomplete="username" placeholder="Email">'
                '<input id="password" name="password" type="password" autocomplete="current-password" '
                'placeholder="Password"><button type="submit">Log in</button></form>'
                '<p id="login-error" role="alert"></p>')
        script = LOGIN_SCRIPT % json.dumps(nxt).replace("<", "\\u003c")
        resp.content_type = falcon.MEDIA_HTML
        resp.text = _document("Log in", main, _next_data(self.sb, "/login", {}, {"self": None}), script)


def add_routes(app: falcon.App, sb: Sandbox) -> None:
    app.add_route("/", HomePage(sb))
    app.add_route("/login", LoginPage(sb))
    data = PageData(sb)
    app.add_route("/_next/data/{build_id}/{slug}", data)
    app.add_route("/_next/data/{build_id}/{slug}/{name}", data)
    app.add_route("/{slug}", FeedPage(sb))
    app.add_route("/{slug}/{name}", PostPage(sb))
