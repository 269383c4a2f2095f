"""DMs: inbox paging, threads, read state, sending, chat requests and the anti-spam."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from falcon import testing

from tests.sandbox.conftest import Browser, Clock, group_id, user_id


def inbox(b: Browser, offset: int = 0, limit: int = 30, unread_only: bool = False) -> list[dict]:
    q = f"offset={offset}&limit={limit}&last=true&unread-only={'true' if unread_only else 'false'}"
    return b.get("/api2/self/chat-channels", query_string=q).json["channels"] or []  # past the end: null


def all_channels(b: Browser) -> list[dict]:
    out: list[dict] = []
    offset = 0
    for _ in range(100):  # bounded: an offset that is not honoured fails the test rather than hangs it
        page = inbox(b, offset)
        if not page:
            return out
        out += page
        offset += len(page)
    raise AssertionError("the inbox never came to an end")


def channel_with(b: Browser, handle: str) -> dict:
    """The viewer's channel with a fixed user, named by handle (or, in carol's lean channels, first name)."""
    return next(c for c in all_channels(b) if c["user"].get("name", c["user"]["first_name"].lower()) == handle)


def stranger_to(client: testing.TestClient, b: Browser) -> dict:
    """A seeded member of builders-club (no sign-in of their own) with whom ``b`` has no channel yet."""
    members = [
        u
        for u in client.simulate_get("/__sandbox/users").json["users"]
        if u["email"] is None and "builders-club" in u["groups"]
    ]
    return next(u for u in members if all(u["id"] not in c["user_ids"] for c in all_channels(b)))


def test_inbox_is_big_ordered_and_mixed(alice: Browser, client: testing.TestClient) -> None:
    channels = all_channels(alice)
    me = user_id(client, "alice")
    assert 190 <= len(channels) <= 210 and len({c["id"] for c in channels}) == len(channels)
    updated = [c["updated_at"] for c in channels]
    assert updated == sorted(updated, reverse=True)
    c = channels[0]
    assert set(c["user"]) >= {"id", "name", "first_name", "last_name"} and me in c["user_ids"]
    assert set(c["last_message"]["metadata"]) >= {"content", "src", "dst"}
    from_me = sum(c["last_message"]["metadata"]["src"] == me for c in channels)
    assert 20 < from_me < len(channels) - 20
    unread = [c for c in channels if c["metadata"]["num_unread"] > 0]
    assert unread and all(c["last_message"]["metadata"]["src"] != me for c in unread)
    assert {c["id"] for c in all_unread(alice)} == {c["id"] for c in unread}


def test_carol_sees_the_other_member_only_as_platform_md_promises(
    client: testing.TestClient, browser: Callable[..., Browser]
) -> None:
    """PLATFORM.md: ``user: {first_name, last_name, …}`` beside ``user_ids``; no id or handle in carol's."""
    channels = all_channels(browser("carol"))
    assert channels
    for channel in channels:
        assert "id" not in channel["user"] and "name" not in channel["user"]
        assert {"first_name", "last_name"} <= set(channel["user"])
        assert user_id(client, "carol") in channel["user_ids"] and len(set(channel["user_ids"])) == 2
    names = {(c["user"]["first_name"], c["user"]["last_name"]) for c in channels}
    assert {("Alice", "Andersen"), ("Bob", "Brennan")} <= names


def all_unread(b: Browser) -> list[dict]:
    return inbox(b, 0, 30, True) + inbox(b, 30, 30, True) + inbox(b, 60, 30, True)


def test_inbox_limit_over_30_is_400(alice: Browser) -> None:
    r = alice.get("/api2/self/chat-channels", query_string="offset=0&limit=31")
    assert r.status_code == 400 and r.json == {"message": "invalid limit"}


def test_long_thread_pages_backwards_around_an_anchor(alice: Browser) -> None:
    """PLATFORM.md: ``before``/``after`` are counts; older messages are read around the oldest seen."""
    bob = channel_with(alice, "bob")
    url = f"/api2/channels/{bob['id']}/messages"
    first = alice.get(url, query_string="before=30").json
    assert len(first["messages"]) == 30 and first["has_more_before"] is True and first["has_more_after"] is False
    assert first["channel"]["id"] == bob["id"]
    pages, anchor = [first["messages"]], first["messages"][0]["id"]
    for _ in range(200):  # bounded: an anchor that never reaches the start fails the test rather than hangs it
        answer = alice.get(url, query_string=f"before=30&after=0&msg={anchor}").json
        msgs = answer["messages"]
        assert msgs[-1]["id"] == anchor  # the anchor itself comes last, after up to 30 older ones
        times = [m["created_at"] for m in msgs]
        assert times == sorted(times)  # oldest to newest within a call
        older = msgs[:-1]
        if older:
            pages.append(older)
            anchor = older[0]["id"]
        if not answer["has_more_before"]:
            break
    else:
        raise AssertionError("the history never came to its start")
    everything = [m for page in reversed(pages) for m in page]
    assert len(everything) >= 300 and len({m["id"] for m in everything}) == len(everything)
    assert everything[-1]["id"] == bob["last_message"]["id"]
    assert set(everything[0]["metadata"]) == {"content", "src", "dst", "attachments", "attachments_data"}


def test_thread_counts_and_anchors_are_checked(alice: Browser) -> None:
    bob = channel_with(alice, "bob")
    url = f"/api2/channels/{bob['id']}/messages"
    assert alice.get(url, query_string="before=51").status_code == 400
    assert alice.get(url, query_string="before=5&after=51").status_code == 400
    newest = alice.get(url).json["messages"]
    assert len(newest) == 20 and newest == alice.get(url, query_string="before=20").json["messages"]  # the default
    assert alice.get(url, query_string="before=abc").status_code == 400
    assert alice.get(url, query_string="before=5&msg=" + "0" * 32).status_code == 404
    around = alice.get(url, query_string="before=10").json["messages"]
    middle = around[5]["id"]
    both = alice.get(url, query_string=f"before=2&after=2&msg={middle}").json
    assert [m["id"] for m in both["messages"]] == [m["id"] for m in around[3:8]]
    assert both["has_more_before"] is True and both["has_more_after"] is True


def test_someone_elses_channel_is_404(alice: Browser, browser: Callable[..., Browser]) -> None:
    bob_carol = channel_with(browser("bob"), "carol")
    assert alice.get(f"/api2/channels/{bob_carol['id']}/messages").status_code == 404
    assert alice.post(f"/api2/channels/{bob_carol['id']}/read").status_code == 404


def test_reading_does_not_mark_read_but_read_does(alice: Browser) -> None:
    channel = next(c for c in all_channels(alice) if c["metadata"]["num_unread"] > 0)
    alice.get(f"/api2/channels/{channel['id']}/messages")
    assert channel_with(alice, channel["user"]["name"])["metadata"]["num_unread"] == channel["metadata"]["num_unread"]
    assert alice.post(f"/api2/channels/{channel['id']}/read").status_code == 200
    assert channel_with(alice, channel["user"]["name"])["metadata"]["num_unread"] == 0


def test_send_and_sent_readout(client: testing.TestClient, alice: Browser, browser: Callable[..., Browser]) -> None:
    client.simulate_post("/__sandbox/antispam", json={"enabled": False})
    channel = channel_with(alice, "carol")
    r = alice.post(
        f"/api2/channels/{channel['id']}/messages",
        query_string="ct=wdm",
        json={"content": "hello carol", "attachments": []},
    )
    assert r.status_code == 200
    msg = r.json
    assert msg["metadata"]["content"] == "hello carol" and msg["metadata"]["src"] == user_id(client, "alice")
    assert all_channels(alice)[0]["id"] == channel["id"]  # newest activity first
    carol_view = channel_with(browser("carol"), "alice")
    assert carol_view["metadata"]["num_unread"] >= 1 and carol_view["last_message"]["id"] == msg["id"]
    sent = client.simulate_get("/__sandbox/sent").json["sent"]
    assert [(s["from"], s["to"], s["content"], s["channelId"]) for s in sent] == [
        ("alice", "carol", "hello carol", channel["id"])
    ]
    assert alice.post(f"/api2/channels/{channel['id']}/messages", json={"content": " "}).status_code == 400


def test_sending_reads_ones_own_channel_and_keeps_the_thread_in_order(
    client: testing.TestClient, alice: Browser
) -> None:
    """The clock stands still here: two messages sent in the same microsecond still come one after the
    other. Sending in a channel with unread messages reads them (one has seen them to answer)."""
    client.simulate_post("/__sandbox/antispam", json={"enabled": False})
    channel = next(c for c in all_channels(alice) if c["metadata"]["num_unread"] > 0)
    url = f"/api2/channels/{channel['id']}/messages"
    first, second = (alice.post(url, json={"content": text}).json for text in ("one", "two"))
    assert datetime.fromisoformat(first["created_at"]) < datetime.fromisoformat(second["created_at"])
    thread = alice.get(url, query_string="before=2").json["messages"]
    assert [m["id"] for m in thread] == [first["id"], second["id"]]
    assert channel_with(alice, channel["user"]["name"])["metadata"]["num_unread"] == 0
    refused = alice.post(url, json={"content": "with a file", "attachments": "x"})
    assert refused.status_code == 400 and refused.json == {"message": "invalid attachments"}
    assert [s["content"] for s in client.simulate_get("/__sandbox/sent").json["sent"]] == ["one", "two"]


def test_chat_request(client: testing.TestClient, alice: Browser, browser: Callable[..., Browser]) -> None:
    gid = group_id(client)
    bob = user_id(client, "bob")
    existing = alice.post(f"/api2/users/{bob}/chat-request", query_string=f"g={gid}").json["channel"]
    assert existing["id"] == channel_with(alice, "bob")["id"]
    carol = browser("carol")
    stranger = stranger_to(client, carol)
    answer = carol.post(f"/api2/users/{stranger['id']}/chat-request", query_string=f"g={gid}").json
    # PLATFORM.md: ``{channel: {id, …}}``; carol is answered no more than that
    assert list(answer) == ["channel"] and list(answer["channel"]) == ["id"]
    new = carol.get(f"/api2/channels/{answer['channel']['id']}/messages").json["channel"]  # still empty
    assert stranger["id"] in new["user_ids"] and new["last_message"] is None
    again = carol.post(f"/api2/users/{stranger['id']}/chat-request", query_string=f"g={gid}").json["channel"]
    assert again["id"] == new["id"]
    assert new["id"] not in {c["id"] for c in all_channels(carol)}  # no message yet: not in the inbox
    yourself = alice.post(f"/api2/users/{user_id(client, 'alice')}/chat-request", query_string=f"g={gid}")
    assert yourself.status_code == 400 and yourself.json == {"message": "cannot chat with yourself"}
    quiet = group_id(client, "quiet-garden")  # dave is not a member there
    r = alice.post(f"/api2/users/{user_id(client, 'dave')}/chat-request", query_string=f"g={quiet}")
    assert r.status_code == 401 and r.json == {"message": "action not permitted"}


def test_antispam_refuses_bursts_and_flags(client: testing.TestClient, alice: Browser, clock: Clock) -> None:
    channel = channel_with(alice, "bob")
    url = f"/api2/channels/{channel['id']}/messages"
    assert alice.post(url, json={"content": "one"}).status_code == 200
    clock.advance(5)
    r = alice.post(url, json={"content": "two"})
    assert r.status_code == 429 and r.json == {"message": "slow down"}
    flagged = {u["name"]: u["flagged"] for u in client.simulate_get("/__sandbox/users").json["users"]}
    assert flagged["alice"] is True and flagged["bob"] is False
    clock.advance(60)
    r = alice.post(url, json={"content": "three"})
    assert r.status_code == 403 and r.json == {"message": "account restricted"}
    assert len(client.simulate_get("/__sandbox/sent").json["sent"]) == 1
    client.simulate_post("/__sandbox/reset")
    assert not any(u["flagged"] for u in client.simulate_get("/__sandbox/users").json["users"])


def test_antispam_hourly_limit_and_settings(client: testing.TestClient, alice: Browser, clock: Clock) -> None:
    client.simulate_post("/__sandbox/antispam", json={"minGapSeconds": 1, "perHour": 3})
    url = f"/api2/channels/{channel_with(alice, 'bob')['id']}/messages"
    for _ in range(3):
        assert alice.post(url, json={"content": "hi"}).status_code == 200
        clock.advance(2)
    assert alice.post(url, json={"content": "hi"}).status_code == 429
    assert (
        client.simulate_post("/__sandbox/antispam", json={"enabled": False, "clearFlags": True}).json["enabled"]
        is False
    )
    for _ in range(5):
        assert alice.post(url, json={"content": "fast"}).status_code == 200


def test_an_inbox_page_past_the_end_is_null(alice: Browser) -> None:
    q = "offset=3000&limit=30&last=true&unread-only=false"
    assert alice.get("/api2/self/chat-channels", query_string=q).json == {"channels": None}


def test_antispam_counts_the_last_hour_and_a_gap_of_exactly_the_minimum_is_enough(
    client: testing.TestClient, alice: Browser, clock: Clock
) -> None:
    client.simulate_post("/__sandbox/antispam", json={"minGapSeconds": 20, "perHour": 2})
    url = f"/api2/channels/{channel_with(alice, 'bob')['id']}/messages"
    assert alice.post(url, json={"content": "one"}).status_code == 200
    clock.advance(20)
    assert alice.post(url, json={"content": "two, twenty seconds on"}).status_code == 200
    clock.advance(3600)  # both are now more than an hour old
    assert alice.post(url, json={"content": "three, an hour on"}).status_code == 200


def test_antispam_forgets_a_message_once_it_is_an_hour_old(
    client: testing.TestClient, alice: Browser, clock: Clock
) -> None:
    client.simulate_post("/__sandbox/antispam", json={"minGapSeconds": 0, "perHour": 1})
    url = f"/api2/channels/{channel_with(alice, 'bob')['id']}/messages"
    assert alice.post(url, json={"content": "one"}).status_code == 200
    clock.advance(3600)  # exactly an hour: the hour it counted in is over
    assert alice.post(url, json={"content": "two, an hour on"}).status_code == 200


def test_around_an_anchor_more_is_said_while_one_message_is_left_on_either_side(
    client: testing.TestClient, alice: Browser, browser: Callable[..., Browser]
) -> None:
    """``has_more_before``/``has_more_after`` hold while a single message is left beyond the answer, and
    not once none is: a reader paging backwards would otherwise stop one message short, or ask once too
    often."""
    client.simulate_post("/__sandbox/antispam", json={"enabled": False})
    gid = group_id(client)
    carol = browser("carol")
    stranger = stranger_to(client, carol)
    channel = carol.post(f"/api2/users/{stranger['id']}/chat-request", query_string=f"g={gid}").json["channel"]
    url = f"/api2/channels/{channel['id']}/messages"
    first, middle, last = (carol.post(url, json={"content": text}).json for text in ("one", "two", "three"))

    def around(before: int, after: int) -> tuple[list[str], bool, bool]:
        answer = carol.get(url, query_string=f"before={before}&after={after}&msg={middle['id']}").json
        return [m["id"] for m in answer["messages"]], answer["has_more_before"], answer["has_more_after"]

    assert around(0, 0) == ([middle["id"]], True, True)  # one message left on each side
    assert around(1, 1) == ([first["id"], middle["id"], last["id"]], False, False)
    newest = carol.get(url, query_string="before=2").json
    assert [m["id"] for m in newest["messages"]] == [middle["id"], last["id"]] and newest["has_more_before"] is True
