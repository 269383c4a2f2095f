"""Records as the stand-in writes them, where a field's value depends on the moment or the order things
happened: ``hasNewComments`` against the viewer's last read, a comment's replies oldest first and without
the deleted ones, a message's ``updated_at``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from falcon import testing

from tests.sandbox.conftest import BIG, Browser, Clock, group_id, new_comment, new_post
from tests.sandbox.test_chat import inbox


def feed_post(b: Browser, post_id: str) -> dict[str, Any]:
    """The post as ``b``'s feed shows it (newest first: a post just commented on is on the first page)."""
    trees = b.data(f"/{BIG}", query_string="s=newest").json["pageProps"]["postTrees"]
    return next(t["post"] for t in trees if t["post"]["id"] == post_id)


def test_has_new_comments_means_a_comment_after_the_viewers_last_read_and_never_for_an_unread_post(
    client: testing.TestClient, browser: Callable[..., Browser], clock: Clock
) -> None:
    alice, bob = browser("alice"), browser("bob")
    post = new_post(bob, group_id(client), "Records")
    clock.advance(1)
    assert new_comment(bob, post["id"], post["id"]).status_code == 200
    assert feed_post(alice, post["id"])["metadata"]["hasNewComments"] == 0  # never opened: unread, not "new"
    clock.advance(1)
    assert alice.data(f"/{BIG}/{post['name']}").status_code == 200  # alice reads it now
    assert new_comment(bob, post["id"], post["id"]).status_code == 200  # in the same instant: not after her read
    assert feed_post(alice, post["id"])["metadata"]["hasNewComments"] == 0
    clock.advance(1)
    assert new_comment(bob, post["id"], post["id"]).status_code == 200
    assert feed_post(alice, post["id"])["metadata"]["hasNewComments"] == 1


def test_replies_come_oldest_first_without_the_deleted_ones(
    client: testing.TestClient, alice: Browser, clock: Clock
) -> None:
    post = new_post(alice, group_id(client), "Records")
    top = new_comment(alice, post["id"], post["id"]).json
    clock.advance(10)
    later = new_comment(alice, post["id"], top["id"]).json
    clock.advance(-5)  # made second, but five seconds earlier
    earlier = new_comment(alice, post["id"], top["id"]).json
    gone = new_comment(alice, post["id"], top["id"]).json
    assert alice.delete(f"/api2/posts/{gone['id']}").status_code == 200
    query = f"group-id={group_id(client)}&limit=25&pinned=true"
    tree = alice.get(f"/api2/posts/{post['id']}/comments", query_string=query).json["post_tree"]
    [thread] = tree["children"]
    assert [r["post"]["id"] for r in thread["children"]] == [earlier["id"], later["id"]]


def test_a_message_was_last_updated_when_it_was_sent(alice: Browser) -> None:
    channel = inbox(alice, limit=1)[0]
    messages = alice.get(f"/api2/channels/{channel['id']}/messages", query_string="before=30").json["messages"]
    assert messages and all(m["updated_at"] == m["created_at"] for m in messages)
