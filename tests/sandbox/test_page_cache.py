"""Cached feed pages are never stale: each kind of change shows on the very next request.

Every test first asks for the page (so it is cached), then changes something the way a client or a test
does (api2, reading a post, the control API, the clock), then asks again. The checks that run on every
request (session, firewall, faults) must still apply to a page served from the cache.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from falcon import testing

from scripts.sandbox.state import Sandbox
from tests.sandbox.conftest import BIG, Browser, Clock, group_id
from tests.sandbox.test_auth_firewall import next_data
from tests.sandbox.test_feed import ts, unique, walk


def data(b: Browser, query: str = "") -> dict[str, Any]:
    r = b.data(f"/{BIG}", query_string=f"group={BIG}&{query}")
    assert r.status_code == 200
    return r.json["pageProps"]


def page(b: Browser, query: str = "") -> dict[str, Any]:
    """The props of the HTML feed page, from its ``__NEXT_DATA__``."""
    r = b.get(f"/{BIG}", query_string=query)
    assert r.status_code == 200
    return next_data(r.text)["props"]["pageProps"]


def ids(props: dict[str, Any]) -> list[str]:
    return [t["post"]["id"] for t in props["postTrees"]]


def both(b: Browser, query: str = "") -> list[dict[str, Any]]:
    """The page data and the HTML page's props: each is cached on its own."""
    return [data(b, query), page(b, query)]


def ordering(client: testing.TestClient, query: str, pages: int = 1) -> list[list[str]]:
    """The feed computed afresh by the control API (no cache, nothing marked read)."""
    return client.simulate_get("/__sandbox/ordering", query_string=f"group={BIG}&{query}&pages={pages}").json["pages"]


def test_a_new_post_then_its_deletion(client: testing.TestClient, alice: Browser) -> None:
    before = both(alice, "s=newest")
    total = before[0]["currentGroup"]["metadata"]["totalPosts"]
    new = alice.post(
        "/api2/posts",
        json={"post_type": "generic", "group_id": group_id(client), "metadata": {"title": "Fresh", "content": "x"}},
    ).json
    for props in both(alice, "s=newest"):
        assert new["id"] in ids(props)
        assert props["currentGroup"]["metadata"]["totalPosts"] == total + 1
    assert alice.delete(f"/api2/posts/{new['id']}").status_code == 200
    assert both(alice, "s=newest") == before


def test_a_comment_moves_its_post_and_counts(alice: Browser, clock: Clock) -> None:
    lead = len(data(alice)["postTrees"]) - 30  # the pinned posts ahead of page 1
    old = data(alice, "p=5")["postTrees"][0]["post"]
    both(alice)
    clock.advance(1)
    alice.post(
        "/api2/posts",
        json={"post_type": "comment", "root_id": old["id"], "parent_id": old["id"], "metadata": {"content": "up"}},
    )
    for props in both(alice):
        moved = props["postTrees"][lead]["post"]
        assert moved["id"] == old["id"] and moved["metadata"]["comments"] == old["metadata"]["comments"] + 1


def test_reading_a_post_leaves_the_unread_tab(alice: Browser) -> None:
    unread = both(alice, "s=newest&fl=unr")
    target = unread[0]["postTrees"][0]["post"]
    assert target["id"] in ids(unread[1])
    assert alice.data(f"/{BIG}/{target['name']}").status_code == 200  # reading marks it read
    for props in both(alice, "s=newest&fl=unr"):
        assert target["id"] not in ids(props)


def test_has_new_comments_follows_comments_and_reads(browser: Callable[..., Browser], clock: Clock) -> None:
    alice, bob = browser("alice"), browser("bob")
    unread = {p["id"] for p in unique(walk(alice, "&s=newest&fl=unr"))}
    seen = next(
        t["post"]
        for n in range(1, 20)
        for t in data(alice, f"s=newest&p={n}")["postTrees"]
        if t["post"]["id"] not in unread and not t["post"]["metadata"]["hasNewComments"]
    )
    query = f"s=newest&c={seen['labelId']}"  # a page that holds it
    assert seen["id"] in ids(data(alice, query)) and seen["id"] in ids(page(alice, query))

    def flag() -> list[int]:
        return [
            next(t["post"]["metadata"]["hasNewComments"] for t in props["postTrees"] if t["post"]["id"] == seen["id"])
            for props in both(alice, query)
        ]

    assert flag() == [0, 0]
    clock.advance(1)
    assert (
        bob.post(
            "/api2/posts",
            json={
                "post_type": "comment",
                "root_id": seen["id"],
                "parent_id": seen["id"],
                "metadata": {"content": "news"},
            },
        ).status_code
        == 200
    )
    assert flag() == [1, 1]  # another viewer's comment changes alice's page
    clock.advance(1)
    assert alice.data(f"/{BIG}/{seen['name']}").status_code == 200
    assert flag() == [0, 0]


def test_a_new_build_id(client: testing.TestClient, alice: Browser) -> None:
    old = alice.build_id = client.simulate_get("/__sandbox/state").json["buildId"]
    first = alice.data(f"/{BIG}", query_string=f"group={BIG}")
    assert next_data(alice.get(f"/{BIG}").text)["buildId"] == old
    new = client.simulate_post("/__sandbox/build-id", json={"buildId": "deploy-2"}).json["buildId"]
    stale = alice.get(f"/_next/data/{old}/{BIG}.json", query_string=f"group={BIG}")
    assert stale.status_code == 404 and stale.headers["content-type"].startswith("text/html")
    assert next_data(alice.get(f"/{BIG}").text)["buildId"] == new
    again = alice.get(f"/_next/data/{new}/{BIG}.json", query_string=f"group={BIG}")
    assert again.status_code == 200 and again.content == first.content


def test_signed_out_once_the_session_is_revoked_or_expired(
    client: testing.TestClient, browser: Callable[..., Browser], clock: Clock
) -> None:
    alice = browser("alice")
    assert all(props["self"]["name"] == "alice" and props["postTrees"] for props in both(alice))
    client.simulate_post("/__sandbox/expire-session", json={"user": "alice"})
    for props in both(alice):
        assert "self" not in props and "postTrees" not in props  # the about page

    client.simulate_post("/__sandbox/ttl", json={"sessionSeconds": 60})
    alice = browser("alice")
    assert all(props["self"]["name"] == "alice" for props in both(alice))
    clock.advance(61)  # no change to the world: only the per-request session check sees it
    for props in both(alice):
        assert "self" not in props and "postTrees" not in props


def test_a_windowed_sort_follows_the_clock(client: testing.TestClient, alice: Browser, clock: Clock) -> None:
    posts = unique(walk(alice, "&s=best-1d"))
    both(alice, "s=best-1d")
    # Pinned posts lead page 1 whatever their age: the oldest of the others is the next to leave.
    oldest = min((p for p in posts if not p["metadata"].get("pinned")), key=lambda p: ts(p["createdAt"]))
    clock.t = ts(oldest["createdAt"]) + 86400 + 0.001  # just out of the one-day window, nothing else changed
    after = both(alice, "s=best-1d")
    assert oldest["id"] not in ids(after[0]) and oldest["id"] not in ids(after[1])
    assert [ids(props) for props in after] == [ordering(client, "s=best-1d&user=alice")[0]] * 2
    assert {p["id"] for p in unique(walk(alice, "&s=best-1d"))} == {p["id"] for p in posts} - {oldest["id"]}


def test_a_reset_and_another_seed(client: testing.TestClient, alice: Browser) -> None:
    unread = both(alice, "s=newest&fl=unr")
    target = unread[0]["postTrees"][0]["post"]
    assert alice.data(f"/{BIG}/{target['name']}").status_code == 200
    assert all(target["id"] not in ids(props) for props in both(alice, "s=newest&fl=unr"))
    client.simulate_post("/__sandbox/reset", json={})  # the seed's read state again
    assert both(alice, "s=newest&fl=unr") == unread

    first = both(alice, "s=newest")
    alice.post(
        "/api2/posts",
        json={
            "post_type": "generic",
            "group_id": group_id(client),
            "metadata": {"title": "Gone after the reset", "content": "x"},
        },
    )
    assert both(alice, "s=newest") != first
    client.simulate_post("/__sandbox/reset", json={"seed": 2})
    other = both(alice, "s=newest")
    assert ids(other[0]) != ids(first[0])
    assert [ids(props) for props in other] == [ordering(client, "s=newest&user=alice")[0]] * 2
    client.simulate_post("/__sandbox/reset", json={})
    assert both(alice, "s=newest") == first


def test_each_viewer_has_their_own_page(browser: Callable[..., Browser]) -> None:
    alice, bob = browser("alice"), browser("bob")
    mine, theirs = data(alice, "s=newest&fl=unr"), data(bob, "s=newest&fl=unr")
    assert mine["self"]["name"] == "alice" and theirs["self"]["name"] == "bob"
    assert ids(mine) != ids(theirs)
    assert data(alice, "s=newest&fl=unr") == mine


def test_faults_and_the_firewall_still_apply(client: testing.TestClient, alice: Browser) -> None:
    first = alice.data(f"/{BIG}", query_string=f"group={BIG}")  # also learns the build id
    path = f"/_next/data/{alice.build_id}/{BIG}.json"
    client.simulate_post("/__sandbox/errors", json={"route": "^/_next/data/", "status": 503, "count": 1})
    assert alice.get(path, query_string=f"group={BIG}").status_code == 503
    assert alice.get(path, query_string=f"group={BIG}").content == first.content
    client.simulate_post("/__sandbox/latency", json={"route": "/_next/data/", "ms": 80})
    started = time.monotonic()
    assert alice.get(path, query_string=f"group={BIG}").content == first.content
    assert time.monotonic() - started >= 0.08
    client.simulate_post("/__sandbox/clear-faults")

    token = alice.cookies.pop("aws-waf-token")
    assert alice.get(path, query_string=f"group={BIG}").status_code == 403
    alice.cookies["aws-waf-token"] = token
    client.simulate_post("/__sandbox/expire-firewall")
    blocked = alice.get(path, query_string=f"group={BIG}")
    assert blocked.status_code == 403 and "Request blocked" in blocked.text


def test_any_change_made_through_changed(sb: Sandbox, alice: Browser) -> None:
    """Profile fields and upvotes have no api2 route: whatever changes them must call ``Sandbox.changed``."""
    before = both(alice, "s=newest")
    post_id = ids(before[0])[-1]
    with sb.lock:
        sb.world.users[before[0]["self"]["id"]].first_name = "Alicia"
        sb.world.posts[post_id].upvotes += 100
        sb.changed()
    for props, old in zip(both(alice, "s=newest"), before, strict=True):
        assert props["self"]["firstName"] == "Alicia"
        upvotes = {t["post"]["id"]: t["post"]["metadata"]["upvotes"] for t in props["postTrees"]}
        assert upvotes[post_id] == old["postTrees"][-1]["post"]["metadata"]["upvotes"] + 100
