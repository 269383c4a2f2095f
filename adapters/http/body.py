"""Reading a JSON request body: a size limit, the media type, and syntax errors as our own errors."""

from __future__ import annotations

from typing import Any

import falcon
import orjson
from gunicorn.http.errors import ParseException

from adapters.commands import unknown_names
from adapters.json_names import duplicate_name, twice
from community_api.errors import InvalidRequest, ServiceError

MAX_BODY = 64 * 1024  # forms, management and OAuth bodies: names, passwords, a few ids
# A data operation's body (REST's create post, comment or DM; an MCP call) holds texts up to the core's
# limits: a post's title, content and label, 20,400 characters. Python's json.dumps (and requests' ``json=``)
# writes every non-ASCII character as ``\uXXXX`` and one beyond the BMP as two, 12 bytes for one character:
# about 245 KB at the longest. The limit takes that whole, with room for the rest of the body.
MAX_DATA_BODY = 256 * 1024


class PayloadTooLarge(ServiceError):
    code = "payload_too_large"


class UnsupportedMediaType(ServiceError):
    code = "unsupported_media_type"


class UnsupportedContentCoding(UnsupportedMediaType):
    """A compressed body (``Content-Encoding: gzip``): answered 415 with ``Accept-Encoding: identity``
    (RFC 9110 §15.5.16), rather than a JSON syntax error about bytes the client never wrote."""


INCOMPLETE = (
    "the request body did not arrive whole (it ended before its Content-Length, or its chunked framing is "
    "broken): nothing was done"
)


def refuse_content_coding(req: falcon.Request) -> None:
    coding = (req.get_header("Content-Encoding") or "").strip().lower()
    if coding and coding != "identity":
        raise UnsupportedContentCoding(
            f"request bodies are taken as they are, not with Content-Encoding {coding}: send it uncompressed",
            contentEncoding=coding[:40],
        )


def read_raw(req: falcon.Request, limit: int = MAX_BODY) -> bytes:
    """The body, refused with 413 past ``limit`` bytes whether or not a Content-Length announced
    it, and with 415 when it comes compressed.

    A body without a Content-Length is read too when the server says it ends by itself (PEP 3333's
    ``wsgi.input_terminated``, which gunicorn sets): an HTTP/1.1 chunked body, decoded by the server.
    Falcon's ``bounded_stream`` takes a missing length for an empty body, which read such bodies as
    nothing. A request with neither is empty to gunicorn, so the read ends at once."""
    refuse_content_coding(req)
    length = req.content_length
    if length is not None and length > limit:
        raise PayloadTooLarge(f"the request body is larger than {limit} bytes", maxBytes=limit)
    terminated = length is None and req.env.get("wsgi.input_terminated") is True
    try:
        data: bytes = (req.stream if terminated else req.bounded_stream).read(limit + 1)
    except (OSError, ParseException):
        # gunicorn decodes a chunked body as it is read: one cut short raises its NoMoreData (an OSError,
        # as a connection reset or timed out while the body comes in is), one framed wrongly its
        # InvalidChunkSize or ChunkMissingTerminator (ParseExceptions). Not a failure of ours: a 400.
        raise InvalidRequest(INCOMPLETE) from None
    if len(data) > limit:
        raise PayloadTooLarge(f"the request body is larger than {limit} bytes", maxBytes=limit)
    if length is not None and len(data) < length:
        # The server's reader ends at the end of the connection without a word: a body that stops short
        # of its Content-Length (a client that gave up, or miscounted) would otherwise be acted on, and
        # the client, having seen no answer, send it again.
        raise InvalidRequest(INCOMPLETE, contentLength=length, received=len(data))
    return data


def refuse_body(req: falcon.Request, in_query: tuple[str, ...] = ()) -> None:
    """A route that takes no body (a GET, a DELETE, a key's rotation) refuses one that holds something, as
    an unknown field is refused where a body is taken: ``{"grace": "0"}`` sent to a rotation, or
    ``{"pages": 3}`` to a feed, silently ignored, would leave a leaked key working a day more, or read one
    page where three were asked for. No body, white space, ``{}`` and ``null`` (what some clients send with
    every request) are no body. A field the route takes in the query (``in_query``) is named as such.

    A request that announces no body (no Content-Length, or 0, and no Transfer-Encoding: every GET a
    client usually sends) is passed without a read."""
    length = req.content_length
    if not length and (length is not None or req.get_header("Transfer-Encoding") is None):
        return
    raw = read_raw(req)
    if not raw.strip():
        return
    message = "this route takes no request body"
    try:
        parsed = orjson.loads(raw)
    except ValueError:
        raise InvalidRequest(message) from None
    if parsed is None or parsed == {}:
        return
    if not isinstance(parsed, dict):
        raise InvalidRequest(message)
    said, unknown = unknown_names(parsed)
    queried = [name for name in unknown if name in in_query]
    if queried:
        verb = "are query parameters" if len(queried) > 1 else "is a query parameter"
        raise InvalidRequest(
            f"{message}: {', '.join(queried)} {verb} here (?{queried[0]}=…)", unknown=unknown, allowed=[]
        )
    raise InvalidRequest(f"{message}; unknown field: {said}", unknown=unknown, allowed=[])


def read_json(req: falcon.Request, *, allow_empty: bool = False, limit: int = MAX_BODY) -> tuple[Any, bytes]:
    """The parsed JSON body and its raw bytes (for idempotency fingerprints)."""
    raw = read_raw(req, limit)
    if not raw.strip():
        if allow_empty:
            return {}, raw
        raise InvalidRequest("a JSON object is required as the request body")
    media = (req.content_type or "").split(";")[0].strip().lower()
    if media != "application/json":
        raise UnsupportedMediaType("send the body as application/json")
    try:
        # orjson, unlike json, refuses NaN, integers past 64 bits and lone surrogates ("\\ud800"),
        # none of which any field of ours takes, and none of which could be sent on to the platform.
        parsed = orjson.loads(raw)
    except ValueError as error:  # orjson.JSONDecodeError is a ValueError (invalid UTF-8 included)
        raise InvalidRequest(_unreadable(raw, error)) from None
    name = duplicate_name(raw)
    if name is not None:
        raise InvalidRequest(f"the request body {twice(name)}", field=name)
    return parsed, raw


def _unreadable(raw: bytes, error: ValueError) -> str:
    """What a body orjson refused is wrong with. Bytes that are not UTF-8 are said so, with where: orjson
    words them as "str is not valid UTF-8: surrogates not allowed", whatever the bytes."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as bad:
        return f"the request body is not valid UTF-8 (byte {bad.start}): JSON is sent as UTF-8"
    return f"the request body is not valid JSON: {error}"
