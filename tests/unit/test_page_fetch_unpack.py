"""``page_fetch.unpack``: the answers a page packed (gzip of frames, base64) come back as the page had
them, in the order of the requests, and a damaged package is a browser failure, never a wrong answer."""

from __future__ import annotations

import base64
import gzip
import json

import pytest

from adapters.platform.browser_pool import BrowserFailure
from adapters.platform.page_fetch import unpack


def frame(index: int, body: bytes, status: int = 200, content_type: str = "application/json",
          error: str | None = None) -> bytes:
    return json.dumps([index, status, content_type, error, len(body)]).encode() + b"\n" + body


def packed(*frames: bytes) -> str:
    return base64.b64encode(gzip.compress(b"".join(frames))).decode()


def test_answers_come_back_in_request_order_with_their_bodies_as_text() -> None:
    page = json.dumps({"pageProps": {"title": "Grüße \u2603\nline two"}}, ensure_ascii=False).encode()
    answers = unpack(packed(frame(2, b"", status=0, content_type="", error="timeout"),
                            frame(0, page),
                            frame(1, b"<h1>404</h1>", status=404, content_type="text/html")), 3)
    assert answers == [
        {"status": 200, "contentType": "application/json", "text": page.decode(), "error": None},
        {"status": 404, "contentType": "text/html", "text": "<h1>404</h1>", "error": None},
        {"status": 0, "contentType": "", "text": "", "error": "timeout"},
    ]


def test_bodies_are_read_as_response_text_reads_them() -> None:
    # A byte-order mark is dropped and broken UTF-8 becomes U+FFFD, as in the browser's Response.text().
    answers = unpack(packed(frame(0, b"\xef\xbb\xbf{\"a\": 1}"), frame(1, b"ok \xff\xfe end")), 2)
    assert [a["text"] for a in answers] == ['{"a": 1}', "ok \ufffd\ufffd end"]


def test_a_body_holding_newlines_and_frame_lookalikes_is_kept_whole() -> None:
    tricky = b'[1, 200, "x", null, 3]\n' * 3
    assert unpack(packed(frame(0, tricky)), 1)[0]["text"] == tricky.decode()


@pytest.mark.parametrize("package", [
    "not base64!",
    base64.b64encode(b"not gzip").decode(),
    packed(b"no header line"),
    packed(frame(0, b"{}"), frame(0, b"{}")),  # the same answer twice
    packed(frame(0, b"{}")),  # one of two answers missing
    packed(frame(0, b"{}"), frame(5, b"{}")),  # an index out of range
    packed(frame(0, b"{}"), b'[1, 200, "x", null, 99]\n{}'),  # a body cut short
    packed(frame(0, b"{}"), b'{"index": 1}\n'),  # a header of another shape
    12345,
])
def test_a_damaged_package_is_a_browser_failure(package: object) -> None:
    with pytest.raises(BrowserFailure):
        unpack(package, 2)
