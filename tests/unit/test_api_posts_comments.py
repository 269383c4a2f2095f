"""Post detail, comments, and publishing as the connected account, with Idempotency-Key."""

from __future__ import annotations

import pytest

from community_api.errors import PlatformUnavailable
from fakes.platform_seed import GroupRec, LabelRec, platform_id
from tests.unit.world_support import Ready

FEED = "/v1/groups/builders-club/posts"
GROUP_ID = platform_id("grp-builders-club")


def some_post_with_comments(ready: Ready) -> dict:
    posts = ready.world.get(FEED, ready.key, params={"pages": "3"}).json["posts"]
    return next(p for p in posts if p["commentCount"] >= 3)


def test_a_pinned_comment_says_so_in_its_place(ready: Ready) -> None:
    world = ready.world.gateway.world
    pinned = next(c for c in world.comments.values() if c.pinned and world.posts[c.post_id].group_id == GROUP_ID)
    detail = ready.world.get(f"/v1/posts/{pinned.post_id}", ready.key).json
    flags = [(c["id"], c["pinned"]) for c in detail["comments"] if c["parentId"] is None]
    assert (pinned.id, True) in flags and [f for _, f in flags].count(True) == 1
    listed = ready.world.get(f"/v1/posts/{pinned.post_id}/comments", ready.key).json["comments"]
    assert listed == detail["comments"]


def test_post_detail_has_all_comments_flat(ready: Ready) -> None:
    post = some_post_with_comments(ready)
    detail = ready.world.get(f"/v1/posts/{post['id']}", ready.key).json
    assert detail["post"]["id"] == post["id"]
    comments = detail["comments"]
    assert sum(c["parentId"] is None for c in comments) == post["commentCount"]  # top-level, as the platform counts
    ids = {c["id"] for c in comments}
    for comment in comments:
        assert comment["postId"] == post["id"]
        assert comment["parentId"] is None or comment["parentId"] in ids
        assert comment["authorId"] == comment["author"]["id"]
        assert set(comment) == {
            "id",
            "postId",
            "parentId",
            "authorId",
            "author",
            "content",
            "createdAt",
            "upvotes",
            "pinned",
        }
    listed = ready.world.get(f"/v1/posts/{post['id']}/comments", ready.key).json["comments"]
    assert listed == comments


def test_unknown_post_is_404(ready: Ready) -> None:
    assert ready.world.get("/v1/posts/does-not-exist", ready.key).status_code == 404
    assert ready.world.get("/v1/posts/does-not-exist/comments", ready.key).status_code == 404


def test_create_post_answers_201_with_null_author(ready: Ready) -> None:
    world = ready.world
    result = world.post(FEED, ready.key, {"title": "Hello", "content": "First!", "label": "Wins"})
    assert result.status_code == 201
    post = result.json
    assert post["title"] == "Hello" and post["content"] == "First!"
    assert post["author"] is None and post["authorId"] is None
    labels = world.get("/v1/groups/builders-club", ready.key).json["labels"]
    wins = next(label for label in labels if label["name"] == "Wins")
    assert post["labelId"] == wins["id"]
    created = world.gateway.created_posts()
    assert [p.id for p in created] == [post["id"]]
    by_id = world.post(FEED, ready.key, {"title": "By id", "label": wins["id"]})
    assert by_id.json["labelId"] == wins["id"]
    plain = world.post(FEED, ready.key, {"title": "Only a title"})
    # Without a label the platform files the post under the group's first label.
    assert plain.status_code == 201 and plain.json["labelId"] == labels[0]["id"]


def test_unknown_label_is_400_and_lists_labels(ready: Ready) -> None:
    result = ready.world.post(FEED, ready.key, {"title": "x", "label": "Nope"})
    assert result.status_code == 400
    assert {"General", "Wins", "Questions", "Resources"} == {
        label["name"] for label in result.json["error"]["details"]["allowed"]
    }
    assert ready.world.gateway.created_posts() == []


def builders_club(ready: Ready) -> GroupRec:
    """The fake platform's record of builders-club, whose labels a test may add to."""
    return next(g for g in ready.world.gateway.world.groups.values() if g.slug == "builders-club")


@pytest.mark.parametrize(
    "typed",
    [
        "\u00e9v\u00e9nements",  # lower case
        "E\u0301ve\u0301nements",  # É and é each as a letter and a combining accent
        "  \u00c9V\u00c9NEMENTS ",
        "\uff25\u0301v\u00e9nements",  # a full-width E (an input method), then its accent
    ],
)
def test_a_label_is_found_by_its_name_however_its_letters_are_written(ready: Ready, typed: str) -> None:
    """Before, the name was compared case folded only: "Événements" with its accents written as combining
    marks (as some keyboards write them) was an unknown label."""
    group = builders_club(ready)
    group.labels.append(LabelRec("e" * 32, "\u00c9v\u00e9nements"))  # as the platform names it: é one character
    result = ready.world.post(FEED, ready.key, {"title": "See you there", "label": typed})
    assert result.status_code == 201, result.json
    assert result.json["labelId"] == "e" * 32


def test_a_label_name_is_case_folded_not_lowered(ready: Ready) -> None:
    """``ß`` folds to ``ss`` (lower case leaves it): a label named "Straße" is the one typed "STRASSE"."""
    group = builders_club(ready)
    group.labels.append(LabelRec("f" * 32, "Straße"))
    result = ready.world.post(FEED, ready.key, {"title": "Road works", "label": "STRASSE"})
    assert result.status_code == 201, result.json
    assert result.json["labelId"] == "f" * 32


def test_a_name_two_labels_answer_to_picks_neither(ready: Ready) -> None:
    """Two labels whose names differ only in case: a name matching both is refused listing them (by id
    each may still be chosen), never a guess."""
    group = builders_club(ready)
    group.labels += [LabelRec("a" * 32, "Release"), LabelRec("b" * 32, "RELEASE")]
    refused = ready.world.post(FEED, ready.key, {"title": "v2", "label": "release"})
    assert refused.status_code == 400 and refused.json["error"]["details"]["field"] == "label", refused.text
    assert {"id": "b" * 32, "name": "RELEASE"} in refused.json["error"]["details"]["allowed"]
    chosen = ready.world.post(FEED, ready.key, {"title": "v2", "label": "b" * 32})
    assert chosen.status_code == 201 and chosen.json["labelId"] == "b" * 32
    assert len(ready.world.gateway.created_posts()) == 1


def test_delete_post_then_it_is_gone(ready: Ready) -> None:
    world = ready.world
    post = world.post(FEED, ready.key, {"title": "Short lived"}).json
    assert world.delete(f"/v1/posts/{post['id']}", ready.key).status_code == 204
    assert world.get(f"/v1/posts/{post['id']}", ready.key).status_code == 404
    assert world.delete(f"/v1/posts/{post['id']}", ready.key).status_code == 404


def test_cannot_delete_someone_elses_post(ready: Ready) -> None:
    post = some_post_with_comments(ready)
    if post["author"]["handle"] == "alice":
        pytest.skip("seed gave alice this post")
    result = ready.world.delete(f"/v1/posts/{post['id']}", ready.key)
    assert result.status_code == 403


def test_comment_and_reply(ready: Ready) -> None:
    world = ready.world
    post = some_post_with_comments(ready)
    top = world.post(f"/v1/posts/{post['id']}/comments", ready.key, {"content": "Nice"})
    assert top.status_code == 201
    assert top.json["postId"] == post["id"] and top.json["parentId"] is None
    reply = world.post(f"/v1/posts/{post['id']}/comments", ready.key, {"content": "Re", "parentId": top.json["id"]})
    assert reply.status_code == 201 and reply.json["parentId"] == top.json["id"]
    comments = world.get(f"/v1/posts/{post['id']}/comments", ready.key).json["comments"]
    assert {top.json["id"], reply.json["id"]} <= {c["id"] for c in comments}
    assert world.delete(f"/v1/comments/{reply.json['id']}", ready.key).status_code == 204
    comments = world.get(f"/v1/posts/{post['id']}/comments", ready.key).json["comments"]
    assert reply.json["id"] not in {c["id"] for c in comments}


def test_reply_to_a_comment_of_another_post_is_refused(ready: Ready) -> None:
    world = ready.world
    posts = world.get(FEED, ready.key, params={"pages": "3"}).json["posts"]
    with_comments = [p for p in posts if p["commentCount"] >= 1][:2]
    other_comment = world.get(f"/v1/posts/{with_comments[1]['id']}/comments", ready.key).json["comments"][0]
    result = world.post(
        f"/v1/posts/{with_comments[0]['id']}/comments", ready.key, {"content": "x", "parentId": other_comment["id"]}
    )
    assert result.status_code == 400
    assert world.gateway.created_comments() == []


def test_delete_comment_with_a_post_id_is_404(ready: Ready) -> None:
    post = some_post_with_comments(ready)
    assert ready.world.delete(f"/v1/comments/{post['id']}", ready.key).status_code == 404


@pytest.mark.parametrize("body", [{}, {"content": ""}, {"content": 1}, {"content": "x", "parentId": 5}, {"text": "x"}])
def test_comment_body_validation(ready: Ready, body: dict) -> None:
    post = some_post_with_comments(ready)
    assert ready.world.post(f"/v1/posts/{post['id']}/comments", ready.key, body).status_code == 400


def test_idempotency_key_replays_the_first_answer(ready: Ready) -> None:
    world = ready.world
    headers = {"Idempotency-Key": "post-1"}
    first = world.post(FEED, ready.key, {"title": "Once"}, headers=headers)
    second = world.post(FEED, ready.key, {"title": "Once"}, headers=headers)
    assert first.status_code == second.status_code == 201
    assert first.json == second.json
    assert second.headers.get("Idempotent-Replayed") == "true"
    assert len(world.gateway.created_posts()) == 1
    different = world.post(FEED, ready.key, {"title": "Twice?"}, headers=headers)
    assert different.status_code == 409
    assert different.json["error"]["details"] == {"reason": "different_request"}  # a client's bug: not to retry
    assert len(world.gateway.created_posts()) == 1
    world.clock.advance(hours=24, seconds=1)
    later = world.post(FEED, ready.key, {"title": "Once"}, headers=headers)
    assert later.status_code == 201 and later.json["id"] != first.json["id"]


def test_idempotency_after_a_refusal_lets_the_retry_act(ready: Ready) -> None:
    world = ready.world
    headers = {"Idempotency-Key": "retry-me"}
    assert world.post(FEED, ready.key, {"title": "x", "label": "Nope"}, headers=headers).status_code == 400
    assert world.post(FEED, ready.key, {"title": "x", "label": "Nope"}, headers=headers).status_code == 400
    ok = world.post(FEED, ready.key, {"title": "x"}, headers={"Idempotency-Key": "fresh"})
    assert ok.status_code == 201


def test_idempotency_after_a_timeout_never_double_posts(ready: Ready) -> None:
    world = ready.world
    headers = {"Idempotency-Key": "slow"}
    world.gateway.fail_next("create_post", PlatformUnavailable("no answer in time"))
    first = world.post(FEED, ready.key, {"title": "Maybe"}, headers=headers)
    assert first.status_code == 503
    again = world.post(FEED, ready.key, {"title": "Maybe"}, headers=headers)
    assert again.status_code == 503 and again.headers.get("Idempotent-Replayed") == "true"
    assert world.gateway.created_posts() == []


@pytest.mark.parametrize("bad", ["", "x" * 256, "has space", "naïve", "tab\there", "a,b", ","])
def test_bad_idempotency_keys(ready: Ready, bad: str) -> None:
    result = ready.world.post(FEED, ready.key, {"title": "x"}, headers={"Idempotency-Key": bad})
    assert result.status_code == 400 and result.json["error"]["code"] == "invalid_request"
    assert result.json["error"]["message"].startswith("Idempotency-Key must be 1 to 255 visible ASCII characters")
    # A comma is what a header sent twice arrives as: the refusal says so.
    assert ("sent twice" in result.json["error"]["message"]) is ("," in bad)
    assert ready.world.gateway.created_posts() == []


@pytest.mark.parametrize("good", ["x", "x" * 255, "550e8400-e29b-41d4-a716-446655440000", '"quoted"', "a;b=c"])
def test_good_idempotency_keys(ready: Ready, good: str) -> None:
    result = ready.world.post(FEED, ready.key, {"title": "x"}, headers={"Idempotency-Key": good})
    assert result.status_code == 201


def test_idempotency_keys_are_per_account(ready: Ready) -> None:
    world = ready.world
    world.add_account("two@example.com", "another long password")
    other = world.sign_in("two@example.com", "another long password")
    world.link(other, "bob")
    other_key = world.mint(other, scopes=["posts:write", "posts:read"])["secret"]
    headers = {"Idempotency-Key": "shared"}
    mine = world.post(FEED, ready.key, {"title": "Mine"}, headers=headers).json
    theirs = world.post(FEED, other_key, {"title": "Mine"}, headers=headers)
    assert theirs.status_code == 201 and theirs.json["id"] != mine["id"]


def test_an_idempotency_key_used_again_on_another_connection_is_a_different_request(ready: Ready) -> None:
    """The key is the account's, the post is a connection's: the same body on bob's connection is not a
    retry of alice's post. Answering alice's post back would tell the caller that bob had posted it."""
    world = ready.world
    bob = world.link(ready.browser, "bob")
    headers = {"Idempotency-Key": "per-connection"}
    alices = world.post(FEED, ready.key, {"title": "Mine"}, headers=headers)
    assert alices.status_code == 201, alices.text
    bobs = world.post(FEED, ready.key, {"title": "Mine"}, headers={**headers, "X-Community-Connection": bob["id"]})
    assert bobs.status_code == 409 and bobs.json["error"]["details"] == {"reason": "different_request"}
    assert [post.id for post in world.gateway.created_posts()] == [alices.json["id"]]


@pytest.mark.parametrize("group", ["quiet-garden", "design-guild", "no-such-group"])
def test_a_post_looked_for_in_another_group_is_not_found_there_and_the_answer_says_which(
    ready: Ready, group: str
) -> None:
    # The group is optional (it spares a look-up); given, the post is looked for there. One that is in
    # another group is not found *there*: the answer names the group, so the caller knows to leave it out.
    world = ready.world
    post = some_post_with_comments(ready)
    assert world.get(f"/v1/posts/{post['id']}", ready.key).status_code == 200
    for answer in (
        world.get(f"/v1/posts/{post['id']}", ready.key, params={"group": group}),
        world.get(f"/v1/posts/{post['id']}/comments", ready.key, params={"group": group}),
        world.post(f"/v1/posts/{post['id']}/comments", ready.key, {"content": "hi"}, params={"group": group}),
    ):
        assert answer.status_code == 404 and answer.json["error"]["code"] == "not_found"
        message = answer.json["error"]["message"]
        assert f"post {post['id']} not found in group {group}" in message and "without" in message
    assert world.gateway.created_comments() == []
    # Without a group, an unknown post is simply not found.
    unknown = world.get(f"/v1/posts/{'f' * 32}", ready.key)
    assert unknown.status_code == 404 and "in group" not in unknown.json["error"]["message"]


def test_a_post_whose_label_could_not_be_read_was_not_sent_and_may_be_retried(ready: Ready) -> None:
    # A post given a label reads the group's labels first: that read timing out sent nothing.
    world = ready.world
    headers = {"Idempotency-Key": "post-label"}
    body = {"title": "Labelled", "label": "Wins"}
    world.gateway.fail_next("get_group", PlatformUnavailable("no answer in time"))
    failed = world.post(FEED, ready.key, body, headers=headers)
    assert failed.status_code == 503 and "outcomeUnknown" not in failed.json["error"]["details"]
    again = world.post(FEED, ready.key, body, headers=headers)
    assert again.status_code == 201
    assert [p.title for p in world.gateway.created_posts()] == ["Labelled"]


def test_a_503_that_knows_when_to_try_again_says_so_in_retry_after(ready: Ready) -> None:
    """No browser was free (``platform_client._no_browser``): the answer carries Retry-After, as a 429 does.
    The platform not answering in time gives no time to wait: no Retry-After then."""
    world = ready.world
    world.gateway.fail_next(
        "feed_pages", PlatformUnavailable("no browser is free: all 4 browsers are busy", retryAfter=5)
    )
    busy = world.get(FEED, ready.key)
    assert busy.status_code == 503 and busy.headers.get("Retry-After") == "5"
    assert busy.json["error"]["code"] == "platform_unavailable" and busy.json["error"]["details"] == {"retryAfter": 5}
    world.gateway.fail_next("feed_pages", PlatformUnavailable("no answer in time"))
    slow = world.get(FEED, ready.key)
    assert slow.status_code == 503 and "Retry-After" not in slow.headers and slow.json["error"]["details"] == {}


@pytest.mark.parametrize("wait", [True, 0, -3, 2.5, "5"])
def test_retry_after_is_only_ever_a_whole_number_of_seconds(ready: Ready, wait: object) -> None:
    ready.world.gateway.fail_next("feed_pages", PlatformUnavailable("no browser is free", retryAfter=wait))
    answer = ready.world.get(FEED, ready.key)
    assert answer.status_code == 503 and "Retry-After" not in answer.headers
