"""One JSON line per request (route template, status, duration, key and connection ids, never a secret),
the client's well-formed ``X-Request-Id`` echoed or a new one made, and one more line for every 5xx and
every refusal of the platform, with its cause."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.http import request_log
from adapters.http.request_log import JsonLines, JsonLinesHandler, configure_logging, request_id
from community_api.errors import ConnectionExpired, PlatformError, PlatformUnavailable, RateLimited
from community_api.keys import display_prefix
from community_api.scopes import ALL_SCOPES
from tests.unit.world_support import Ready, World, build_world


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


def test_the_platforms_429_gets_a_line_and_our_paces_refusal_during_a_call_none(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A 429 of the platform is a platform refusal (its line says so); one of our own pace, even when it
    refuses a request part way through a call (a list of groups asks one request per group), sent nothing
    and is ours, as one before the call."""
    world = build_world(reads_per_minute=3)
    browser = world.sign_up()
    world.link(browser)
    key = world.mint(browser, scopes=ALL_SCOPES)["secret"]
    caplog.set_level(logging.INFO)
    world.gateway.fail_next("whoami", RateLimited("slow down", retry_after=5, source="platform"))
    assert world.get("/v1/whoami", key).status_code == 429
    [line] = lines(caplog, "community_api.errors")
    assert line["status"] == 429 and line["code"] == "rate_limited" and line["viaPlatform"] is True
    caplog.clear()
    world.clock.advance(seconds=5)
    assert world.get("/v1/whoami", key).status_code == 200  # the second of three reads a minute
    refused = world.get("/v1/groups", key)  # the list is sent (the third read), its groups' labels not
    assert refused.status_code == 429 and refused.json["error"]["details"]["reason"] == "read_pace"
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


# (the set-up, whether the configured handler's stream gets the line, whether a record of it was made)
SET_UPS = [
    ("a filter on the logger", True, True),
    ("a filter on the handler", True, True),
    ("a second handler", True, True),
    ("a second JSON-lines handler", True, True),
    ("the handler's level above INFO", False, True),
    ("the logger's level above INFO", False, False),
    ("the logger not propagating", False, True),
]


@pytest.mark.parametrize(("where", "written", "recorded"), SET_UPS, ids=[row[0] for row in SET_UPS])
def test_any_other_logging_set_up_gets_what_logging_would_give_it(
    ready: Ready,
    configured: JsonLinesHandler,
    monkeypatch: pytest.MonkeyPatch,
    where: str,
    written: bool,
    recorded: bool,
) -> None:
    """Written straight to the stream only where ``logging`` would have put the record there and nowhere
    else; with any other set-up, the record goes where ``logging`` sends it."""
    monkeypatch.setattr(logging.getLogger(), "handlers", [configured])  # (pytest's own handlers left out)
    stream = io.StringIO()
    configured.setStream(stream)
    requests_logger = logging.getLogger("community_api.requests")
    seen: list[logging.LogRecord] = []
    made = requests_logger.makeRecord

    def record_made(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = made(*args, **kwargs)
        seen.append(record)
        return record

    monkeypatch.setattr(requests_logger, "makeRecord", record_made)
    other = JsonLinesHandler()
    other.setStream(io.StringIO())
    level = requests_logger.level
    if where == "a filter on the logger":
        monkeypatch.setattr(requests_logger, "filters", [lambda record: True])
    elif where == "a filter on the handler":
        monkeypatch.setattr(configured, "filters", [lambda record: True])
    elif where == "a second handler":
        monkeypatch.setattr(requests_logger, "handlers", [logging.NullHandler()])
    elif where == "a second JSON-lines handler":
        monkeypatch.setattr(requests_logger, "handlers", [other])
    elif where == "the handler's level above INFO":
        monkeypatch.setattr(configured, "level", logging.WARNING)
    elif where == "the logger's level above INFO":
        requests_logger.setLevel(logging.WARNING)  # (setLevel, not the attribute: isEnabledFor caches)
    else:
        monkeypatch.setattr(requests_logger, "propagate", False)
    try:
        ready.world.get("/v1/whoami", ready.key)
    finally:
        requests_logger.setLevel(level)
    assert (stream.getvalue() != "") is written, stream.getvalue()
    assert bool(seen) is recorded
    if where == "a second JSON-lines handler":
        assert json.loads(other.stream.getvalue())["route"] == "/v1/whoami"  # both got it


def test_the_json_formatter_keeps_the_services_lines_and_wraps_every_other() -> None:
    formatter = JsonLines()
    for name in ("community_api.requests", "community_api.errors"):  # already a JSON line each
        record = logging.LogRecord(name, logging.WARNING, __file__, 1, '{"status": 503}', None, None)
        assert formatter.format(record) == '{"status": 503}'
    try:
        raise ValueError("broken")
    except ValueError:
        failure = logging.LogRecord("adapters.x", logging.ERROR, __file__, 1, "it failed", None, sys.exc_info())
    line = json.loads(formatter.format(failure))
    assert line["level"] == "error" and line["logger"] == "adapters.x" and line["message"] == "it failed"
    assert "ValueError: broken" in line["traceback"]


class _Clock:
    """``time`` as request_log reads it, at moments the test sets."""

    def __init__(self) -> None:
        self.now = 0.0

    def time(self) -> float:
        return self.now

    def perf_counter(self) -> float:
        return self.now


def test_the_lines_time_and_duration(
    ready: Ready, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO, logger="community_api.requests")
    clock = _Clock()
    monkeypatch.setattr(request_log, "time", clock)
    monkeypatch.setattr(request_log, "_clock_text", request_log._SecondText())
    started = ready.world.gateway.whoami

    def slow(*args: Any, **kwargs: Any) -> Any:
        clock.now += 0.25  # the request takes a quarter of a second
        return started(*args, **kwargs)

    monkeypatch.setattr(ready.world.gateway, "whoami", slow)
    for now in (1_800_000_000.8125, 1_800_000_004.5):  # (fractions a float holds exactly)
        clock.now = now
        ready.world.get("/v1/whoami", ready.key)
    first, second = lines(caplog, "community_api.requests")
    assert first["time"] == "2027-01-15T08:00:01.062+00:00" and first["durationMs"] == 250.0
    assert second["time"] == "2027-01-15T08:00:04.750+00:00" and second["durationMs"] == 250.0


def test_a_long_cause_is_cut_in_the_error_line(ready: Ready, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    error = PlatformError("post_tree is not an object")
    error.__cause__ = ValueError("x" * 5000)
    ready.world.gateway.fail_next("whoami", error)
    assert ready.world.get("/v1/whoami", ready.key).status_code == 502
    [line] = lines(caplog, "community_api.errors")
    assert line["cause"] == "ValueError: " + "x" * 300


def test_a_forked_worker_makes_request_ids_of_its_own() -> None:
    """Each gunicorn worker is a fork: its new ids must not repeat its siblings'."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover (the child's part)
        try:
            os.write(write, request_id(None).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        theirs = pipe.read()
    os.waitpid(child, 0)
    mine = request_id(None)
    assert len(theirs) == len(mine) == 32 and theirs[:16] != mine[:16]


def test_a_cause_raised_while_handling_another_is_named_too(ready: Ready, caplog: pytest.LogCaptureFixture) -> None:
    """An error raised in an ``except`` block without ``from`` carries its cause as ``__context__``."""
    caplog.set_level(logging.INFO)
    try:
        try:
            raise TimeoutError("script timeout after 20000 ms")
        except TimeoutError:
            raise PlatformUnavailable("the platform did not answer in 20 s")  # noqa: B904
    except PlatformUnavailable as raised:
        error = raised
    ready.world.gateway.fail_next("whoami", error)
    assert ready.world.get("/v1/whoami", ready.key).status_code == 503
    [line] = lines(caplog, "community_api.errors")
    assert line["cause"] == "TimeoutError: script timeout after 20000 ms"


def test_a_bug_during_a_create_gets_one_error_line(ready: Ready, caplog: pytest.LogCaptureFixture) -> None:
    """The answer kept for its retries (outcome unknown) is not a second failure to report."""
    caplog.set_level(logging.INFO)
    ready.world.gateway.fail_next("create_post", KeyError("internal"))
    answer = ready.world.post(
        "/v1/groups/builders-club/posts", ready.key, {"title": "t"}, headers={"Idempotency-Key": "bug-once"}
    )
    assert answer.status_code == 500
    [line] = lines(caplog, "community_api.errors")
    assert line["status"] == 500 and line["cause"] == "KeyError: 'internal'"


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
