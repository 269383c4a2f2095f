"""gunicorn's own answers to requests it cannot read, in the service's JSON error shape.

gunicorn answers some requests itself, before any application code runs: a request line past its limit
(414), headers too large (431), bytes that are not HTTP (400), a transfer coding it does not implement
(501). Its worker writes them through ``gunicorn.util.write_error(sock, status, reason, message)`` as a
small HTML page, which a JSON client cannot read (DESIGN §2: never HTML). ``answer_in_json()`` replaces
that function in the worker process with ``write_json_error``: the same status, our error body.

The message is ours, chosen by the status: gunicorn's own detail repeats what the client sent (the
request line, a header's name), which has no place in an answer or in a client's logs.
"""

from __future__ import annotations

import socket

import gunicorn.util

from adapters.http.errors import error_body

# status: (code, message)
_ANSWERS: dict[int, tuple[str, str]] = {
    400: ("invalid_request", "the request is not valid HTTP/1.1 (its request line, headers or body framing)"),
    403: ("forbidden", "the request is refused by the server"),
    414: ("uri_too_long", "the request line (method, path and query) is longer than this server accepts"),
    417: ("expectation_failed", "the server cannot meet the request's Expect header"),
    431: ("headers_too_large", "the request's headers are too large for this server"),
    501: ("not_implemented", "the request uses a transfer coding this server does not implement"),
}
_FAILED = ("internal_error", "the service failed to handle this request")


def write_json_error(sock: socket.socket, status_int: int, reason: str, mesg: str) -> None:
    """``gunicorn.util.write_error``'s signature; ``mesg`` (gunicorn's detail) is left out on purpose."""
    code, message = _ANSWERS.get(status_int, _FAILED)
    body = error_body(code, message).encode()
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\n"
        "Connection: close\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    gunicorn.util.write_nonblock(sock, head.encode("latin1") + body)


def answer_in_json() -> None:
    """Make this process's gunicorn worker write its own error answers as JSON (see the module doc)."""
    gunicorn.util.write_error = write_json_error
