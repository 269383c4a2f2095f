"""api2: self, groups, labels, comments (snake_case, two deep), create and delete, read-outs."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from falcon import testing

from scripts.sandbox.model import Group, Post
from scripts.sandbox.state import Sandbox
from tests.sandbox.conftest import BIG, Browser, Clock, group_id, new_comment, new_post, user_id
from tests.sandbox.test_chat import all_channels

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_PAGES = 200  # more pages of comments than any seeded post has


def micros(iso: str) -> int:
    return (datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC) - EPOCH) // timedelta(microseconds=1)


def big_posts(alice: Browser, query: str = "s=newest") -> list[dict]:
    """Page 1 without its leading pinned block."""
    trees = alice.data(f"/{BIG}", query_string=query).json["pageProps"]["postTrees"]
    return [t["post"] for t in trees[3:]]


def test_self_has_private_fields(alice: Browser) -> None:
    me = alice.get("/api2/self").json
    assert me["name"] == "alice" and me["first_name"] == "Alice" and me["last_name"] == "Andersen"
    assert me["email"] == "alice@sandbox.test" and me["api_keys"][0].startswith("sk_live_")
    assert me["stripe_customer_id"].startswith("cus_") and me["payment_methods"]
    assert '"pts"' in me["metadata"]["sp_data"]
    unread = sum(1 for channel in all_channels(alice) if channel["metadata"]["num_unread"])
    assert me["metadata"]["unread_chats"] == unread > 0


def test_user_groups_and_limits(client: testing.TestClient, alice: Browser) -> None:
    me = user_id(client, "alice")
    groups = alice.get(f"/api2/users/{me}/groups", query_string="offset=0&limit=30").json["groups"]
    assert [g["name"] for g in groups] == ["builders-club", "night-owls", "quiet-garden"]
    assert groups[0]["metadata"]["display_name"] == "Builders Club"
    assert groups[0]["metadata"]["total_members"] > 200
    # Fields that hold JSON in a string, named as the site names them, not snake_cased (PLATFORM.md, "Groups").
    assert json.loads(groups[0]["metadata"]["member"])["userId"] == me
    assert isinstance(json.loads(groups[0]["metadata"]["currentMBp"]), dict)
    assert (
        alice.get(f"/api2/users/{me}/groups", query_string="offset=1&limit=1").json["groups"][0]["name"] == "night-owls"
    )
    r = alice.get(f"/api2/users/{me}/groups", query_string="limit=31")
    assert r.status_code == 400 and r.json == {"message": "invalid limit"}
    # ``self/groups`` answers the same list, with ``has_more``.
    mine = alice.get("/api2/self/groups", query_string="offset=0&limit=30").json
    assert mine == {"groups": groups, "has_more": False}
    first = alice.get("/api2/self/groups", query_string="offset=0&limit=2").json
    assert [g["name"] for g in first["groups"]] == ["builders-club", "night-owls"] and first["has_more"] is True
    assert alice.get("/api2/self/groups", query_string="offset=2&limit=2").json["has_more"] is False
    assert alice.get("/api2/self/groups", query_string="offset=1&limit=2").json["has_more"] is False  # to the end
    unknown = alice.get(f"/api2/users/{'0' * 32}/groups")
    assert (unknown.status_code, unknown.json) == (404, {"message": "not found"})
    dave = user_id(client, "dave")  # another user: only the groups both share
    assert [g["name"] for g in alice.get(f"/api2/users/{dave}/groups").json["groups"]] == [
        "builders-club",
        "night-owls",
    ]


def test_group_and_labels(client: testing.TestClient, sb: Sandbox, alice: Browser) -> None:
    gid = group_id(client)
    group = alice.get(f"/api2/groups/{gid}").json
    assert group["id"] == gid and group["name"] == BIG and group["metadata"]["description"]
    assert json.loads(group["metadata"]["member"])["role"] and json.loads(group["metadata"]["currentMBp"]) == {}
    labels = alice.get(f"/api2/groups/{gid}/labels").json["labels"]
    assert len(labels) == 6 and labels[0]["metadata"]["display_name"] == "General"
    assert sum(lb["metadata"]["posts"] for lb in labels) > 1000
    assert group["metadata"]["labels"] == ",".join(lb["id"] for lb in labels)  # comma-joined ids
    # One by one: ``{id, metadata: {display_name}}`` (PLATFORM.md, "Groups").
    one = alice.get(f"/api2/labels/{labels[0]['id']}").json
    assert one == {"id": labels[0]["id"], "metadata": {"display_name": "General"}}
    assert alice.get(f"/api2/labels/{'0' * 32}").status_code == 404
    elsewhere = next(g for g in sb.world.groups.values() if user_id(client, "alice") not in g.members)
    refused = alice.get(f"/api2/labels/{elsewhere.labels[0].id}")
    assert refused.status_code == 401 and refused.json == {"message": "action not permitted"}
    assert alice.get("/api2/groups/nope").status_code == 404


def test_comments_are_a_snake_case_tree_two_deep_and_paged(client: testing.TestClient, alice: Browser) -> None:
    gid = group_id(client)
    post = next(p for p in big_posts(alice, "s=best") if p["metadata"]["comments"] >= 6)
    r = alice.get(f"/api2/posts/{post['id']}/comments", query_string=f"group-id={gid}&limit=2&pinned=true")
    tree = r.json["post_tree"]
    assert tree["post"]["id"] == post["id"] and tree["post"]["root_id"] == post["id"]
    assert "created_at" in tree["post"] and "group_id" in tree["post"] and "label_id" in tree["post"]
    first = tree["children"]
    assert len(first) == 2
    for node in first:
        c = node["post"]
        assert c["parent_id"] == post["id"] and c["root_id"] == post["id"] and c["user_id"]
        assert c["metadata"]["content"] and c["post_type"] == "comment"
        for reply in node["children"]:
            assert reply["post"]["parent_id"] == c["id"] and reply["children"] == []
    # walk all top-level comments with the created-gt cursor (microseconds)
    seen, cursor = [], 0
    for _ in range(MAX_PAGES):  # bounded: a cursor that never moves on fails the test rather than hangs it
        page = alice.get(
            f"/api2/posts/{post['id']}/comments", query_string=f"group-id={gid}&limit=2&created-gt={cursor}"
        ).json["post_tree"]["children"]
        if not page:
            break
        seen += page
        cursor = micros(page[-1]["post"]["created_at"])
    else:
        raise AssertionError("the comments never came to an end")
    assert len(seen) == post["metadata"]["comments"]  # the count is of top-level comments (PLATFORM.md)
    assert len({n["post"]["id"] for n in seen}) == len(seen)


def test_comments_errors(client: testing.TestClient, alice: Browser) -> None:
    assert alice.get("/api2/posts/nope/comments").json == {"message": "not found"}
    assert alice.get("/api2/posts/nope/comments").status_code == 404
    post = big_posts(alice)[0]
    r = alice.get(f"/api2/posts/{post['id']}/comments", query_string="limit=31")
    assert r.status_code == 400 and r.json == {"message": "invalid limit"}


def test_create_post_then_comment_reply_and_readouts(client: testing.TestClient, alice: Browser) -> None:
    gid = group_id(client)
    label = alice.get(f"/api2/groups/{gid}/labels").json["labels"][2]["id"]
    body = {
        "post_type": "generic",
        "group_id": gid,
        "metadata": {
            "title": "Hello from tests",
            "content": "Plain text.",
            "labels": label,
            "attachments": "",
            "action": 0,
            "video_ids": "",
        },
    }
    r = alice.post("/api2/posts", query_string="follow=true", json=body)
    assert r.status_code == 200
    created = r.json
    assert created["name"].startswith("hello-from-tests-") and created["label_id"] == label
    assert "user" not in created and "user_id" not in created
    assert big_posts(alice)[0]["id"] == created["id"]  # newest first
    comment = alice.post(
        "/api2/posts",
        json={
            "post_type": "comment",
            "group_id": gid,
            "root_id": created["id"],
            "parent_id": created["id"],
            "metadata": {"content": "first!"},
        },
    ).json
    reply = alice.post(
        "/api2/posts",
        json={
            "post_type": "comment",
            "root_id": created["id"],
            "parent_id": comment["id"],
            "metadata": {"content": "reply"},
        },
    ).json
    deeper = alice.post(
        "/api2/posts",
        json={
            "post_type": "comment",
            "root_id": created["id"],
            "parent_id": reply["id"],
            "metadata": {"content": "deeper"},
        },
    ).json
    assert reply["parent_id"] == comment["id"]
    assert deeper["parent_id"] == comment["id"]  # a reply to a reply joins the comment's thread
    tree = alice.get(f"/api2/posts/{created['id']}/comments").json["post_tree"]
    assert [len(n["children"]) for n in tree["children"]] == [2]
    assert tree["post"]["metadata"]["comments"] == 1  # one top-level comment; its two replies are not counted
    assert tree["post"]["metadata"]["last_comment_id"] == deeper["id"]  # the newest, a reply included
    assert big_posts(alice)[0]["metadata"]["lastCommentId"] == deeper["id"]
    out = client.simulate_get("/__sandbox/created").json["created"]
    assert [(c["type"], c["author"], c["group"], c["deleted"]) for c in out] == [("generic", "alice", BIG, False)] + [
        ("comment", "alice", BIG, False)
    ] * 3
    assert out[0]["title"] == "Hello from tests" and out[0]["labelId"] == label
    assert out[2]["rootId"] == created["id"] and out[2]["parentId"] == comment["id"]


def test_in_one_group_creates_are_answered_with_no_more_than_id_and_name(
    client: testing.TestClient, alice: Browser
) -> None:
    # PLATFORM.md promises ``{id, name, …}``: quiet-garden answers exactly that, elsewhere the whole post.
    from scripts.sandbox.posts import BARE_CREATE_ANSWER_GROUP

    gid = group_id(client, BARE_CREATE_ANSWER_GROUP)
    body = {"post_type": "generic", "group_id": gid, "metadata": {"title": "Bare", "content": "", "labels": ""}}
    post = alice.post("/api2/posts", query_string="follow=true", json=body).json
    assert set(post) == {"id", "name"} and post["name"].startswith("bare-")
    comment = alice.post(
        "/api2/posts",
        json={"post_type": "comment", "root_id": post["id"], "parent_id": post["id"], "metadata": {"content": "c"}},
    ).json
    assert set(comment) == {"id", "name"}
    # A deletion there is a 204 with no body (PLATFORM.md does not say what a DELETE answers).
    gone = alice.delete(f"/api2/posts/{comment['id']}")
    assert gone.status_code == 204 and gone.content == b""
    out = client.simulate_get("/__sandbox/created").json["created"]
    assert [(c["id"], c["group"]) for c in out] == [
        (post["id"], BARE_CREATE_ANSWER_GROUP),
        (comment["id"], BARE_CREATE_ANSWER_GROUP),
    ]


def test_create_refusals(client: testing.TestClient, alice: Browser, browser: Callable[..., Browser]) -> None:
    gid = group_id(client)
    r = alice.post(
        "/api2/posts",
        json={"post_type": "generic", "group_id": gid, "metadata": {"title": "x", "content": "y", "labels": "bogus"}},
    )
    assert r.status_code == 400 and r.json == {"message": "cannot post to this label"}
    post = big_posts(alice)[0]
    other = big_posts(alice)[1]
    other_comments = alice.get(f"/api2/posts/{other['id']}/comments").json["post_tree"]["children"]
    bad_parents = ["nope"] + [n["post"]["id"] for n in other_comments[:1]]
    for parent in bad_parents:
        r = alice.post(
            "/api2/posts",
            json={"post_type": "comment", "root_id": post["id"], "parent_id": parent, "metadata": {"content": "hi"}},
        )
        assert r.status_code == 400
    design = group_id(client, "design-guild")
    r = alice.post(
        "/api2/posts", json={"post_type": "generic", "group_id": design, "metadata": {"title": "x", "content": "y"}}
    )
    assert r.status_code == 401 and r.json == {"message": "action not permitted"}
    assert client.simulate_get("/__sandbox/created").json["created"] == []


def test_delete_post_and_comment(client: testing.TestClient, alice: Browser, browser: Callable[..., Browser]) -> None:
    gid = group_id(client)
    new = alice.post(
        "/api2/posts", json={"post_type": "generic", "group_id": gid, "metadata": {"title": "Temp", "content": "x"}}
    ).json
    c1 = alice.post(
        "/api2/posts",
        json={"post_type": "comment", "root_id": new["id"], "parent_id": new["id"], "metadata": {"content": "c1"}},
    ).json
    alice.post(
        "/api2/posts",
        json={"post_type": "comment", "root_id": new["id"], "parent_id": c1["id"], "metadata": {"content": "r1"}},
    )
    bob = browser("bob")
    r = bob.delete(f"/api2/posts/{new['id']}")
    assert r.status_code == 403 and r.json["message"].startswith("must be admin or level")
    assert alice.delete(f"/api2/posts/{c1['id']}").status_code == 200
    tree = alice.get(f"/api2/posts/{new['id']}/comments").json["post_tree"]
    assert tree["children"] == [] and tree["post"]["metadata"]["comments"] == 0
    assert tree["post"]["metadata"]["last_comment_id"] == "" and tree["post"]["metadata"]["last_comment"] == 0
    assert alice.delete(f"/api2/posts/{new['id']}").status_code == 200
    assert new["id"] not in {p["id"] for p in big_posts(alice)}
    assert alice.delete(f"/api2/posts/{new['id']}").status_code == 404
    assert alice.data(f"/{BIG}/{new['name']}").status_code == 404
    assert all(c["deleted"] for c in client.simulate_get("/__sandbox/created").json["created"])


def test_seeded_post_of_someone_else_cannot_be_deleted(client: testing.TestClient, alice: Browser) -> None:
    me = user_id(client, "alice")
    post = next(p for p in big_posts(alice) if p["userId"] != me)
    assert alice.delete(f"/api2/posts/{post['id']}").status_code == 403


def test_unknown_api2_route_is_json_404(alice: Browser) -> None:
    for path in ("/api2/nope", "/api2/nope/deeper"):
        r = alice.get(path)
        assert r.status_code == 404 and r.json == {"message": "not found"}


def test_home_lists_the_users_groups(alice: Browser) -> None:
    page = alice.get("/")
    assert page.status_code == 200
    assert 'href="/builders-club"' in page.text and 'href="/design-guild"' not in page.text


def test_deleting_a_post_takes_its_replies_with_it(client: testing.TestClient, alice: Browser) -> None:
    gid = group_id(client)
    new = alice.post(
        "/api2/posts", json={"post_type": "generic", "group_id": gid, "metadata": {"title": "Thread", "content": "x"}}
    ).json
    c1 = alice.post(
        "/api2/posts",
        json={"post_type": "comment", "root_id": new["id"], "parent_id": new["id"], "metadata": {"content": "c1"}},
    ).json
    r1 = alice.post(
        "/api2/posts",
        json={"post_type": "comment", "root_id": new["id"], "parent_id": c1["id"], "metadata": {"content": "r1"}},
    ).json
    assert alice.delete(f"/api2/posts/{new['id']}").status_code == 200
    assert alice.delete(f"/api2/posts/{r1['id']}").status_code == 404
    created = {c["id"]: c for c in client.simulate_get("/__sandbox/created").json["created"]}
    assert created[r1["id"]]["deleted"] and created[c1["id"]]["deleted"]


def test_the_busy_post_pages_its_comments_with_last_and_has_more(client: testing.TestClient, alice: Browser) -> None:
    from scripts.sandbox.seed import BUSY_TITLE

    seen, cursor, pages = [], 0, 0
    world_post = None  # found through the feed, as a client finds it
    for page in range(1, 60):
        trees = alice.data(f"/{BIG}", query_string=f"s=newest&p={page}").json["pageProps"]["postTrees"]
        world_post = next((t["post"] for t in trees if t["post"]["metadata"]["title"] == BUSY_TITLE), None)
        if world_post:
            break
    assert world_post is not None
    for _ in range(MAX_PAGES):
        answer = alice.get(
            f"/api2/posts/{world_post['id']}/comments", query_string=f"limit=25&created-gt={cursor}"
        ).json
        children = answer["post_tree"]["children"]
        seen += [c["post"]["id"] for c in children]
        pages += 1
        if not answer["meta"]["has_more"]:
            break
        assert len(children) == 25 and answer["last"] > cursor
        cursor = answer["last"]
    else:
        raise AssertionError("the comments never came to an end")
    # One of its top-level comments is pinned: it comes apart (``pinned_post_tree``), not in the pages.
    assert pages == 3 and len(seen) == len(set(seen)) == world_post["metadata"]["comments"] - 1 >= 61
    # ``tail=true`` jumps to the newest page: the last 25 of the walk, oldest first, with nothing after it.
    tail = alice.get(f"/api2/posts/{world_post['id']}/comments", query_string="limit=25&tail=true").json
    assert [c["post"]["id"] for c in tail["post_tree"]["children"]] == seen[-25:]
    assert tail["meta"]["has_more"] is False and tail["last"] == answer["last"]


def _pinned_post(sb: Sandbox, slug: str) -> tuple[Post, Group]:
    group = sb.world.group_by_slug(slug)
    assert group is not None
    roots = [sb.world.posts[pid] for pid in sb.world.group_posts[group.id]]
    return next(p for p in roots if any(sb.world.posts[c].pinned for c in p.children)), group


def test_a_pinned_comment_comes_apart_when_asked_with_pinned_true(
    client: testing.TestClient, sb: Sandbox, alice: Browser
) -> None:
    """PLATFORM.md: the first comments page is asked with ``pinned=true``, and the answer may hold a
    ``pinned_post_tree``. In builders-club it is the pinned comment's own tree, left out of the pages."""
    post, group = _pinned_post(sb, BIG)
    pin = next(sb.world.posts[c] for c in post.children if sb.world.posts[c].pinned)
    url = f"/api2/posts/{post.id}/comments"
    first = alice.get(url, query_string=f"group-id={group.id}&limit=25&pinned=true").json
    tree = first["pinned_post_tree"]
    assert tree["post"]["id"] == pin.id and tree["post"]["post_type"] == "comment"
    assert [r["post"]["parent_id"] for r in tree["children"]] == [pin.id] * len(pin.children)
    seen, cursor = [], 0
    for _ in range(MAX_PAGES):
        answer = alice.get(url, query_string=f"group-id={group.id}&limit=25&pinned=true&created-gt={cursor}").json
        assert cursor == 0 or "pinned_post_tree" not in answer  # the first page only
        seen += [n["post"]["id"] for n in answer["post_tree"]["children"]]
        if not answer["meta"]["has_more"]:
            break
        cursor = answer["last"]
    else:
        raise AssertionError("the comments never came to an end")
    assert pin.id not in seen and len(seen) + 1 == post.num_comments
    without = alice.get(url, query_string=f"group-id={group.id}&limit=25").json
    assert "pinned_post_tree" not in without
    shouted = alice.get(url, query_string=f"group-id={group.id}&limit=25&pinned=TRUE").json
    assert shouted["pinned_post_tree"] == tree  # the flag is read whatever its case


def test_a_pinned_comment_under_its_post_and_in_its_place_in_another_group(
    client: testing.TestClient, sb: Sandbox, browser: Callable[..., Browser]
) -> None:
    """The other reading of ``pinned_post_tree``: the post's tree holding the pinned comment's, and the
    comment also in its place among the pages."""
    from scripts.sandbox.posts import PINNED_UNDER_ROOT_GROUP

    post, group = _pinned_post(sb, PINNED_UNDER_ROOT_GROUP)
    pin = next(sb.world.posts[c] for c in post.children if sb.world.posts[c].pinned)
    answer = browser("bob").get(f"/api2/posts/{post.id}/comments", query_string="limit=25&pinned=true").json
    tree = answer["pinned_post_tree"]
    assert tree["post"]["id"] == post.id and [n["post"]["id"] for n in tree["children"]] == [pin.id]
    assert pin.id in [n["post"]["id"] for n in answer["post_tree"]["children"]]


def test_top_level_comments_name_the_post_as_parent_or_nothing_by_group(
    client: testing.TestClient, alice: Browser
) -> None:
    """PLATFORM.md: a top-level comment's ``parent_id`` is the post's id or ``""``; both are served."""
    parents = {}
    for slug in (BIG, "quiet-garden"):
        gid = group_id(client, slug)
        posts = [t["post"] for t in alice.data(f"/{slug}", query_string="s=best").json["pageProps"]["postTrees"]]
        post = next(p for p in posts if p["metadata"]["comments"] >= 2)
        tree = alice.get(f"/api2/posts/{post['id']}/comments", query_string=f"group-id={gid}&limit=25").json
        top = [node["post"] for node in tree["post_tree"]["children"]]
        parents[slug] = {c["parent_id"] for c in top}, post["id"]
        replies = [r["post"] for node in tree["post_tree"]["children"] for r in node["children"]]
        assert all(r["parent_id"] in {c["id"] for c in top} for r in replies)  # replies name their comment
    assert parents[BIG][0] == {parents[BIG][1]}
    assert parents["quiet-garden"][0] == {""}


def test_times_trim_their_fraction_and_last_comment_is_in_nanoseconds(alice: Browser) -> None:
    """PLATFORM.md: 1 to 6 fraction digits, trailing zeros trimmed; ``lastComment`` integer nanoseconds."""
    posts = [t["post"] for t in alice.data(f"/{BIG}", query_string="s=newest-cm").json["pageProps"]["postTrees"]]
    stamps = [p["createdAt"] for p in posts] + [p["updatedAt"] for p in posts]
    fractions = [stamp.rsplit(".", 1)[1][:-1] for stamp in stamps]
    assert all(stamp.endswith("Z") for stamp in stamps)
    assert all(1 <= len(f) <= 6 and f.isdigit() for f in fractions)
    assert all(f == "0" or not f.endswith("0") for f in fractions)
    last = [p["metadata"]["lastComment"] for p in posts if p["metadata"]["lastComment"]]
    assert last and all(type(n) is int and len(str(n)) == 19 and n > 2**53 for n in last)
    assert all(n % 1000 == 0 for n in last)  # kept in microseconds, written in nanoseconds


def test_every_malformed_create_is_refused_and_nothing_is_made(client: testing.TestClient, alice: Browser) -> None:
    """What the gateway could send wrong is refused by a 400, as the site refuses it, and makes nothing: a
    stand-in that took it would hide the gateway's mistake."""
    gid = group_id(client)
    post = new_post(alice, gid, "Root")
    comment = new_comment(alice, post["id"], post["id"]).json
    gone = new_comment(alice, post["id"], post["id"]).json
    assert alice.delete(f"/api2/posts/{gone['id']}").status_code == 200
    made = len(client.simulate_get("/__sandbox/created").json["created"])
    other_group = group_id(client, "night-owls")
    refused = [
        alice.post("/api2/posts", json={"post_type": "generic", "group_id": gid, "metadata": {"title": "  "}}),
        alice.post("/api2/posts", json={"post_type": "poll", "group_id": gid, "metadata": {"title": "x"}}),
        new_comment(alice, comment["id"], comment["id"]),  # a comment is not a root
        new_comment(alice, post["id"], post["id"], group_id=other_group),  # the post is in another group
        new_comment(alice, post["id"], gone["id"]),  # a deleted parent
        new_comment(alice, post["id"], post["id"], content=" \n "),  # nothing to say
    ]
    assert [answer.status_code for answer in refused] == [400] * len(refused), [a.text for a in refused]
    assert len(client.simulate_get("/__sandbox/created").json["created"]) == made


def test_the_first_of_several_labels_is_taken_and_a_comment_has_its_posts(
    client: testing.TestClient, alice: Browser
) -> None:
    gid = group_id(client)
    labels = [label["id"] for label in alice.get(f"/api2/groups/{gid}/labels").json["labels"]]
    post = new_post(alice, gid, "Labelled", labels=f"{labels[3]}, {labels[1]}")
    assert post["label_id"] == labels[3]
    comment = new_comment(alice, post["id"], post["id"]).json
    assert comment["label_id"] == labels[3]


def test_ones_own_new_post_is_read(client: testing.TestClient, alice: Browser) -> None:
    post = new_post(alice, group_id(client), "Mine, so read")
    unread = alice.data(f"/{BIG}", query_string=f"group={BIG}&s=newest&fl=unr").json["pageProps"]["postTrees"]
    assert post["id"] not in {tree["post"]["id"] for tree in unread}
    newest = alice.data(f"/{BIG}", query_string=f"group={BIG}&s=newest").json["pageProps"]["postTrees"]
    assert post["id"] in {tree["post"]["id"] for tree in newest}


def test_a_deleted_comment_is_recounted_replies_aside_and_the_last_comment_may_be_a_reply(
    client: testing.TestClient, clock: Clock, alice: Browser
) -> None:
    post = new_post(alice, group_id(client), "Counted")
    first = new_comment(alice, post["id"], post["id"], "first").json
    clock.advance(1)
    reply = new_comment(alice, post["id"], first["id"], "reply").json
    clock.advance(1)
    second = new_comment(alice, post["id"], post["id"], "second").json
    assert alice.delete(f"/api2/posts/{second['id']}").status_code == 200
    meta = alice.get(f"/api2/posts/{post['id']}/comments").json["post_tree"]["post"]["metadata"]
    assert meta["comments"] == 1  # top-level comments only: the reply is not counted (PLATFORM.md)
    assert meta["last_comment_id"] == reply["id"]  # the newest live one, a reply included


def test_comments_are_asked_of_a_post_in_its_own_group(client: testing.TestClient, alice: Browser) -> None:
    gid = group_id(client)
    post = new_post(alice, gid, "Asked for")
    comment = new_comment(alice, post["id"], post["id"]).json
    assert alice.get(f"/api2/posts/{post['id']}/comments", query_string=f"group-id={gid}").status_code == 200
    for path, query in (
        (f"/api2/posts/{post['id']}/comments", f"group-id={group_id(client, 'night-owls')}"),
        (f"/api2/posts/{comment['id']}/comments", ""),
    ):
        answer = alice.get(path, query_string=query)
        assert (answer.status_code, answer.json) == (404, {"message": "not found"})


def test_the_last_page_of_comments_ends_exactly_and_tail_ignores_the_cursor(
    client: testing.TestClient, clock: Clock, alice: Browser
) -> None:
    post = new_post(alice, group_id(client), "Paged")
    made = []
    for n in range(3):
        clock.advance(1)
        made.append(new_comment(alice, post["id"], post["id"], f"c{n}").json["id"])
    url = f"/api2/posts/{post['id']}/comments"

    def ask(query: str) -> tuple[list[str], int, bool]:
        answer = alice.get(url, query_string=query).json
        return [c["post"]["id"] for c in answer["post_tree"]["children"]], answer["last"], answer["meta"]["has_more"]

    assert ask("limit=2")[0] == made[:2] and ask("limit=2")[2] is True
    everything, last, more = ask("limit=3")
    assert (everything, more) == (made, False)  # exactly the limit left: no next page
    assert ask(f"limit=3&created-gt={last}") == ([], last, False)  # past the end: the cursor stays
    assert ask(f"limit=2&tail=true&created-gt={last}")[0] == made[1:]  # the newest page whatever the cursor
    assert ask("limit=2&tail=TRUE")[0] == made[1:] and ask("limit=2&tail=false")[0] == made[:2]
