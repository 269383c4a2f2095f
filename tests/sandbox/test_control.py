"""The control API: faults, reset, read-outs."""

from __future__ import annotations

import threading
import time

from falcon import testing

from tests.sandbox.conftest import BIG, Browser


def test_error_injection_then_normal(client: testing.TestClient, alice: Browser) -> None:
    client.simulate_post("/__sandbox/errors", json={"route": "/api2/self", "status": 500, "count": 2})
    assert [alice.get("/api2/self").status_code for _ in range(3)] == [500, 500, 200]
    client.simulate_post("/__sandbox/errors", json={"route": "^/_next/data/.*\\.json$", "status": 502, "count": 1})
    r = alice.data(f"/{BIG}")
    assert r.status_code == 502 and r.headers["content-type"].startswith("text/html")
    assert alice.data(f"/{BIG}").status_code == 200
    assert alice.get("/__sandbox/state").status_code == 200  # the control API is never faulted


def test_latency_and_clear_faults(client: testing.TestClient, alice: Browser) -> None:
    client.simulate_post("/__sandbox/latency", json={"route": "/api2/", "ms": 150})
    start = time.monotonic()
    alice.get("/api2/self")
    assert time.monotonic() - start >= 0.15
    assert client.simulate_get("/__sandbox/state").json["faults"][0]["ms"] == 150
    client.simulate_post("/__sandbox/clear-faults")
    start = time.monotonic()
    alice.get("/api2/self")
    assert time.monotonic() - start < 0.15


def test_hang_is_released_by_clear_faults(client: testing.TestClient, alice: Browser) -> None:
    client.simulate_post("/__sandbox/errors", json={"route": "/api2/self", "status": "hang", "count": 1, "seconds": 30})
    result: dict[str, testing.Result] = {}
    worker = threading.Thread(target=lambda: result.update(r=alice.get("/api2/self")))
    start = time.monotonic()
    worker.start()
    time.sleep(0.2)
    assert worker.is_alive()
    client.simulate_post("/__sandbox/clear-faults")
    worker.join(5)
    assert result["r"].status_code == 504 and time.monotonic() - start < 5


def test_reset_restores_the_initial_state(client: testing.TestClient, alice: Browser) -> None:
    before = client.simulate_get("/__sandbox/state").json
    gid = before["groups"][BIG]["id"]
    alice.post("/api2/posts", json={"post_type": "generic", "group_id": gid, "metadata": {"title": "t"}})
    client.simulate_post("/__sandbox/build-id")
    client.simulate_post("/__sandbox/latency", json={"route": "/x", "ms": 1})
    assert client.simulate_get("/__sandbox/state").json["counts"]["created"] == 1
    after = client.simulate_post("/__sandbox/reset").json
    assert after["buildId"] == before["buildId"] and after["counts"] == before["counts"] and after["faults"] == []
    assert client.simulate_get("/__sandbox/created").json["created"] == []
    assert alice.get("/api2/self").json["name"] == "alice"  # sessions survive a reset


def test_seeds_are_deterministic_and_differ(client: testing.TestClient) -> None:
    one = client.simulate_get("/__sandbox/ordering", query_string=f"group={BIG}&s=best&pages=2").json
    client.simulate_post("/__sandbox/reset", json={"seed": 2})
    two = client.simulate_get("/__sandbox/ordering", query_string=f"group={BIG}&s=best&pages=2").json
    assert one["ids"] != two["ids"]
    client.simulate_post("/__sandbox/reset", json={"seed": 1})
    again = client.simulate_get("/__sandbox/ordering", query_string=f"group={BIG}&s=best&pages=2").json
    assert again == one
    users = client.simulate_get("/__sandbox/users").json["users"]
    assert [u["name"] for u in users[:5]] == ["alice", "bob", "carol", "dave", "mallory"]


def test_control_validation(client: testing.TestClient) -> None:
    assert client.simulate_post("/__sandbox/errors", json={"route": "/x", "status": 200}).status_code == 400
    assert client.simulate_post("/__sandbox/latency", json={"ms": 5}).status_code == 400
    assert client.simulate_post("/__sandbox/expire-session", json={"user": "zed"}).status_code == 404
    assert client.simulate_get("/__sandbox/nope").status_code == 404


def test_every_request_is_recorded_until_reset(client: testing.TestClient, alice: Browser) -> None:
    client.simulate_post("/__sandbox/reset")
    alice.get("/api2/self", query_string="a=1&b=%26")
    alice.get("/api2/posts/x%2F..%2Fself/comments")
    seen = client.simulate_get("/__sandbox/requests").json["requests"]
    assert {"method": "GET", "path": "/api2/self", "rawPath": "/api2/self", "query": "a=1&b=%26"} in seen
    assert any(r["path"] == "/api2/posts/x/../self/comments" for r in seen)
    assert not any(r["path"].startswith("/__sandbox/") for r in seen)  # the control API is not recorded
    client.simulate_post("/__sandbox/reset")
    assert client.simulate_get("/__sandbox/requests").json["requests"] == []


def test_an_injected_429_carries_its_retry_after(client: testing.TestClient, alice: Browser) -> None:
    client.simulate_post("/__sandbox/errors", json={"route": "/api2/self", "status": 429, "retryAfter": 17})
    refused = alice.get("/api2/self")
    assert refused.status_code == 429 and refused.headers["retry-after"] == "17"
    assert alice.get("/api2/self").status_code == 200
