"""``page_fetch.unpack``: the answers a page packed (gzip of frames, base64) come back as the page had
them, in the order of the requests, and a damaged package is a browser failure, never a wrong answer.
Their bodies stay bytes: their text and JSON read as those of the same answers unpacked would."""

from __future__ import annotations

import base64
import gzip
import json

import pytest

from adapters.platform.browser import BrowserFailure
from adapters.platform.page_fetch import unpack
from adapters.platform.platform_answers import Resp
from community_api.errors import PlatformError


def frame(
    index: int,
    body: bytes,
    status: int = 200,
    content_type: str = "application/json",
    error: str | None = None,
    retry_after: str | None = None,
) -> bytes:
    return json.dumps([index, status, content_type, error, len(body), retry_after]).encode() + b"\n" + body


def packed(*frames: bytes) -> str:
    return base64.b64encode(gzip.compress(b"".join(frames), mtime=0)).decode()  # the same ids in every process


def test_answers_come_back_in_request_order_with_their_bodies() -> None:
    page = json.dumps({"pageProps": {"title": "Grüße \u2603\nline two"}}, ensure_ascii=False).encode()
    answers = unpack(
        packed(
            frame(2, b"", status=0, content_type="", error="timeout"),
            frame(0, page),
            frame(1, b"<h1>404</h1>", status=404, content_type="text/html"),
        ),
        3,
    )
    assert answers == [
        Resp(status=200, content_type="application/json", body=page, error=None),
        Resp(status=404, content_type="text/html", body=b"<h1>404</h1>", error=None),
        Resp(status=0, content_type="", body=b"", error="timeout"),
    ]
    assert answers[0].text == page.decode() and answers[0].json() == {"pageProps": {"title": "Grüße \u2603\nline two"}}
    # The same answer unpacked, as text, is equal.
    assert answers[1] == Resp(status=404, content_type="text/html", body="<h1>404</h1>")


def test_a_header_of_odd_types_reads_as_an_unpacked_answer_of_them_would() -> None:
    odd = b'[0, "200", 7, 1, 2, 30]\n{}'
    assert unpack(packed(odd), 1) == [Resp(status=0, content_type="", body="{}", error=None)]


def test_bodies_are_read_as_response_text_reads_them() -> None:
    # A byte-order mark is dropped and broken UTF-8 becomes U+FFFD, as in the browser's Response.text().
    answers = unpack(packed(frame(0, b'\xef\xbb\xbf{"a": 1}'), frame(1, b"ok \xff\xfe end")), 2)
    assert [a.text for a in answers] == ['{"a": 1}', "ok \ufffd\ufffd end"]
    assert answers[0].json() == {"a": 1}


def test_a_body_holding_newlines_and_frame_lookalikes_is_kept_whole() -> None:
    tricky = b'[1, 200, "x", null, 3]\n' * 3
    assert unpack(packed(frame(0, tricky)), 1)[0].text == tricky.decode()


# JSON is read by orjson, and by json where orjson refuses: what json read before still comes through.
@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"t": "Gr\xc3\xbc\xc3\x9fe \xe2\x98\x83 \xf0\x9f\x98\x80"}', {"t": "Grüße \u2603 \U0001f600"}),
        (b'{"t": "\\ud83d\\ude00"}', {"t": "\U0001f600"}),
        (b'{"t": "\\ud800 lone"}', {"t": "\ud800 lone"}),  # orjson refuses a lone surrogate; json reads it
        (b'{"t": "bad \xff byte"}', {"t": "bad \ufffd byte"}),  # invalid UTF-8: U+FFFD, as Response.text()
        (b'{"n": NaN}', {"n": float("nan")}),
        (b'{"a": 1, "a": 2}', {"a": 2}),
    ],
)
def test_json_reads_as_it_did_before(body: bytes, expected: dict[str, object]) -> None:
    for resp in (Resp(200, "application/json", body), Resp(200, "application/json", body.decode(errors="replace"))):
        got = resp.json()
        assert repr(got) == repr(expected)  # repr: NaN is not equal to itself


@pytest.mark.parametrize("body", [b"", b"{", b'{"a": 1} x', b"[" * 5000 + b"]" * 5000, b"\xef\xbb\xbf{}", b'"\x01"'])
def test_malformed_json_is_a_platform_error(body: bytes) -> None:
    for resp in (Resp(200, "application/json", body), Resp(200, "application/json", body.decode(errors="replace"))):
        with pytest.raises(PlatformError):
            resp.json()
        assert resp.message() == ""


def test_the_platform_message_is_read_from_bytes_and_text() -> None:
    body = '{"message": "  must be admin or level 3 \u2603 "}'
    assert Resp(400, "application/json", body.encode()).message() == "must be admin or level 3 \u2603"
    assert Resp(400, "application/json", body).message() == "must be admin or level 3 \u2603"


@pytest.mark.parametrize(
    "package",
    [
        "not base64!",
        base64.b64encode(b"not gzip").decode(),
        packed(b"no header line"),
        packed(frame(0, b"{}"), frame(0, b"{}")),  # the same answer twice
        packed(frame(0, b"{}"), frame(0, b"[]"), frame(1, b"{}")),  # the same answer twice, and the others
        packed(frame(0, b"{}")),  # one of two answers missing
        packed(frame(0, b"{}"), frame(5, b"{}")),  # an index out of range
        packed(frame(0, b"{}"), frame(-1, b"{}")),  # a negative index (Python would read it from the end)
        packed(frame(0, b"{}"), b'[1, 200, "x", null, 99]\n{}'),  # a header of five fields
        packed(frame(0, b"{}"), b'[1, 200, "x", null, 99, null]\n{}'),  # a body cut short
        packed(frame(0, b"{}"), frame(1, b"{}")[:-2] + b"{"),  # the last body cut short by one byte
        packed(frame(0, b"{}"), b'[1, 200, "x", null, -1, null]\n{}'),  # a negative length
        packed(frame(0, b"{}"), b'{"index": 1}\n'),  # a header of another shape
        # Characters outside base64 in an otherwise good package: not skipped, as a lenient decoder would.
        (lambda good: good[:8] + "*" + good[8:])(packed(frame(0, b"{}"), frame(1, b"{}"))),
        12345,
    ],
    ids=[
        "not base64",
        "not gzip",
        "no header line",
        "the same answer twice",
        "the same answer twice, and the others",
        "one of two answers missing",
        "an index out of range",
        "a negative index",
        "a header of five fields",
        "a body cut short",
        "the last body cut short by one byte",
        "a negative length",
        "a header of another shape",
        "characters outside base64",
        "not a string",
    ],
)
def test_a_damaged_package_is_a_browser_failure(package: object) -> None:
    with pytest.raises(BrowserFailure):
        unpack(package, 2)
