"""The account's safety through the API: the read pace per connection, and the platform's own 429.

On the fakes with a fake clock: 60 platform reads a minute per connection (a 30-page feed counts 30, a
post with its comments 2); the 61st is 429 ``rate_limited`` with the exact ``Retry-After``; the platform's
429 is passed on with its wait and holds every call of that connection, writes included."""

from __future__ import annotations

import pytest

from community_api import pace, platform_meter
from community_api.deps import on_platform
from community_api.errors import RateLimited
from community_api.model import Connection
from community_api.scopes import ALL_SCOPES
from tests.unit.world_support import PASSWORD, Ready, World, build_world

FEED = "/v1/groups/builders-club/posts"


@pytest.fixture
def paced() -> Ready:
    world: World = build_world(reads_per_minute=60)
    browser = world.sign_up()
    connection = world.link(browser)
    key = world.mint(browser, scopes=ALL_SCOPES)["secret"]
    return Ready(world, browser, connection, key)


def stored_connection(ready: Ready) -> Connection:
    """The connection as the store holds it, as a use case loads it before its platform step."""
    connection = ready.world.store.get_connection(ready.connection["id"])
    assert connection is not None
    return connection


def reads_left(ready: Ready) -> int:
    me = ready.world.client.simulate_get("/v1/me", headers=ready.browser.headers())
    return int(me.json["usage"]["platformReads"]["readsLeft"])


def test_the_61st_read_in_a_minute_is_refused_with_the_exact_retry_after(paced: Ready) -> None:
    world, key = paced.world, paced.key
    assert world.get(FEED, key, params={"pages": "30"}).status_code == 200  # 30 reads
    world.clock.advance(seconds=10.5)
    post = world.get(FEED, key).json["posts"][0]["id"]  # 31
    assert world.get(f"/v1/posts/{post}", key).status_code == 200  # 33: a post with its comments is two
    for _ in range(27):
        assert world.get("/v1/whoami", key).status_code == 200  # 60
    assert reads_left(paced) == 0
    refused = world.get("/v1/whoami", key)
    assert refused.status_code == 429
    assert refused.json["error"]["code"] == "rate_limited"
    # The 30 reads of the first second leave the window at 60 s: 49.5 s from now, rounded up.
    assert refused.headers["retry-after"] == "50" and refused.json["error"]["details"]["retryAfter"] == 50
    world.clock.advance(seconds=49)
    assert world.get("/v1/whoami", key).headers["retry-after"] == "1"
    world.clock.advance(seconds=1)
    assert world.get(FEED, key, params={"pages": "30"}).status_code == 200  # the window slid by 30
    assert world.get("/v1/whoami", key).status_code == 429


def test_the_platforms_429_is_passed_on_and_holds_the_connection(paced: Ready) -> None:
    world, key = paced.world, paced.key
    world.gateway.fail_next("whoami", RateLimited("slow down", retry_after=120, source="platform"))
    refused = world.get("/v1/whoami", key)
    assert refused.status_code == 429 and refused.headers["retry-after"] == "120"
    before = len(world.gateway.created_posts())
    world.clock.advance(seconds=30)
    for result in (world.get(FEED, key), world.post(FEED, key, {"title": "held"})):
        assert result.status_code == 429 and result.headers["retry-after"] == "90"
        assert result.json["error"]["details"]["reason"] == "platform_hold"
    assert len(world.gateway.created_posts()) == before  # nothing reached the platform
    me = world.client.simulate_get("/v1/me", headers=paced.browser.headers()).json["usage"]["platformReads"]
    assert me["heldUntil"] is not None
    world.clock.advance(seconds=90)
    assert world.get("/v1/whoami", key).status_code == 200


def test_a_held_dm_uses_no_quota(paced: Ready) -> None:
    world, key = paced.world, paced.key
    paced.world.deps.pace.hold(paced.connection["platformUserId"], 60)
    bob = world.gateway.user("bob")
    assert world.post("/v1/dms", key, {"to": bob.id, "content": "hi"}).status_code == 429
    dms = world.client.simulate_get("/v1/me", headers=paced.browser.headers()).json["usage"]["dms"]
    assert dms["sentLastHour"] == 0 and dms["nextAllowedAt"] is None


def test_every_link_to_one_platform_account_shares_its_pace_and_dm_quota(paced: Ready) -> None:
    """The platform counts reads, 429s and DMs by account. Two service accounts linking the same platform
    account (two teammates, or an account deleted and made again) must not get two paces of it."""
    world, key = paced.world, paced.key
    world.add_account("teammate@example.com", PASSWORD)
    other = world.sign_in("teammate@example.com")
    world.link(other)  # alice again, from another service account: another connection
    other_key = world.mint(other, scopes=ALL_SCOPES)["secret"]
    bob = world.gateway.user("bob")

    assert world.post("/v1/dms", key, {"to": bob.id, "content": "one"}).status_code == 201
    second = world.post("/v1/dms", other_key, {"to": bob.id, "content": "two"})
    assert second.status_code == 429 and second.json["error"]["code"] == "rate_limited"
    assert [m.content for m in world.gateway.sent_messages()] == ["one"]

    assert world.get(FEED, key, params={"pages": "30"}).status_code == 200
    assert world.get(FEED, key, params={"pages": "30"}).status_code == 200  # 60 reads of alice's
    assert world.get("/v1/whoami", other_key).status_code == 429
    assert reads_left(paced) == 0

    world.clock.advance(seconds=61)
    world.gateway.fail_next("whoami", RateLimited("slow down", retry_after=120, source="platform"))
    assert world.get("/v1/whoami", other_key).status_code == 429
    held = world.get("/v1/whoami", key)  # the platform told alice, not one link of hers, to slow down
    assert held.status_code == 429 and held.json["error"]["details"]["reason"] == "platform_hold"


def test_a_post_named_by_its_label_counts_the_read_that_finds_the_label(paced: Ready) -> None:
    """Naming the label by its name reads the group and its labels from the platform first: two reads,
    counted and paced like any other; a post without a label reads nothing."""
    world, key = paced.world, paced.key
    assert world.post(FEED, key, {"title": "no label"}).status_code == 201
    assert reads_left(paced) == 60
    assert world.post(FEED, key, {"title": "a win", "label": "Wins"}).status_code == 201
    assert reads_left(paced) == 58
    assert world.get(FEED, key, params={"pages": "30"}).status_code == 200
    assert world.get(FEED, key, params={"pages": "27"}).status_code == 200
    assert reads_left(paced) == 1
    before = len(world.gateway.created_posts())
    refused = world.post(FEED, key, {"title": "another win", "label": "Wins"})
    assert refused.status_code == 429 and refused.json["error"]["details"]["reason"] == "read_pace"
    assert len(world.gateway.created_posts()) == before
    assert world.post(FEED, key, {"title": "still fine"}).status_code == 201  # a write reads nothing


def writes_left(ready: Ready) -> int:
    me = ready.world.client.simulate_get("/v1/me", headers=ready.browser.headers())
    return int(me.json["usage"]["platformWrites"]["writesLeft"])


def test_the_21st_write_in_a_minute_is_refused_with_the_exact_retry_after(paced: Ready) -> None:
    """Posts, comments and deletions share 20 platform writes a minute (others saw the platform answer 429
    past 25 to 30); past them a write is 429 ``write_pace`` before the platform sees it, and reads go on."""
    world, key = paced.world, paced.key
    post_id = world.get(FEED, key).json["posts"][0]["id"]
    mine = []
    for i in range(8):
        mine.append(world.post(FEED, key, {"title": f"post {i}"}).json["id"])  # writes at 0 to 7 s
        world.clock.advance(seconds=1)
    world.clock.advance(seconds=0.5)  # 8.5 s
    comments = [world.post(f"/v1/posts/{post_id}/comments", key, {"content": f"c{i}"}) for i in range(8)]
    assert [c.status_code for c in comments] == [201] * 8
    assert world.delete(f"/v1/posts/{mine[0]}", key).status_code == 204
    assert world.delete(f"/v1/comments/{comments[0].json['id']}", key).status_code == 204
    assert writes_left(paced) == 2
    assert world.post(FEED, key, {"title": "19"}).status_code == 201
    assert world.post(f"/v1/posts/{post_id}/comments", key, {"content": "20"}).status_code == 201
    assert writes_left(paced) == 0
    posts, comments_made = len(world.gateway.created_posts()), len(world.gateway.created_comments())
    for refused in (
        world.post(FEED, key, {"title": "21"}),
        world.post(f"/v1/posts/{post_id}/comments", key, {"content": "21"}),
        world.delete(f"/v1/posts/{mine[1]}", key),
    ):
        assert refused.status_code == 429 and refused.json["error"]["code"] == "rate_limited"
        assert refused.json["error"]["details"]["reason"] == "write_pace"
        # The write of 0 s leaves the window when it is over 60 s old: 51.5 s from 8.5 s, rounded up.
        assert refused.headers["retry-after"] == "52"
    assert (len(world.gateway.created_posts()), len(world.gateway.created_comments())) == (posts, comments_made)
    assert world.get(f"/v1/posts/{mine[1]}", key).status_code == 200  # not deleted; and reads go on
    me = world.client.simulate_get("/v1/me", headers=paced.browser.headers()).json["usage"]["platformWrites"]
    assert me == {"writesPerMinute": 20, "writesLastMinute": 20, "writesLeft": 0, "nextWriteAt": me["nextWriteAt"]}
    assert me["nextWriteAt"] is not None
    world.clock.advance(seconds=51)
    assert world.post(FEED, key, {"title": "late"}).headers["retry-after"] == "1"
    world.clock.advance(seconds=1)
    assert world.post(FEED, key, {"title": "on time"}).status_code == 201


def test_a_dm_to_a_member_writes_twice_and_a_refused_one_uses_no_dm_quota(paced: Ready) -> None:
    world, key = paced.world, paced.key
    conversation = world.get("/v1/dms", key).json["conversations"][0]["id"]
    for i in range(19):
        assert world.post(FEED, key, {"title": f"post {i}"}).status_code == 201
    bob = world.gateway.user("bob")
    refused = world.post("/v1/dms", key, {"to": bob.id, "content": "hi"})  # opens the chat, then sends: 2
    assert refused.status_code == 429 and refused.json["error"]["details"]["reason"] == "write_pace"
    assert world.gateway.sent_messages() == []
    dms = world.client.simulate_get("/v1/me", headers=paced.browser.headers()).json["usage"]["dms"]
    assert dms["sentLastHour"] == 0 and dms["nextAllowedAt"] is None
    sent = world.post("/v1/dms", key, {"conversationId": conversation, "content": "hi"})  # a known one: 1
    assert sent.status_code == 201 and writes_left(paced) == 0


def test_a_list_of_groups_counts_every_request_it_sends(paced: Ready) -> None:
    """The platform lists an account's groups without their labels: one request for the list, then one per
    group. Each is counted; one past the pace is refused (429 ``read_pace``) before it is sent, with the wait
    after which the whole call, sent again, fits."""
    world, key = paced.world, paced.key
    groups = world.get("/v1/groups", key)
    assert groups.status_code == 200
    asked = 1 + len(groups.json["groups"])
    assert asked == 3 and reads_left(paced) == 57  # alice is in two groups
    world.clock.advance(seconds=100)  # a new minute
    for _ in range(4):
        assert world.get("/v1/whoami", key).status_code == 200  # reads at 0, 1, 2 and 3 s
        world.clock.advance(seconds=1)
    world.clock.advance(seconds=6)
    assert world.get(FEED, key, params={"pages": "30"}).status_code == 200  # at 10 s
    assert world.get(FEED, key, params={"pages": "25"}).status_code == 200
    assert reads_left(paced) == 1
    world.clock.advance(seconds=10)
    refused = world.get("/v1/groups", key)  # at 20 s: the list fits, its two groups' labels do not
    assert refused.status_code == 429
    error = refused.json["error"]
    assert error["details"]["reason"] == "read_pace"
    # Sent again, the call needs three reads: the read of 2 s must leave the window too (at 63 s), not only
    # those of 0 and 1 s that its two refused reads would need.
    assert error["details"]["retryAfter"] == 43 and refused.headers["retry-after"] == "43"
    assert reads_left(paced) == 0  # the list was sent, and counts
    world.clock.advance(seconds=43)
    assert world.get("/v1/groups", key).status_code == 200


def test_a_call_larger_than_the_whole_pace_can_pass() -> None:
    """An account in more groups than the pace allows reads a minute: its list is one call taking the whole
    budget, as a feed of more pages than the pace does, never refused forever."""
    world = build_world(reads_per_minute=2)
    browser = world.sign_up()
    world.link(browser)
    key = world.mint(browser, scopes=ALL_SCOPES)["secret"]
    listed = world.get("/v1/groups", key)  # the list and two groups' labels: three requests
    assert listed.status_code == 200 and len(listed.json["groups"]) == 2
    refused = world.get("/v1/whoami", key)
    assert refused.status_code == 429 and refused.headers["retry-after"] == "61"
    world.clock.advance(seconds=61)
    assert world.get("/v1/groups", key).status_code == 200


def test_a_feed_walked_by_date_refused_part_way_waits_for_the_whole_walk(paced: Ready) -> None:
    """A feed with ``since`` reads its pages in growing batches (1, 2, 4, 8). Refused at the fourth, the
    wait is for the whole walk, which a retry reads again (15 reads), not for the refused batch alone."""
    world, key = paced.world, paced.key
    for _ in range(3):
        assert world.get("/v1/whoami", key).status_code == 200  # 3 reads at 0 s
    world.clock.advance(seconds=5)
    assert world.get(FEED, key, params={"pages": "30"}).status_code == 200  # 30 at 5 s
    for _ in range(13):
        assert world.get("/v1/whoami", key).status_code == 200  # 46 in all
    world.clock.advance(seconds=5)
    walk = {"since": "2026-01-01", "pages": "30"}
    refused = world.get(FEED, key, params=walk)  # batches of 1, 2 and 4 pages fit, the 8 of the fourth not
    assert refused.status_code == 429 and refused.json["error"]["details"]["reason"] == "read_pace"
    assert reads_left(paced) == 60 - 46 - 7
    # Eight more alone would fit once the reads of 0 s leave (51 s); the walk's fifteen need those of 5 s
    # gone too: 56 s.
    assert refused.headers["retry-after"] == "56"
    world.clock.advance(seconds=56)
    walked = world.get(FEED, key, params=walk)
    assert walked.status_code == 200 and walked.json["pagesFetched"] == 8


def test_an_inbox_scan_refused_part_way_waits_for_the_whole_scan(paced: Ready) -> None:
    """``awaitingReply`` scans inbox pages one request each; refused at the second, the wait covers both."""
    world, key = paced.world, paced.key
    assert world.get("/v1/whoami", key).status_code == 200  # 1 read at 0 s
    world.clock.advance(seconds=5)
    assert world.get(FEED, key, params={"pages": "30"}).status_code == 200
    assert world.get(FEED, key, params={"pages": "28"}).status_code == 200  # 59 in all, at 5 s
    world.clock.advance(seconds=5)
    refused = world.get("/v1/dms", key, params={"awaitingReply": "true"})
    assert refused.status_code == 429 and refused.json["error"]["details"]["reason"] == "read_pace"
    # One more read alone would fit once the read of 0 s leaves (51 s); the scan's two need 56 s.
    assert refused.headers["retry-after"] == "56"


@pytest.mark.parametrize(("seconds", "retry_after"), [(-5.0, 1), (0.0, 1), (0.2, 1), (1.0, 1), (1.01, 2), (59.5, 60)])
def test_a_hold_asks_for_whole_seconds_and_never_fewer_than_one(seconds: float, retry_after: int) -> None:
    """A hold that ends in a fraction of a second (or has just ended) still asks for one: ``Retry-After: 0``
    would have a client retry at once, in a loop, while the hold lasts."""
    refusal = pace.held_refusal(seconds)
    assert refusal.retry_after == retry_after and refusal.details["retryAfter"] == retry_after
    assert refusal.details["reason"] == "platform_hold"
    assert f"held for {retry_after} s" in refusal.message


def test_a_step_refused_part_way_by_its_own_meter_waits_for_the_whole_request(paced: Ready) -> None:
    """A later step of a request (a feed's fourth batch) sends more than it was admitted for (a page asked
    again): the meter refuses the extra requests unsent, and the wait covers the earlier steps too, which a
    retry sends again."""
    world, key = paced.world, paced.key
    for _ in range(3):
        assert world.get("/v1/whoami", key).status_code == 200  # 3 reads at 0 s
    world.clock.advance(seconds=5)
    assert world.get(FEED, key, params={"pages": "30"}).status_code == 200  # 30 at 5 s
    for _ in range(13):
        assert world.get("/v1/whoami", key).status_code == 200  # 46 in all
    world.clock.advance(seconds=5)
    connection = stored_connection(paced)
    with on_platform(world.deps, connection, reads=7):  # the earlier steps: 7 reads at 10 s
        platform_meter.spend(reads=7)
    with pytest.raises(RateLimited) as refused, on_platform(world.deps, connection, reads=1, counted=7):
        platform_meter.spend(reads=9)  # one paid for, eight more: past the pace
    assert refused.value.details["reason"] == "read_pace"
    # Eight more alone would fit once the reads of 0 s leave (51 s); the request's sixteen need those of 5 s
    # gone too: 56 s.
    assert refused.value.retry_after == 56
    assert reads_left(paced) == 60 - 46 - 8


@pytest.mark.parametrize("what", ["group", "post", "thread"])
def test_a_read_of_two_requests_with_one_read_left_is_refused_before_either_is_sent(paced: Ready, what: str) -> None:
    """A group (with its labels), a post (with its comments) and a DM thread (with the inbox page that gives
    its details) are two platform requests each, admitted together: with one read left, neither is sent."""
    world, key = paced.world, paced.key
    post = world.get(FEED, key).json["posts"][0]["id"]
    conversation = world.get("/v1/dms", key).json["conversations"][0]["id"]
    path = {"group": "/v1/groups/builders-club", "post": f"/v1/posts/{post}", "thread": f"/v1/dms/{conversation}"}
    while reads_left(paced) > 1:
        assert world.get("/v1/whoami", key).status_code == 200
    refused = world.get(path[what], key)
    assert refused.status_code == 429 and refused.json["error"]["details"]["reason"] == "read_pace"
    assert reads_left(paced) == 1  # nothing was sent
    world.clock.advance(seconds=refused.json["error"]["details"]["retryAfter"])
    assert world.get(path[what], key).status_code == 200
    assert reads_left(paced) == 58


def test_nothing_a_gateway_sends_outside_a_call_is_counted_after_one(paced: Ready) -> None:
    """The meter of a call ends with it: a request the gateway sends later on the same thread outside any
    call (signing in, to link) counts against no pace."""
    world = paced.world
    connection = stored_connection(paced)
    with on_platform(world.deps, connection, reads=1):
        platform_meter.spend(reads=1)
    assert reads_left(paced) == 59
    platform_meter.spend(reads=5)
    assert reads_left(paced) == 59


@pytest.mark.parametrize("seconds", [0, 0.4])
def test_the_platforms_429_asks_for_at_least_a_second(paced: Ready, seconds: float) -> None:
    """A wait of less than a second (a Retry-After of 0 the platform sent) is passed on as one: a client
    told 0 would ask again at once."""
    world, key = paced.world, paced.key
    world.gateway.fail_next("whoami", RateLimited("slow down", retry_after=seconds, source="platform"))  # type: ignore[arg-type]
    refused = world.get("/v1/whoami", key)
    assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
    assert refused.json["error"]["details"]["retryAfter"] == 1
