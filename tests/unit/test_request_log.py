"""One JSON line per request (route template, status, duration, key and connection ids, never a secret),
the client's well-formed ``X-Request-Id`` echoed or a new one made, and one more line for every 5xx and
every refusal of the platform, with its cause."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.http.request_log import JsonLines, JsonLinesHandler, configure_logging, request_id
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


@pytest.fixture
def configured() -> Iterator[JsonLinesHandler]:
    """The process's logging as ``configure_logging`` leaves it (its handler's stream set by each test)."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        configure_logging()
        [handler] = root.handlers
        assert isinstance(handler, JsonLinesHandler)
        yield handler
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)


def test_the_request_line_goes_straight_to_the_configured_stream(
    ready: Ready, configured: JsonLinesHandler, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pytest's own capture handlers sit on the root logger during the test: without them the handler is
    # the only one, as in the service; no record is then made for the request line (it would fail here).
    monkeypatch.setattr(logging.getLogger(), "handlers", [configured])
    monkeypatch.setattr(logging.getLogger("community_api.requests"), "makeRecord", _no_record)
    # A real file (the direct write of its descriptor) and a stream without one (written through it).
    with (tmp_path / "log").open("w") as file:
        for stream in (file, io.StringIO()):
            configured.setStream(stream)
            logging.getLogger("adapters.test").warning("before")  # a record of another logger, in order
            ready.world.get("/v1/whoami", ready.key, headers={"X-Request-Id": "req-direct"})
            stream.flush()
            text = (tmp_path / "log").read_text() if stream is file else stream.getvalue()  # type: ignore[union-attr]
            before, line = [json.loads(each) for each in text.splitlines()]
            assert before["message"] == "before"
            assert line["requestId"] == "req-direct" and line["route"] == "/v1/whoami" and line["status"] == 200
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", line["time"])
            assert ready.key not in text


def _no_record(*args: object, **kwargs: object) -> logging.LogRecord:
    raise AssertionError("the request line went through a LogRecord")


@pytest.mark.parametrize("where", ["a filter on the logger", "a second handler", "a level above INFO"])
def test_any_other_logging_set_up_gets_the_record(
    ready: Ready, configured: JsonLinesHandler, where: str, tmp_path: Path
) -> None:
    configured.setStream(io.StringIO())
    requests_logger = logging.getLogger("community_api.requests")
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    keep = Keep()
    undo = []
    if where == "a filter on the logger":
        requests_logger.addFilter(lambda record: seen.append(record) or True)  # type: ignore[func-returns-value]
        undo.append(lambda: requests_logger.filters.clear())
    elif where == "a second handler":
        requests_logger.addHandler(keep)
        undo.append(lambda: requests_logger.removeHandler(keep))
    else:
        configured.setLevel(logging.WARNING)
        requests_logger.addHandler(keep)
        undo.append(lambda: requests_logger.removeHandler(keep))
    try:
        ready.world.get("/v1/whoami", ready.key)
    finally:
        for step in undo:
            step()
    assert [json.loads(record.getMessage())["route"] for record in seen] == ["/v1/whoami"]


def test_a_create_whose_outcome_is_unknown_gets_the_error_line(ready: Ready, caplog: pytest.LogCaptureFixture) -> None:
    """Its answer is kept for retries rather than raised (idempotency), and no error handler saw it: the
    one failure an operator most needs to see left no line saying why."""
    caplog.set_level(logging.INFO)
    error = PlatformUnavailable("the platform did not answer in 20 s")
    error.__cause__ = TimeoutError("script timeout after 20000 ms")
    ready.world.gateway.fail_next("create_post", error)
    answer = ready.world.post(
        "/v1/groups/builders-club/posts", ready.key, {"title": "t"}, headers={"X-Request-Id": "req-kept"}
    )
    assert answer.status_code == 503 and answer.json["error"]["details"]["outcomeUnknown"] is True
    [line] = lines(caplog, "community_api.errors")
    assert line["requestId"] == "req-kept" and line["status"] == 503 and line["code"] == "platform_unavailable"
    assert line["cause"] == "TimeoutError: script timeout after 20000 ms"
