"""``GET /healthz`` and ``GET /readyz``: JSON without a key, never usage, nothing secret, whatever the Host."""

from __future__ import annotations

import pytest

from tests.unit.world_support import World


def test_healthz_answers_without_a_key_and_counts_nothing(world: World) -> None:
    answer = world.client.simulate_get("/healthz")
    assert answer.status_code == 200 and answer.json == {"status": "ok"}
    assert answer.headers["cache-control"] == "no-store"
    assert world.store._usage == {}


def test_readyz_names_each_check(world: World) -> None:
    answer = world.client.simulate_get("/readyz")
    assert answer.status_code == 200
    assert answer.json == {"status": "ready", "checks": {"database": "ok", "throttle": "ok", "browser": "ok"}}
    assert answer.headers["cache-control"] == "no-store"  # a cache in between must not answer "ready" for it


@pytest.mark.parametrize("part", ["store", "throttle", "pace", "gateway"])
def test_readyz_is_503_naming_what_is_not_ready(world: World, part: str) -> None:
    getattr(world, part).not_ready = "a reason an operator can act on"
    answer = world.client.simulate_get("/readyz")
    assert answer.status_code == 503 and answer.json["status"] == "not_ready"
    name = {"store": "database", "throttle": "throttle", "pace": "throttle", "gateway": "browser"}[part]
    assert answer.json["checks"][name] == "a reason an operator can act on"
    assert [state for check, state in answer.json["checks"].items() if check != name] == ["ok", "ok"]


def test_a_check_that_raises_is_not_ready_and_its_message_is_not_shown(
    world: World, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> str | None:
        raise RuntimeError("redis://user:hunter2@10.0.0.5:6379 refused")

    monkeypatch.setattr(world.throttle, "ready", broken)
    answer = world.client.simulate_get("/readyz")
    assert answer.status_code == 503
    assert answer.json["checks"]["throttle"] == "the check failed (RuntimeError)"
    assert "hunter2" not in answer.text
    # The operator's log has the whole of it, to act on; only the answer leaves it out.
    [logged] = [record for record in caplog.records if record.exc_info]
    assert logged.levelname == "WARNING" and "hunter2" in str(logged.exc_info[1])  # type: ignore[index]


def test_health_routes_answer_whatever_the_host_header(world: World) -> None:
    for path in ("/healthz", "/readyz"):
        assert world.client.simulate_get(path, headers={"Host": "10.1.2.3:8000"}).status_code == 200
    assert world.client.simulate_get("/v1/openapi.json", headers={"Host": "attacker.example"}).status_code == 400
