"""Records as the stand-in writes them, where a field's value depends on the moment or the order things
happened: ``hasNewComments`` against the viewer's last read, a comment's replies oldest first and without
the deleted ones, a message's ``updated_at``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from falcon import testing

from tests.sandbox.conftest import BIG, Browser, Clock, group_id


def feed_post(b: Browser, post_id: str) -> dict[str, Any]:
    """The post as ``b``'s feed shows it (newest first: a post just commented on is on the first page)."""
    trees = b.data(f"/{BIG}", query_string="s=newest").json["pageProps"]["postTrees"]
    return next(t["post"] for t in trees if t["post"]["id"] == post_id)


def new_post(client: testing.TestClient, b: Browser) -> dict[str, Any]:
    body = {"post_type": "generic", "group_id": group_id(client), "metadata": {"title": "Records", "content": ""}}
    return b.post("/api2/posts", json=body).json


def comment(client: testing.TestClient, b: Browser, post_id: str, parent: str | None = None) -> dict[str, Any]:
    body = {
        "post_type": "comment",
        "group_id": group_id(client),
        "root_id": post_id,
        "parent_id": parent or post_id,
        "metadata": {"content": "hello"},
    }
    made = b.post("/api2/posts", json=body)
    assert made.status_code == 200
    return made.json


def test_has_new_comments_means_a_comment_after_the_viewers_last_read_and_never_for_an_unread_post(
    client: testing.TestClient, browser: Callable[..., Browser], clock: Clock
) -> None:
    alice, bob = browser("alice"), browser("bob")
    post = new_post(client, bob)
    clock.advance(1)
    comment(client, bob, post["id"])
    assert feed_post(alice, post["id"])["metadata"]["hasNewComments"] == 0  # never opened: unread, not "new"
    clock.advance(1)
    assert alice.data(f"/{BIG}/{post['name']}").status_code == 200  # alice reads it now
    comment(client, bob, post["id"])  # in the same instant: not after her read
    assert feed_post(alice, post["id"])["metadata"]["hasNewComments"] == 0
    clock.advance(1)
    comment(client, bob, post["id"])
    assert feed_post(alice, post["id"])["metadata"]["hasNewComments"] == 1


def test_replies_come_oldest_first_without_the_deleted_ones(
    client: testing.TestClient, alice: Browser, clock: Clock
) -> None:
    post = new_post(client, alice)
    top = comment(client, alice, post["id"])
    clock.advance(10)
    later = comment(client, alice, post["id"], top["id"])
    clock.advance(-5)  # made second, but five seconds earlier
    earlier = comment(client, alice, post["id"], top["id"])
    gone = comment(client, alice, post["id"], top["id"])
    assert alice.delete(f"/api2/posts/{gone['id']}").status_code == 200
    query = f"group-id={group_id(client)}&limit=25&pinned=true"
    tree = alice.get(f"/api2/posts/{post['id']}/comments", query_string=query).json["post_tree"]
    [thread] = tree["children"]
    assert [r["post"]["id"] for r in thread["children"]] == [earlier["id"], later["id"]]


def test_a_message_was_last_updated_when_it_was_sent(alice: Browser) -> None:
    channel = alice.get("/api2/self/chat-channels", query_string="offset=0&limit=1").json["channels"][0]
    messages = alice.get(f"/api2/channels/{channel['id']}/messages", query_string="before=30").json["messages"]
    assert messages and all(m["updated_at"] == m["created_at"] for m in messages)
