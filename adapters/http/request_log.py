"""One JSON log line per request, and one more for each failure an operator must be able to explain.

Each request gets an id: the client's ``X-Request-Id`` when it is well-formed (1 to 128 printable ASCII
characters, no space), else a new one; it is echoed in the answer and is in every line about the request.

The request line (logger ``community_api.requests``): ``time``, ``requestId``, ``method``, ``route`` (the
route template, ``/v1/posts/{post_id}``: never an id or a query, which may carry what a client should not
have sent), ``status``, ``durationMs``, ``keyId`` and ``connectionId`` (never a secret); on an MCP request,
``tool`` too (``unknown`` for a name no tool has). The error line (logger ``community_api.errors``): every
5xx and every refusal or failure of the platform, with its code, message and cause
(``adapters/http/errors.py`` writes it) — for an MCP tool call too, whose HTTP answer is a 200 carrying a
tool error: the line has the status REST would have answered and the ``tool``.

Lines are written by ``logging`` through ``JsonLines`` (``configure_logging``), one JSON object per line.
The request line, written for every request, skips ``logging``'s record when the only place it would go
is the ``JsonLinesHandler`` that ``configure_logging`` installs: it is then written to that handler's
stream directly, as the same bytes (a record costs 5 µs of the 6 µs of the line; docs/performance.md).
Any other set-up (a handler of the operator's, a filter, pytest's ``caplog``) gets the record as before.
"""

from __future__ import annotations

import itertools
import logging
import os
import secrets
import time
from datetime import UTC, datetime
from typing import Any

import falcon
import orjson

from adapters.metrics import REQUEST_SECONDS, REQUESTS
from adapters.wire import dumps

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
REQUEST_ID_HEADER = "X-Request-Id"
MAX_REQUEST_ID = 128
requests_log = logging.getLogger("community_api.requests")
errors_log = logging.getLogger("community_api.errors")


class _Ids:
    """New request ids: 16 random hex digits drawn once per process, then a counter (a tenth of a uuid4's
    cost, which reads the system's random source for each). A forked worker draws its own digits."""

    def __init__(self) -> None:
        self.reset()
        os.register_at_fork(after_in_child=self.reset)

    def reset(self) -> None:
        self.prefix = secrets.token_hex(8)
        self.counter = itertools.count(1)

    def new(self) -> str:
        return f"{self.prefix}{next(self.counter):016x}"  # 32 hex digits, as a uuid4 in hex


_ids = _Ids()


def request_id(offered: str | None) -> str:
    """The client's id when it is 1 to 128 characters of printable ASCII without spaces; else a new one."""
    if (
        offered
        and len(offered) <= MAX_REQUEST_ID
        and offered.isascii()
        and offered.isprintable()
        and " " not in offered
    ):
        return offered
    return _ids.new()


class RequestLog:
    """Middleware: the request id first (so every other line can carry it), the log line last."""

    def __init__(self) -> None:
        self._children: dict[tuple[str | None, str, int], tuple[Any, Any]] = {}

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.request_id = request_id(req.get_header(REQUEST_ID_HEADER))
        req.context.started = time.perf_counter()
        resp.set_header(REQUEST_ID_HEADER, req.context.request_id)

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, req_succeeded: bool
    ) -> None:
        context = req.context
        started: float = context.get("started") or time.perf_counter()
        elapsed = time.perf_counter() - started
        template = req.uri_template
        status = resp.status_code
        counted = self._children.get((template, req.method, status))
        if counted is None:
            counted = self._count_as(template, req.method, status)
        counted[0].inc()
        counted[1].observe(elapsed)
        if not requests_log.isEnabledFor(logging.INFO):
            return
        key = context.get("key")
        # orjson straight: every value here is the service's own (ids, a template) or checked ASCII.
        fields = {
            "time": _clock_text(),
            "requestId": context.get("request_id"),
            "method": req.method,
            "route": req.uri_template or None,
            "status": resp.status_code,
            "durationMs": round(elapsed * 1000, 2),
            "keyId": key.id if key is not None else None,
            "connectionId": context.get("connection_id"),
        }
        tool = context.get("tool")
        if tool is not None:  # an MCP request
            fields["tool"] = tool
        line = orjson.dumps(fields)
        handler = _sole_handler(requests_log)
        if handler is not None:
            handler.write_line(line)
        else:
            requests_log.info(line.decode())

    def _count_as(self, template: str | None, method: str, status: int) -> tuple[Any, Any]:
        """The request counter and latency histogram for these labels, looked up once (``labels()`` takes a
        lock and builds strings). Bounded: routes are templates, a method a client makes up is ``other``."""
        route = template or "unmatched"
        label = method if method in _METHODS else "other"
        counted = (REQUESTS.labels(route, label, str(status)), REQUEST_SECONDS.labels(route, label))
        if label == method:
            self._children[(template, method, status)] = counted
        return counted


def log_error(
    req: falcon.Request, status: int, code: str, message: str, cause: BaseException | None, **extra: Any
) -> None:
    """The second line of a 5xx or of a platform refusal: what happened and why."""
    errors_log.warning(
        dumps(
            {
                "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
                "requestId": req.context.get("request_id"),
                "method": req.method,
                "route": req.uri_template or None,
                "status": status,
                "code": code,
                "message": message,
                "cause": f"{type(cause).__name__}: {str(cause)[:300]}" if cause is not None else None,
                **extra,
            }
        )
    )


class _SecondText:
    """The time of a line as ``datetime.now(UTC).isoformat(timespec="milliseconds")`` writes it, its date and
    time of day formatted once a second (a quarter of the cost on every request)."""

    def __init__(self) -> None:
        self._second = -1
        self._text = ""

    def __call__(self) -> str:
        now = time.time()
        second = int(now)
        if second != self._second:  # a race between two threads here writes the same text twice
            self._text = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
            self._second = second
        return f"{self._text}.{int((now - second) * 1000):03d}+00:00"


_clock_text = _SecondText()


def _sole_handler(logger: logging.Logger) -> JsonLinesHandler | None:
    """The handler every INFO record of ``logger`` reaches, when that is exactly one ``JsonLinesHandler`` with
    no filter anywhere on the way (so writing to it directly is what ``logging`` would do); else None."""
    found: JsonLinesHandler | None = None
    current: logging.Logger | None = logger
    while current is not None:
        if current.filters:
            return None
        for handler in current.handlers:
            if found is not None or type(handler) is not JsonLinesHandler or handler.filters:
                return None
            if handler.level > logging.INFO:
                return None
            found = handler
        current = current.parent if current.propagate else None
    return found


class JsonLines(logging.Formatter):
    """The message as it is when it is already a JSON line (the two loggers above); any other record
    (a library's warning, a traceback) as a JSON object too, so the stream stays one object per line."""

    def format(self, record: logging.LogRecord) -> str:
        if record.name in (requests_log.name, errors_log.name):
            return record.getMessage()
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["traceback"] = self.formatException(record.exc_info)
        return dumps(line)


class JsonLinesHandler(logging.StreamHandler):
    """Standard error, one JSON object per line (``JsonLines``); the request line can be handed to it
    ready-made (``write_line``)."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(JsonLines())

    def write_line(self, line: bytes) -> None:
        """``line`` and a newline, as ``emit`` would write the record whose message it is: in one ``write``
        of the stream's descriptor (after anything the stream still holds), or through the stream when it
        has none."""
        self.acquire()  # (Handler.acquire: its lock, as emit takes it)
        try:
            stream = self.stream
            stream.flush()
            try:
                descriptor = stream.fileno()
            except (AttributeError, OSError, ValueError):
                stream.write(line.decode() + self.terminator)
                stream.flush()
                return
            data = line + b"\n"
            while data:  # a write may take only part of it (a full pipe, a signal)
                data = data[os.write(descriptor, data) :]
        finally:
            self.release()


def configure_logging(level: int = logging.INFO) -> None:
    """Every log line of the process as JSON on standard error; the ``mcp`` library's per-request INFO
    lines ("Terminating session: None", …) are kept out."""
    # What a line does not show is not gathered (logging's own advice): the caller's frame. (The thread
    # and process stay: gunicorn's own lines format ``%(process)d``.)
    logging._srcfile = None  # noqa: SLF001
    root = logging.getLogger()
    root.handlers[:] = [JsonLinesHandler()]
    root.setLevel(level)
    for noisy in ("mcp", "httpx", "urllib3", "selenium"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
