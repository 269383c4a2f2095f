"""One JSON line per request (route template, status, duration, key and connection ids, never a secret),
the client's well-formed ``X-Request-Id`` echoed or a new one made, and one more line for every 5xx and
every refusal of the platform, with its cause."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from adapters.http.request_log import JsonLines, configure_logging, request_id
from community_api.errors import ConnectionExpired, PlatformError, PlatformUnavailable
from community_api.keys import display_prefix
from tests.unit.world_support import Ready, World


def lines(caplog: pytest.LogCaptureFixture, logger: str) -> list[dict[str, Any]]:
    return [json.loads(record.getMessage()) for record in caplog.records if record.name == logger]


def test_each_request_writes_one_line_with_ids_and_no_secret(ready: Ready, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="community_api.requests")
    answer = ready.world.get("/v1/whoami", ready.key, headers={"X-Request-Id": "req-7f3a"})
    assert answer.headers["x-request-id"] == "req-7f3a"
    [line] = lines(caplog, "community_api.requests")
    [(key, _)] = ready.world.store.find_keys_by_prefix(display_prefix(ready.key))
    key_id = key.id
    assert line["requestId"] == "req-7f3a" and line["method"] == "GET" and line["route"] == "/v1/whoami"
    assert line["status"] == 200 and line["durationMs"] >= 0
    assert line["keyId"] == key_id and line["connectionId"] == ready.connection["id"]
    assert ready.key not in json.dumps(line)


def test_the_route_is_the_template_never_the_ids_or_the_query(ready: Ready, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="community_api.requests")
    ready.world.get("/v1/posts/" + "a" * 32 + "/comments?group=builders-club", ready.key)
    ready.world.client.simulate_get("/no/such/route")
    first, unrouted = lines(caplog, "community_api.requests")
    assert first["route"] == "/v1/posts/{post_id}/comments" and "a" * 32 not in json.dumps(first)
    assert unrouted["route"] is None and unrouted["status"] == 404 and unrouted["keyId"] is None


@pytest.mark.parametrize("offered", ["", " ", "has space", "x" * 129, "caf\u00e9", "a\tb", "new\nline", "\x00"])
def test_a_malformed_request_id_is_replaced(world: World, offered: str) -> None:
    made = request_id(offered)
    assert made != offered and len(made) == 32 and made.isalnum()
    answer = world.client.simulate_get(
        "/healthz",
        headers={"X-Request-Id": offered}
        if offered.isascii() and "\n" not in offered and "\x00" not in offered
        else {},
    )
    assert answer.headers["x-request-id"] != offered and len(answer.headers["x-request-id"]) == 32


@pytest.mark.parametrize("offered", ["a", "x" * 128, "4bf92f3577b34da6a3ce929d0e0e4736", "trace=1;span:2/3"])
def test_a_well_formed_request_id_is_kept(offered: str) -> None:
    assert request_id(offered) == offered


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (PlatformUnavailable("the platform did not answer in 20 s"), 503, "platform_unavailable"),
        (PlatformError("post_tree is not an object"), 502, "platform_error"),
        (ConnectionExpired("the platform session expired"), 409, "connection_expired"),
    ],
)
def test_a_platform_failure_or_refusal_gets_a_line_with_its_cause(
    ready: Ready, caplog: pytest.LogCaptureFixture, error: Exception, status: int, code: str
) -> None:
    caplog.set_level(logging.INFO)
    error.__cause__ = TimeoutError("script timeout after 20000 ms")
    ready.world.gateway.fail_next("whoami", error)
    answer = ready.world.get("/v1/whoami", ready.key, headers={"X-Request-Id": "req-err"})
    assert answer.status_code == status
    [line] = lines(caplog, "community_api.errors")
    assert line["requestId"] == "req-err" and line["status"] == status and line["code"] == code
    assert line["viaPlatform"] is True and line["cause"] == "TimeoutError: script timeout after 20000 ms"
    assert lines(caplog, "community_api.requests")[0]["status"] == status


def test_our_own_refusals_get_no_error_line(ready: Ready, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    assert ready.world.get("/v1/posts/not-an-id", ready.key).status_code == 404
    assert ready.world.client.simulate_get("/v1/whoami").status_code == 401
    assert lines(caplog, "community_api.errors") == []


def test_a_bug_is_a_500_with_its_cause_logged_and_nothing_of_it_shown(
    ready: Ready, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    ready.world.gateway.fail_next("whoami", KeyError("secret-internal-name"))
    answer = ready.world.get("/v1/whoami", ready.key)
    assert answer.status_code == 500 and "secret-internal-name" not in answer.text
    [line] = lines(caplog, "community_api.errors")
    assert line["status"] == 500 and line["cause"] == "KeyError: 'secret-internal-name'"


def test_the_process_logs_json_lines_and_keeps_the_mcp_librarys_info_out() -> None:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        configure_logging()
        assert isinstance(root.handlers[0].formatter, JsonLines)
        assert not logging.getLogger("mcp.server.streamable_http").isEnabledFor(logging.INFO)
        assert logging.getLogger("community_api.requests").isEnabledFor(logging.INFO)
        record = logging.LogRecord("adapters.x", logging.WARNING, __file__, 1, "odd %s", ("thing",), None)
        assert json.loads(JsonLines().format(record))["message"] == "odd thing"
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
