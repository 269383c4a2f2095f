"""The www host: HTML pages with ``__NEXT_DATA__`` and their page data as JSON (camelCase).

- ``/{group}?c=&s=&fl=&p=``: the feed; ``pageProps = {postTrees, currentGroup (with labels; empty for
  design-guild, as one client reports), sortType, total (the posts of the query), self}``.
  ``/{group}/{postName}``: ``pageProps = {postTree, currentGroup, self}``; reading it (page or data) marks
  the post read.
- ``/_next/data/{buildId}/{group}.json?group={group}&…`` and ``/_next/data/{buildId}/{group}/{post}.json``
  answer ``{"pageProps": …, "__N_SSP": true}``. A stale build id answers Next's 404 HTML page; an unknown
  group or post answers 404 ``{"notFound": true, "__N_SSP": true}``.
- A feed asked for signed out (no, expired or revoked session) or by a non-member: Next serves the group's
  about page in its place (``page: "/[group]/about"``): ``pageProps`` with ``currentGroup`` only — no
  ``postTrees`` and no ``self``, so nothing in it tells the two apart (PLATFORM.md).
- A post page signed out: ``self`` null and ``postTree: null``. By a non-member: Next's redirect to the
  group's about page: the HTML page answers 307 to ``/{group}/about``, the page data 200
  ``{"pageProps": {"__N_REDIRECT": "/{group}/about", "__N_REDIRECT_STATUS": 307}, "__N_SSP": true}``
  (the other variant reported).
- Every page carries the firewall script (see ``firewall.py``); the login page waits for it.
- Feed answers (the page and its page data) are kept rendered in ``Sandbox.pages`` (see ``cached_feed``);
  the session, the firewall and the faults are still checked on every request, before the cache.
"""

from __future__ import annotations

import hashlib
import html
import json
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

import falcon

from scripts.sandbox import feed, posts, serialize
from scripts.sandbox.firewall import FIREWALL_SCRIPT
from scripts.sandbox.model import User
from scripts.sandbox.pagecache import Rendered
from scripts.sandbox.state import Sandbox
from scripts.sandbox.web import html_page, html_text, viewer

ABOUT = "about"
RESERVED = {"api2", "__sandbox", "__fw", "_next"}  # never group slugs: their 404 comes from web.not_found
NOT_FOUND_HTML = html_text("404", "<h1>404</h1><p>This page could not be found.</p>").encode()


@dataclass(slots=True)
class PageResult:
    props: dict[str, Any] = field(default_factory=dict)
    redirect: str | None = None
    not_found: bool = False
    about: bool = False  # the group's about page, served in place of the page asked for


def feed_result(sb: Sandbox, slug: str, params: dict[str, str], user: User | None) -> PageResult:
    with sb.lock:
        world = sb.world
        group = world.group_by_slug(slug)
        if group is None:
            return PageResult(not_found=True)
        if user is None or user.id not in group.members:
            # Signed out or not a member: Next serves the group's about page instead of the feed, with no
            # posts and nothing that says which of the two it is (PLATFORM.md, "Pages and page data").
            return PageResult(props={"currentGroup": serialize.group(world, group, with_labels=True)}, about=True)
        q = feed.FeedQuery.parse(params)
        pinned, ordered = feed.ordered(world, group.id, q, user, sb.now_us())  # one walk: the page and total
        page = feed.page_of(pinned, ordered, q)
        if group.slug == PINNED_ON_EVERY_PAGE and q.page > 1 and page:
            # A third client: pinned posts resurface at the top of later pages too. There they are repeats,
            # which carry no ``metadata.pinned`` (PLATFORM.md).
            page = pinned + page
        leading = len(pinned) if q.page == 1 else 0
        current = serialize.group(world, group, with_labels=True)
        if group.slug == EMPTY_LABELS_GROUP:
            current["labels"] = []  # one client saw its group's labels empty here: read them from api2
        return PageResult(
            props={
                "postTrees": _with_repeats_as_reported(
                    group.slug,
                    [serialize.post(world, p, user) for p in page],
                    leading=leading,
                ),
                "currentGroup": current,
                "total": len(ordered),  # the group's post count for the query (one client reads it)
                "sortType": q.sort,
                "page": q.page,
                "env": ENV,
                "self": serialize.self_user(world, user),
            }
        )


# The feed's ``env`` (PLATFORM.md: "API and WebSocket URLs"); the stand-in serves api2 under its own host and
# has no live updates, so the WebSocket URL names nothing.
ENV = {"apiUrl": "/api2", "wsUrl": "wss://ws.sandbox.test/"}


# Where the sources disagree (PLATFORM.md), each variant is served somewhere: the group whose pinned
# repeats come under another id, the one whose pinned posts lead every page (not page 1 alone), and the one
# whose page data lists no labels in ``currentGroup``.
REPEAT_UNDER_ANOTHER_ID = "quiet-garden"
PINNED_ON_EVERY_PAGE = "night-owls"
EMPTY_LABELS_GROUP = "design-guild"


def _with_repeats_as_reported(slug: str, page: list[dict[str, Any]], leading: int) -> list[dict[str, Any]]:
    """A pinned post leads page 1 (the first ``leading`` posts) and appears again in its own place, on
    whatever page that is. The repeat carries no ``metadata.pinned``; in one group it also comes under
    another id, with the same slug (``name``)."""
    trees = []
    for index, post in enumerate(page):
        if index >= leading and post["metadata"].get("pinned"):
            post = {**post, "metadata": {k: v for k, v in post["metadata"].items() if k != "pinned"}}
            if slug == REPEAT_UNDER_ANOTHER_ID:
                post["id"] = hashlib.md5(f"repeat:{post['id']}".encode(), usedforsecurity=False).hexdigest()
        trees.append({"post": post})
    return trees


def cached_feed(
    sb: Sandbox,
    route: tuple[Hashable, ...],
    slug: str,
    params: dict[str, str],
    user: User | None,
    render: Callable[[PageResult], Rendered],
) -> Rendered:
    """``render(feed_result(…))``, kept in ``sb.pages`` and served again while nothing has changed.

    ``route`` names the route and whatever it takes from the request besides the parsed query. The rest
    of the key is read under the lock, and the answer is rendered under the same hold, so an entry always
    matches its key: the parsed query, the viewer (signed out: None), the build id, the sandbox's change
    counter (every change to the world bumps it: posts, comments, read state, a reset, a new build id,
    any control action), the posts' version, and for a windowed sort how many posts the window holds
    now (the clock alone moves it). A ``render`` that raises keeps nothing.
    """
    q = feed.FeedQuery.parse(params)
    with sb.lock:
        world = sb.world
        window = None
        if user is not None and q.sort in feed.WINDOWS and (group := world.group_by_slug(slug)) is not None:
            window = feed.window_size(world, group.id, q, sb.now_us())
        key = (*route, slug, q, user.id if user else None, world.build_id, sb.changes, world.version, window)
        found = sb.pages.get(key)
        if found is None:
            found = render(feed_result(sb, slug, params, user))
            sb.pages.put(key, found)
        return found


def post_result(sb: Sandbox, slug: str, name: str, user: User | None) -> PageResult:
    with sb.lock:
        world = sb.world
        group = world.group_by_slug(slug)
        if group is None:
            return PageResult(not_found=True)
        props: dict[str, Any] = {
            "currentGroup": serialize.group(world, group, with_labels=True),
            "self": serialize.self_user(world, user) if user else None,
        }
        if name == ABOUT:
            return PageResult(props=props)
        if user is not None and user.id not in group.members:
            return PageResult(redirect=f"/{slug}/{ABOUT}")
        post = next(
            (
                world.posts[pid]
                for pid in world.group_posts.get(group.id, [])
                if world.posts[pid].name == name and not world.posts[pid].deleted
            ),
            None,
        )
        if post is None:
            return PageResult(not_found=True)
        props["postTree"] = None
        if user is not None:
            posts.mark_read(sb, user, post)
            props["postTree"] = serialize.tree(world, post, user)
        return PageResult(props=props)


def _next_data(sb: Sandbox, page: str, query: dict[str, str], props: dict[str, Any]) -> str:
    data = {
        "props": {"pageProps": props, "__N_SSP": True},
        "page": page,
        "query": query,
        "buildId": sb.world.build_id,
        "isFallback": False,
        "gssp": True,
        "scriptLoader": [],
    }
    text = json.dumps(data, separators=(",", ":")).replace("<", "\\u003c")
    return f'<script id="__NEXT_DATA__" type="application/json">{text}</script>'


def _document(title: str, main: str, next_data: str, extra_script: str = "") -> str:
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}'
        f'</title>{FIREWALL_SCRIPT}</head><body><div id="__next">{main}</div>{next_data}'
        f"{extra_script}</body></html>"
    )


def _html_answer(sb: Sandbox, result: PageResult, page: str, query: dict[str, str], title: str, main: str) -> Rendered:
    """The HTML page of ``result``; a redirect is raised (Falcon writes it)."""
    if result.not_found:
        return Rendered(404, falcon.MEDIA_HTML, NOT_FOUND_HTML)
    if result.redirect:
        raise falcon.HTTPTemporaryRedirect(result.redirect)
    text = _document(title, main, _next_data(sb, "/[group]/about" if result.about else page, query, result.props))
    return Rendered(200, falcon.MEDIA_HTML, text.encode())


def _data_answer(result: PageResult) -> Rendered:
    """The page data of ``result``, encoded as Falcon encodes ``resp.media`` (``ensure_ascii=False``)."""
    if result.not_found:
        return _json(404, {"notFound": True, "__N_SSP": True})
    if result.redirect:
        return _json(200, {"pageProps": {"__N_REDIRECT": result.redirect, "__N_REDIRECT_STATUS": 307}, "__N_SSP": True})
    return _json(200, {"pageProps": result.props, "__N_SSP": True})


def _json(status: int, media: dict[str, Any]) -> Rendered:
    return Rendered(status, falcon.MEDIA_JSON, json.dumps(media, ensure_ascii=False).encode())


def send(resp: falcon.Response, answer: Rendered) -> None:
    resp.status = answer.status
    resp.content_type = answer.content_type
    resp.data = answer.data


class FeedPage:
    def __init__(self, sb: Sandbox) -> None:
        self.sb = sb

    def on_get(self, req: falcon.Request, resp: falcon.Response, slug: str) -> None:
        if slug in RESERVED:
            raise falcon.HTTPNotFound()
        params = {k: str(v) for k, v in req.params.items()}

        def render(result: PageResult) -> Rendered:
            items = "".join(
                f'<li class="post"><a class="post-link" href="/{html.escape(slug)}/'
                f'{html.escape(t["post"]["name"])}">{html.escape(t["post"]["metadata"]["title"])}</a></li>'
                for t in result.props.get("postTrees", [])
            )
            main = f'<h1>{html.escape(slug)}</h1><ul id="feed">{items}</ul>'
            return _html_answer(self.sb, result, "/[group]", {"group": slug, **params}, slug, main)

        # The page echoes its query string in __NEXT_DATA__, so the key holds it as given.
        route = ("page", tuple(params.items()))
        send(resp, cached_feed(self.sb, route, slug, params, viewer(self.sb, req), render))


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
            main = (
                f"<article><h1>{html.escape(post['metadata']['title'])}</h1>"
                f'<div class="content">{html.escape(post["metadata"]["content"])}</div></article>'
            )
        send(resp, _html_answer(self.sb, result, "/[group]/[post]", {"group": slug, "post": name}, name, main))


class PageData:
    """``/_next/data/{buildId}/{group}.json`` and ``/_next/data/{buildId}/{group}/{post}.json``."""

    def __init__(self, sb: Sandbox) -> None:
        self.sb = sb

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, build_id: str, slug: str, name: str | None = None
    ) -> None:
        last = name if name is not None else slug
        if build_id != self.sb.world.build_id or not last.endswith(".json"):
            html_page(resp, 404, "404", "<h1>404</h1><p>This page could not be found.</p>")
            return
        user = viewer(self.sb, req)
        if name is None:
            params = {k: str(v) for k, v in req.params.items() if k != "group"}
            send(resp, cached_feed(self.sb, ("data",), slug.removesuffix(".json"), params, user, _data_answer))
        else:  # reading a post marks it read: never cached
            send(resp, _data_answer(post_result(self.sb, slug, name.removesuffix(".json"), user)))


class HomePage:
    """``/``: the signed-in user's groups (signed out: a redirect to ``/login``)."""

    def __init__(self, sb: Sandbox) -> None:
        self.sb = sb

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        user = viewer(self.sb, req)
        if user is None:
            raise falcon.HTTPFound("/login")
        with self.sb.lock:
            groups = [serialize.group(self.sb.world, g) for g in self.sb.world.groups.values() if user.id in g.members]
            me = serialize.self_user(self.sb.world, user)
        links = "".join(
            f'<li><a class="group-link" href="/{g["name"]}">{html.escape(g["metadata"]["displayName"])}</a></li>'
            for g in groups
        )
        resp.content_type = falcon.MEDIA_HTML
        resp.text = _document(
            "Home",
            f'<ul id="groups">{links}</ul>',
            _next_data(self.sb, "/", {}, {"groups": groups, "self": me}),
        )


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
    if (r.ok && d.requiresCaptcha) {
      var widget = document.createElement("div");
      widget.className = "h-captcha";
      widget.setAttribute("data-sitekey", "10000000-ffff-ffff-ffff-000000000001");
      form.parentNode.insertBefore(widget, form.nextSibling);
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
        main = (
            '<h1>Log in</h1><form id="login-form" method="post" action="#">'
            '<input id="email" name="email" type="email" autocomplete="username" placeholder="Email">'
            '<input id="password" name="password" type="password" autocomplete="current-password" '
            'placeholder="Password"><button type="submit">Log in</button></form>'
            '<p id="login-error" role="alert"></p>'
        )
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
