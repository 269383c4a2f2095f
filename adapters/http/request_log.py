"""One JSON log line per request, and one more for each failure an operator must be able to explain.

Each request gets an id: the client's ``X-Request-Id`` when it is well-formed (1 to 128 printable ASCII
characters, no space), else a new one; it is echoed in the answer and is in every line about the request.

The request line (logger ``community_api.requests``): ``time``, ``requestId``, ``method``, ``route`` (the
route template, ``/v1/posts/{post_id}``: never an id or a query, which may carry what a client should not
have sent), ``status``, ``durationMs``, ``keyId`` and ``connectionId`` (never a secret). The error line
(logger ``community_api.errors``): every 5xx and every refusal or failure of the platform, with its code,
message and cause (``adapters/http/errors.py`` writes it).

Lines are written by ``logging`` through ``JsonLines`` (``configure``), one JSON object per line.
"""

from __future__ import annotations

import logging
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import falcon

from adapters.metrics import REQUEST_SECONDS, REQUESTS
from adapters.wire import dumps

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
REQUEST_ID_HEADER = "X-Request-Id"
MAX_REQUEST_ID = 128
requests_log = logging.getLogger("community_api.requests")
errors_log = logging.getLogger("community_api.errors")


def request_id(offered: str | None) -> str:
    """The client's id when it is 1 to 128 characters of printable ASCII without spaces; else a new one."""
    if offered and len(offered) <= MAX_REQUEST_ID and offered.isascii() and offered.isprintable() \
            and " " not in offered:
        return offered
    return uuid.uuid4().hex


class RequestLog:
    """Middleware: the request id first (so every other line can carry it), the log line last."""

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
        route = req.uri_template or "unmatched"
        method = req.method if req.method in _METHODS else "other"  # a client picks it: keep labels bounded
        REQUESTS.labels(route, method, str(resp.status_code)).inc()
        REQUEST_SECONDS.labels(route, method).observe(elapsed)
        if not requests_log.isEnabledFor(logging.INFO):
            return
        key = context.get("key")
        requests_log.info(dumps({
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "requestId": context.get("request_id"),
            "method": req.method,
            "route": req.uri_template or None,
            "status": resp.status_code,
            "durationMs": round(elapsed * 1000, 2),
            "keyId": key.id if key is not None else None,
            "connectionId": context.get("connection_id"),
        }))


def log_error(req: falcon.Request, status: int, code: str, message: str, cause: BaseException | None,
              **extra: Any) -> None:
    """The second line of a 5xx or of a platform refusal: what happened and why."""
    errors_log.warning(dumps({
        "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "requestId": req.context.get("request_id"),
        "method": req.method,
        "route": req.uri_template or None,
        "status": status,
        "code": code,
        "message": message,
        "cause": f"{type(cause).__name__}: {str(cause)[:300]}" if cause is not None else None,
        **extra,
    }))


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


def configure_logging(level: int = logging.INFO) -> None:
    """Every log line of the process as JSON on standard error; the ``mcp`` library's per-request INFO
    lines ("Terminating session: None", …) are kept out."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonLines())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("mcp", "httpx", "urllib3", "selenium"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
