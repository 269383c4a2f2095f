"""The control API as the integration tests lean on it: every bad setting refused (a fault that is not the one
asked for would make a test prove nothing), faults that add up and are used up one rule at a time, a reset
that forgets everything a test set, and read-outs that count what is there."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from falcon import testing

from scripts.sandbox.state import FaultRule, Sandbox
from tests.sandbox.conftest import BIG, Browser, Clock, group_id, new_comment, new_post
from tests.sandbox.test_chat import inbox


@pytest.mark.parametrize(
    ("action", "body"),
    [
        ("latency", {"route": "/api2/", "ms": True}),  # a bool is no number of milliseconds
        ("latency", {"route": "", "ms": 5}),  # an empty route would match every path
        ("latency", {"route": 7, "ms": 5}),
        ("errors", {"route": "/api2/self", "status": 600}),
        ("errors", {"route": "/api2/self", "status": 302}),  # not an error: a test of failures would pass
        ("errors", {"route": "/api2/self", "status": True}),
        ("errors", {"route": "/api2/self", "status": False}),  # equal to 0, but no asking for a hang
        ("errors", {"route": "/api2/self", "status": "500"}),
        ("errors", {"route": "/api2/self", "status": 429, "retryAfter": {"s": 5}}),
        ("errors", {"route": "/api2/self", "status": 429, "retryAfter": [5]}),
        ("errors", {"route": "/api2/self", "status": 400, "message": 5}),
        ("errors", {"route": "/api2/self", "status": 500, "count": "2"}),
        ("reset", {"seed": True}),
        ("reset", {"seed": "2"}),
        ("build-id", {"buildId": "a/b"}),  # a build id names a path segment
        ("build-id", {"buildId": 5}),
        ("ttl", {"firewallSeconds": "60"}),
        ("antispam", {"perHour": False}),
    ],
)
def test_a_setting_of_the_wrong_kind_is_refused_and_changes_nothing(
    client: testing.TestClient, action: str, body: dict[str, Any]
) -> None:
    before = client.simulate_get("/__sandbox/state").json
    refused = client.simulate_post(f"/__sandbox/{action}", json=body)
    assert refused.status_code == 400 and refused.json["message"]
    assert client.simulate_get("/__sandbox/state").json == before


@pytest.mark.parametrize("action", ["expire-session", "captcha"])
@pytest.mark.parametrize("body", [{}, {"user": ""}, {"user": "zed"}])
def test_a_user_action_names_a_user_that_exists(client: testing.TestClient, action: str, body: dict[str, Any]) -> None:
    """Never a default user: expiring nobody's session by mistake must not expire alice's."""
    assert client.simulate_post(f"/__sandbox/{action}", json=body).status_code == 404


def test_the_control_api_is_never_faulted(client: testing.TestClient) -> None:
    client.simulate_post("/__sandbox/errors", json={"route": "/", "status": 500, "count": 5})
    client.simulate_post("/__sandbox/latency", json={"route": "/", "ms": 2000})
    start = time.monotonic()
    assert client.simulate_get("/__sandbox/state").status_code == 200
    assert time.monotonic() - start < 1.5
    faults = client.simulate_get("/__sandbox/state").json["faults"]
    assert [f["remaining"] for f in faults if f["status"] == 500] == [5]  # none used up by the control API


def test_latencies_of_every_matching_rule_add_up_and_one_failure_is_used_at_a_time() -> None:
    sb = Sandbox(1)
    sb.add_fault(FaultRule(route="/api2/", ms=100))
    sb.add_fault(FaultRule(route="^/api2/self$", ms=50))
    sb.add_fault(FaultRule(route="/api2/self", status=500, remaining=1))
    sb.add_fault(FaultRule(route="/api2/", status=503, remaining=2))
    delays_and_statuses = []
    for _ in range(4):
        delay, failure = sb.faults_for("/api2/self")
        delays_and_statuses.append((delay, failure.status if failure else None))
    assert delays_and_statuses == [(150, 500), (150, 503), (150, 503), (150, None)]


def test_a_route_starting_with_a_caret_is_searched_as_a_regular_expression() -> None:
    """``re.search``, as the module says: an alternative after the first may match anywhere in the path."""
    rule = FaultRule(route="^/nothing|/comments$")
    assert rule.matches("/api2/posts/x/comments") and not rule.matches("/api2/posts/x")


def test_a_hang_ends_by_itself_after_its_seconds(client: testing.TestClient, alice: Browser) -> None:
    client.simulate_post("/__sandbox/errors", json={"route": "/api2/self", "status": "hang", "seconds": 0.2})
    result: dict[str, testing.Result] = {}
    worker = threading.Thread(target=lambda: result.update(r=alice.get("/api2/self")), daemon=True)
    worker.start()
    worker.join(5)  # no clear-faults: the hang's own 0.2 s end it
    assert not worker.is_alive() and result["r"].status_code == 504


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ({"status": 400, "message": "invalid group"}, "invalid group"),
        ({"status": 500}, "internal server error"),  # the status's phrase, in lower case
        ({"status": 599}, "error"),  # a status with no phrase
    ],
)
def test_an_api2_failure_answers_its_message_and_a_page_its_phrase(
    client: testing.TestClient, alice: Browser, fault: dict[str, Any], message: str
) -> None:
    client.simulate_post("/__sandbox/errors", json={"route": "/api2/self", **fault})
    failed = alice.get("/api2/self")
    assert failed.status_code == fault["status"] and failed.json == {"message": message}
    client.simulate_post("/__sandbox/errors", json={"route": "/_next/data/", **fault})
    page = alice.data(f"/{BIG}")
    phrase = {400: "Bad Request", 500: "Internal Server Error", 599: "Error"}[fault["status"]]
    assert page.status_code == fault["status"] and f"{fault['status']} {phrase}" in page.text


def test_a_reset_forgets_every_setting_and_record_of_the_dms(
    client: testing.TestClient, alice: Browser, clock: Clock
) -> None:
    client.simulate_post("/__sandbox/antispam", json={"minGapSeconds": 600, "perHour": 2})
    channel = inbox(alice, limit=1)[0]
    url = f"/api2/channels/{channel['id']}/messages"
    assert alice.post(url, json={"content": "one"}).status_code == 200
    after = client.simulate_post("/__sandbox/reset").json
    assert after["antispam"] == {"enabled": True, "minGapSeconds": 20.0, "perHour": 25}
    assert client.simulate_get("/__sandbox/sent").json["sent"] == [] and after["counts"]["sent"] == 0
    assert alice.post(url, json={"content": "right after the reset"}).status_code == 200  # no gap remembered


def test_clearing_flags_also_forgets_when_the_account_last_sent(client: testing.TestClient, alice: Browser) -> None:
    channel = inbox(alice, limit=1)[0]
    url = f"/api2/channels/{channel['id']}/messages"
    assert alice.post(url, json={"content": "one"}).status_code == 200
    assert alice.post(url, json={"content": "too soon"}).status_code == 429
    client.simulate_post("/__sandbox/antispam", json={"clearFlags": True})
    assert alice.post(url, json={"content": "a clean slate"}).status_code == 200


def test_the_read_outs_count_what_is_there(client: testing.TestClient, alice: Browser) -> None:
    users = {u["name"]: u for u in client.simulate_get("/__sandbox/users").json["users"]}
    assert users["alice"]["canLogin"] is True
    assert not any(u["canLogin"] for u in users.values() if u["requires2fa"])  # they cannot sign in unattended
    assert any(u["requires2fa"] for u in users.values())
    assert "quiet-garden" not in users["dave"]["groups"] and BIG in users["dave"]["groups"]
    before = client.simulate_get("/__sandbox/state").json
    gid = group_id(client)
    made = new_post(alice, gid, "t")
    comment = new_comment(alice, made["id"], made["id"]).json
    for gone in (comment["id"], made["id"]):
        assert alice.delete(f"/api2/posts/{gone}").status_code == 200
    after = client.simulate_get("/__sandbox/state").json
    assert after["counts"]["posts"] == before["counts"]["posts"]  # deleted posts are not counted
    assert after["counts"]["comments"] == before["counts"]["comments"]
    assert after["groups"][BIG]["posts"] == before["groups"][BIG]["posts"]
    assert after["counts"]["created"] == 2


def test_ordering_is_seen_by_the_user_named(client: testing.TestClient) -> None:
    """Each user has read other posts, so their unread feeds differ; an unknown user is no one's view."""

    def unread(user: str) -> testing.Result:
        return client.simulate_get("/__sandbox/ordering", query_string=f"group={BIG}&s=newest&fl=unr&user={user}")

    assert unread("alice").json["ids"] != unread("bob").json["ids"]
    assert unread("zed").status_code == 404
