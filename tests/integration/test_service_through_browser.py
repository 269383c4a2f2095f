"""Every Implemented route through the real stack: gunicorn serving ``adapters.wiring:get_app()``, the
Selenium gateway driving headless Chromium, and the stand-in platform — checked against the stand-in's
own read-outs (what was created or sent, and its own feed ordering)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import attrs
import httpx2
import pytest
import requests
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from community_api.scopes import ALL_SCOPES
from tests.integration.conftest import SandboxProcess
from tests.processes import free_port, gunicorn_args, serving

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SECRET = "through-browser-" + "k" * 40
GROUP = "builders-club"
SORT_QUERY = {
    "newest-cm": {},
    "newest": {"s": "newest"},
    "unread": {"s": "newest", "fl": "unr"},
    "best-1d": {"s": "best-1d"},
    "best-1w": {"s": "best-1w"},
    "best-1m": {"s": "best-1m"},
    "best-1y": {"s": "best-1y"},
    "best": {"s": "best"},
}
PRIVATE_MARKERS = (
    "sk_live_",
    "cus_",
    "paymentMethods",
    "payment_methods",
    "stripeCustomerId",
    "apiKeys",
    "api_keys",
    "@sandbox.test",
)


@attrs.define
class Api:
    url: str
    key: str
    bob_connection: str
    answers: list[str] = attrs.field(factory=list)

    def call(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        headers = {"Authorization": f"Bearer {self.key}", **kwargs.pop("headers", {})}
        response = requests.request(method, self.url + path, headers=headers, timeout=120, **kwargs)
        self.answers.append(response.text)
        return response


@pytest.fixture(scope="module")
def api(sandbox: SandboxProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    sandbox.reset()
    folder: Path = tmp_path_factory.mktemp("through-browser")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        "COMMUNITY_API_MODE": "test",
        "COMMUNITY_API_DB": str(folder / "service.sqlite3"),
        "COMMUNITY_API_SECRET": SECRET,
        "COMMUNITY_API_PLATFORM_URL": sandbox.url,
        "COMMUNITY_API_PLATFORM_API_URL": sandbox.api_url,
        "COMMUNITY_API_BROWSER_POOL_SIZE": "2",
    }
    args = gunicorn_args("adapters.wiring:get_app()", port, workers=2, worker_class="gthread")
    with serving(args, url + "/v1/openapi.json", env=env, log_path=folder / "service.log"):
        web = requests.Session()
        web.post(url + "/v1/accounts", json={"email": "it@example.com", "password": "integration pass"}, timeout=10)
        signed = web.post(url + "/v1/session", json={"email": "it@example.com", "password": "integration pass"})
        web.headers["X-CSRF-Token"] = signed.json()["csrfToken"]
        linked = web.post(
            url + "/v1/connections", json={"email": "alice@sandbox.test", "password": "sandbox"}, timeout=120
        )
        assert linked.status_code == 201, linked.text
        bob = web.post(url + "/v1/connections", json={"email": "bob@sandbox.test", "password": "sandbox"}, timeout=120)
        assert bob.status_code == 201, bob.text
        key = web.post(url + "/v1/keys", json={"scopes": list(ALL_SCOPES)}, timeout=10).json()["secret"]
        yield Api(url, key, bob.json()["id"])
        log = (folder / "service.log").read_text()
        assert "sandbox\n" not in log and '"sandbox"' not in log  # the platform password is never logged


def test_whoami_groups_and_group(api: Api, sandbox: SandboxProcess) -> None:
    me = api.call("GET", "/v1/whoami").json()
    assert me == {"id": sandbox.user_id("alice"), "handle": "alice", "name": me["name"]}
    slugs = {g["slug"] for g in api.call("GET", "/v1/groups").json()["groups"]}
    alice = next(u for u in sandbox.control("users")["users"] if u["name"] == "alice")
    assert slugs == set(alice["groups"])
    group = api.call("GET", f"/v1/groups/{GROUP}").json()
    assert group["slug"] == GROUP and group["id"] == sandbox.group_id(GROUP)
    assert len(group["labels"]) >= 2
    by_id = api.call("GET", f"/v1/groups/{group['id']}").json()
    assert by_id["labels"] == group["labels"]


@pytest.mark.parametrize("sort", list(SORT_QUERY))
def test_each_sort_returns_the_stand_ins_ordering(api: Api, sandbox: SandboxProcess, sort: str) -> None:
    body = api.call("GET", f"/v1/groups/{GROUP}/posts", params={"sort": sort, "pages": "2"}).json()
    query = "&".join(f"{k}={v}" for k, v in SORT_QUERY[sort].items())
    expected = sandbox.control(f"ordering?group={GROUP}&user=alice&pages=2&{query}")["ids"]
    assert [p["id"] for p in body["posts"]] == expected
    assert body["sort"] == sort and body["pagesFetched"] == 2


@pytest.mark.parametrize("since", ["24h", "7d", "date"])
def test_since_windows_stop_early(api: Api, since: str) -> None:
    now = datetime.now(UTC)
    value = (now - timedelta(days=3)).strftime("%Y-%m-%d") if since == "date" else since
    body = api.call("GET", f"/v1/groups/{GROUP}/posts", params={"pages": "30", "since": value}).json()
    if since == "date":
        start = datetime.strptime(value, "%Y-%m-%d").replace(tzinfo=UTC)
    else:
        start = now - (timedelta(hours=24) if since == "24h" else timedelta(days=7))
    assert body["posts"]
    assert all(
        datetime.fromisoformat(p["createdAt"].replace("Z", "+00:00")) >= start - timedelta(seconds=5)
        for p in body["posts"]
    )
    assert body["stoppedEarly"] is True and body["pagesFetched"] < 30


def test_post_detail_and_comments(api: Api) -> None:
    posts = api.call("GET", f"/v1/groups/{GROUP}/posts", params={"pages": "2"}).json()["posts"]
    post = next(p for p in posts if p["commentCount"] >= 2)
    detail = api.call("GET", f"/v1/posts/{post['id']}").json()
    assert detail["post"]["id"] == post["id"]
    comments = api.call("GET", f"/v1/posts/{post['id']}/comments", params={"group": GROUP}).json()["comments"]
    assert comments == detail["comments"] and len(comments) == post["commentCount"]
    ids = {c["id"] for c in comments}
    assert all(c["postId"] == post["id"] and (c["parentId"] is None or c["parentId"] in ids) for c in comments)
    assert api.call("GET", "/v1/posts/no-such-post").status_code == 404


def test_create_and_delete_a_post_on_the_platform(api: Api, sandbox: SandboxProcess) -> None:
    labels = api.call("GET", f"/v1/groups/{GROUP}").json()["labels"]
    label = labels[-1]
    created = api.call(
        "POST",
        f"/v1/groups/{GROUP}/posts",
        json={"title": "Through the browser", "label": label["name"]},
        headers={"Idempotency-Key": "it-post-1"},
    )
    assert created.status_code == 201, created.text
    assert created.json()["author"] is None and created.json()["authorId"] is None
    again = api.call(
        "POST",
        f"/v1/groups/{GROUP}/posts",
        json={"title": "Through the browser", "label": label["name"]},
        headers={"Idempotency-Key": "it-post-1"},
    )
    assert again.json()["id"] == created.json()["id"]
    on_platform = [c for c in sandbox.control("created")["created"] if c["title"] == "Through the browser"]
    assert len(on_platform) == 1 and on_platform[0]["labelId"] == label["id"]
    post_id = created.json()["id"]
    assert api.call("DELETE", f"/v1/posts/{post_id}").status_code == 204
    assert api.call("GET", f"/v1/posts/{post_id}").status_code == 404
    assert [c["deleted"] for c in sandbox.control("created")["created"] if c["id"] == post_id] == [True]


def test_comment_and_reply_land_with_the_right_parent(api: Api, sandbox: SandboxProcess) -> None:
    posts = api.call("GET", f"/v1/groups/{GROUP}/posts").json()["posts"]
    post = posts[-1]
    top = api.call("POST", f"/v1/posts/{post['id']}/comments", json={"content": "top level"}).json()
    reply = api.call(
        "POST", f"/v1/posts/{post['id']}/comments", json={"content": "a reply", "parentId": top["id"]}
    ).json()
    assert top["parentId"] is None and reply["parentId"] == top["id"]
    created = {c["id"]: c for c in sandbox.control("created")["created"]}
    assert created[reply["id"]]["parentId"] == top["id"] and created[reply["id"]]["rootId"] == post["id"]
    assert api.call("DELETE", f"/v1/comments/{reply['id']}").status_code == 204
    assert api.call("DELETE", f"/v1/comments/{post['id']}").status_code == 404
    listed = api.call("GET", f"/v1/posts/{post['id']}/comments").json()["comments"]
    assert reply["id"] not in {c["id"] for c in listed} and top["id"] in {c["id"] for c in listed}


def test_dm_inbox_thread_and_a_send_that_arrives_once(api: Api, sandbox: SandboxProcess) -> None:
    inbox = api.call("GET", "/v1/dms").json()
    assert len(inbox["conversations"]) == 30 and inbox["nextCursor"] == "30"
    awaiting = api.call("GET", "/v1/dms", params={"awaitingReply": "true"}).json()["conversations"]
    assert awaiting and all(c["awaitingReply"] for c in awaiting)
    bob = next(c for c in inbox["conversations"] if c["with"]["handle"] == "bob")
    thread = api.call("GET", f"/v1/dms/{bob['id']}").json()
    times = [m["createdAt"] for m in thread["messages"]]
    assert times == sorted(times) and thread["nextCursor"] == thread["messages"][0]["id"]
    older = api.call("GET", f"/v1/dms/{bob['id']}", params={"cursor": thread["nextCursor"]}).json()
    assert older["messages"][-1]["createdAt"] <= times[0]
    sent = api.call("POST", "/v1/dms", json={"conversationId": bob["id"], "content": "hello once"})
    assert sent.status_code == 201, sent.text
    refused = api.call("POST", "/v1/dms", json={"conversationId": bob["id"], "content": "too soon"})
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    arrived = [m for m in sandbox.control("sent")["sent"] if m["content"] in ("hello once", "too soon")]
    assert [m["content"] for m in arrived] == ["hello once"]


def test_mcp_write_tools_act_on_the_platform(api: Api, sandbox: SandboxProcess) -> None:
    """The official MCP client, acting as bob (the other connection of the key's account): what the write
    tools do is checked in the stand-in's own read-outs."""

    async def session(client: Client) -> dict[str, Any]:
        async def call(name: str, args: dict[str, Any]) -> Any:
            result = await client.call_tool(name, args)
            assert result.is_error is False, (name, result.content)
            api.answers.append(json.dumps(result.structured_content))
            return result.structured_content

        me = await call("whoami", {})
        post = await call("create_post", {"group": GROUP, "title": "Posted over MCP", "content": "hi"})
        top = await call("create_comment", {"postId": post["id"], "content": "first"})
        reply = await call("create_comment", {"postId": post["id"], "content": "second", "parentId": top["id"]})
        await call("delete_comment", {"commentId": reply["id"]})
        inbox = await call("list_dms", {})
        alice = next(c for c in inbox["conversations"] if c["with"]["handle"] == "alice")
        sent = await call("send_dm", {"conversationId": alice["id"], "content": "hello over MCP"})
        refused = await client.call_tool("send_dm", {"conversationId": alice["id"], "content": "again"})
        assert refused.is_error and '"rate_limited"' in refused.content[0].text
        await call("delete_post", {"postId": post["id"]})
        return {"me": me, "post": post, "top": top, "reply": reply, "sent": sent}

    async def run() -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {api.key}", "X-Community-Connection": api.bob_connection}
        http = httpx2.AsyncClient(headers=headers, timeout=120)
        async with http, Client(streamable_http_client(api.url + "/v1/mcp", http_client=http), mode="auto") as client:
            return await session(client)

    done = anyio.run(run)
    assert done["me"]["handle"] == "bob"
    created = {c["id"]: c for c in sandbox.control("created")["created"]}
    assert created[done["post"]["id"]]["title"] == "Posted over MCP" and created[done["post"]["id"]]["deleted"]
    assert created[done["reply"]["id"]]["parentId"] == done["top"]["id"] and created[done["reply"]["id"]]["deleted"]
    sent = [m for m in sandbox.control("sent")["sent"] if m["content"] in ("hello over MCP", "again")]
    assert [m["content"] for m in sent] == ["hello over MCP"]


def test_no_private_field_ever_reaches_a_client(api: Api) -> None:
    assert api.answers, "runs last in this module: every answer above is checked"
    for text in api.answers:
        for marker in PRIVATE_MARKERS:
            assert marker not in text
