"""The one place where error codes become HTTP answers.

Every non-2xx answer is JSON ``{"error": {"code", "message", "details"}}`` — Falcon's own errors too
(unknown path, wrong method, bad media) — never HTML, never a stack trace.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import falcon

from adapters.commands import repeatable
from adapters.http.body import UnsupportedContentCoding
from adapters.http.request_log import log_error
from adapters.storage_failure import CODE as STORAGE_CODE
from adapters.storage_failure import STORAGE_RETRY_AFTER, storage_failure, storage_message
from community_api.errors import ServiceError, Unauthorized
from community_api.idempotency import InterruptedRequest

log = logging.getLogger(__name__)

STATUS_BY_CODE: dict[str, int] = {
    "invalid_request": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "connection_mismatch": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    "conflict": 409,
    "connection_expired": 409,
    "payload_too_large": 413,
    "unsupported_media_type": 415,
    "rate_limited": 429,
    "internal_error": 500,
    "platform_error": 502,
    "platform_unavailable": 503,
    STORAGE_CODE: 503,
}
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

# Falcon's own errors, by status, as our codes.
_CODE_BY_STATUS: dict[int, str] = {
    400: "invalid_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    411: "invalid_request",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
}

WWW_AUTHENTICATE = 'Bearer realm="community-api"'


def error_body(code: str, message: str, details: dict[str, Any] | None = None) -> str:
    return json.dumps({"error": {"code": code, "message": message, "details": details or {}}})


def error_answer(error: ServiceError) -> tuple[int, str]:
    """The status and body of an error, for answers kept and replayed (idempotency)."""
    return STATUS_BY_CODE.get(error.code, 500), error_body(error.code, error.message, error.details)


def log_service_error(req: falcon.Request, error: ServiceError, **extra: Any) -> None:
    """The error line an operator needs for ``error`` (a 5xx, or anything the platform refused or failed),
    whether it is answered as REST's error, as an MCP tool error, or kept as the answer of a create whose
    outcome is unknown; ``extra``: more fields (the MCP tool)."""
    status = STATUS_BY_CODE.get(error.code, 500)
    if status >= 500 or error.via_platform:
        cause = error.__cause__ or error.__context__
        log_error(req, status, error.code, error.message, cause, viaPlatform=error.via_platform, **extra)


def kept_error_answer(req: falcon.Request, error: ServiceError, **extra: Any) -> tuple[int, str]:
    """``error_answer`` for ``run_once``, which keeps the answer of a create whose outcome is unknown
    instead of raising it (so no error handler sees it), after that error's line. Not for the answer
    kept when the request itself failed (``InterruptedRequest``): its own failure has its line."""
    if not isinstance(error, InterruptedRequest):
        log_service_error(req, error, **extra)
    return error_answer(error)


def _respond(resp: falcon.Response, status: int, code: str, message: str, details: dict[str, Any]) -> None:
    resp.status = status
    resp.content_type = falcon.MEDIA_JSON
    resp.text = error_body(code, message, details)
    resp.data = None


def handle_service_error(
    req: falcon.Request, resp: falcon.Response, error: ServiceError, params: dict[str, Any]
) -> None:
    status = STATUS_BY_CODE.get(error.code, 500)
    # A 429 always says how long to wait (``RateLimited`` puts it in its details); a 503 when it knows.
    if type(wait := error.details.get("retryAfter")) is int and wait >= 1:
        resp.set_header("Retry-After", str(wait))
    # Management routes authenticate by web session: a Bearer challenge would mislead there.
    if isinstance(error, Unauthorized) and not getattr(req.context, "web_route", False):
        challenge = getattr(req.context, "www_authenticate", WWW_AUTHENTICATE)
        if getattr(req.context, "credential_refused", False):
            challenge += ', error="invalid_token"'
        resp.set_header("WWW-Authenticate", challenge)
    elif getattr(req.context, "credential_repeated", False):  # ``auth.bearer_key``: RFC 6750 §3.1's 400
        challenge = getattr(req.context, "www_authenticate", WWW_AUTHENTICATE)
        resp.set_header("WWW-Authenticate", challenge + ', error="invalid_request"')
    if isinstance(error, UnsupportedContentCoding):
        resp.set_header("Accept-Encoding", "identity")
    required = error.details.get("requiredScope")
    if error.code == "forbidden" and required:
        resp.set_header("WWW-Authenticate", f'Bearer error="insufficient_scope", scope="{required}"')
    log_service_error(req, error)
    _respond(resp, status, error.code, error.message, error.details)


MAX_PATH_REPEATED = 200


def handle_http_error(
    req: falcon.Request,
    resp: falcon.Response,
    error: falcon.HTTPError,
    params: dict[str, Any],
    page: PageRenderer | None = None,
) -> None:
    status = error.status_code
    code = _CODE_BY_STATUS.get(status, "invalid_request" if status < 500 else "internal_error")
    message = error.description or error.title or "request refused"
    # The path is repeated when it could be a mistyped route (a percent-encoded newline arrives decoded).
    path = req.path if repeatable(req.path, MAX_PATH_REPEATED) else "this path"
    if status == 404:
        # Falcon's own 404 (no route matched) has no description; a resource's has one that says what is missing.
        message = error.description or f"no route {req.method} {path}"
    elif status == 405:
        message = f"{req.method} is not allowed on {path}"
    resp.set_headers(error.headers or {})
    if status >= 500:
        log_error(req, status, code, message, error)
    shown = _page_for(req, page) if status == 404 and not error.description else None
    if shown is not None:
        # A mistyped or stale address of the dashboard (``/setings``), opened in a browser: a page of the
        # dashboard that says so and leads back, not the API's JSON.
        shown(req, resp, 404, f"there is no page at {path}")
        return
    _respond(resp, status, code, message, {})


# Renders a failure as a page, for a person's browser on the dashboard (``install``'s ``page``).
PageRenderer = Callable[[falcon.Request, falcon.Response, int, str], None]


def handle_unexpected(
    req: falcon.Request,
    resp: falcon.Response,
    error: Exception,
    params: dict[str, Any],
    page: PageRenderer | None = None,
) -> None:
    cause = storage_failure(error)
    if cause is not None:
        # Not a bug: the box cannot write (a full disk, a read-only file system). One line says why,
        # without a traceback per request while it lasts.
        message = storage_message(cause, changes=req.method not in SAFE_METHODS)
        log_error(req, 503, STORAGE_CODE, message, error)
        resp.set_header("Retry-After", str(STORAGE_RETRY_AFTER))
        _answer(req, resp, page, 503, STORAGE_CODE, message, {"retryAfter": STORAGE_RETRY_AFTER})
        return
    # A bug: say so plainly without leaking internals; the traceback goes to the server log only.
    log.exception("unexpected error on %s %s", req.method, req.uri_template or "(no route)")
    log_error(req, 500, "internal_error", "unexpected error", error)
    _answer(req, resp, page, 500, "internal_error", "the service failed to handle this request", {})


def _answer(
    req: falcon.Request,
    resp: falcon.Response,
    page: PageRenderer | None,
    status: int,
    code: str,
    message: str,
    details: dict[str, Any],
) -> None:
    """The error body; a page instead for a person's browser on the dashboard."""
    shown = _page_for(req, page)
    if shown is not None:
        shown(req, resp, status, message)
        return
    _respond(resp, status, code, message, details)


def _page_for(req: falcon.Request, page: PageRenderer | None) -> PageRenderer | None:
    """``page`` when an error is shown as a page, else None (JSON): for a person's browser (navigating or
    posting a form, it lists text/html first; a script sends */* or JSON), never on the API's ``/v1``
    routes, whose answers are JSON whoever asks."""
    if page is None or req.path == "/v1" or req.path.startswith("/v1/"):
        return None
    return page if req.client_prefers(("application/json", "text/html")) == "text/html" else None


def install(app: falcon.App, page: PageRenderer | None = None) -> None:
    """The error handlers; ``page`` renders a failure for a browser on the dashboard's pages."""

    def unexpected(req: falcon.Request, resp: falcon.Response, error: Exception, params: dict[str, Any]) -> None:
        handle_unexpected(req, resp, error, params, page)

    # Falcon picks the most specific handler for an exception's class.
    app.add_error_handler(Exception, unexpected)

    def http_error(req: falcon.Request, resp: falcon.Response, error: falcon.HTTPError, params: dict[str, Any]) -> None:
        handle_http_error(req, resp, error, params, page)

    app.add_error_handler(falcon.HTTPError, http_error)
    app.add_error_handler(ServiceError, handle_service_error)
