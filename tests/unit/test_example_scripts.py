"""The example scripts (``scripts/examples/``) meet the API's answers as they say they do: a 429, or a 503
that says how long, is waited out for its Retry-After, a few times at most, every other error reported by
its code; a comment is sent again under the same Idempotency-Key when no answer came or the first try is
still in progress, and never when the outcome is unknown. The answers come from a transport adapter of
requests' own kind, so the scripts' real session code runs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
import requests
from requests.adapters import BaseAdapter

from scripts.examples.api_client import LONGEST_WAIT, WAITS, ApiError
from scripts.examples.comment import PAUSES, Unfinished, comment
from scripts.examples.digest import call

URL = "http://api.test/v1/whoami"


Answer = tuple[int, Mapping[str, str], Any] | Exception


class Canned(BaseAdapter):
    """Answers each request with the next of ``answers`` (status, headers, body; or an exception to raise,
    as requests raises a time-out) and keeps the requests."""

    def __init__(self, *answers: Answer) -> None:
        super().__init__()
        self.answers = list(answers)
        self.sent: list[requests.PreparedRequest] = []

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        self.sent.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        status, headers, body = answer
        response = requests.Response()
        response.status_code = status
        response.headers.update(headers)
        response._content = (body if isinstance(body, str) else json.dumps(body)).encode()
        response.url = request.url or ""
        response.request = request
        return response

    def close(self) -> None:
        pass


def session_with(adapter: Canned) -> requests.Session:
    session = requests.Session()
    session.mount("http://", adapter)
    return session


def refused(code: str, retry_after: int | None = None, status: int = 429) -> tuple[int, dict[str, str], Any]:
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    return status, headers, {"error": {"code": code, "message": f"{code} message", "details": {}}}


WHOAMI: tuple[int, dict[str, str], Any] = (200, {}, {"id": "a" * 32, "handle": "alice", "name": "Alice"})


def test_a_429_is_waited_out_for_its_retry_after_then_the_answer_is_read(capsys: pytest.CaptureFixture[str]) -> None:
    adapter = Canned(refused("rate_limited", 7), refused("rate_limited", 2), WHOAMI)
    slept: list[float] = []
    assert call(session_with(adapter), URL, sleep=slept.append)["handle"] == "alice"
    assert slept == [7, 2] and len(adapter.sent) == 3
    # The person running it is told why it pauses.
    assert capsys.readouterr().err.splitlines() == [
        "waiting 7 s: rate_limited message",
        "waiting 2 s: rate_limited message",
    ]


def test_waiting_stops_after_a_few_tries_and_the_refusal_is_reported() -> None:
    adapter = Canned(*[refused("rate_limited", 1)] * (WAITS + 1))
    slept: list[float] = []
    with pytest.raises(ApiError) as raised:
        call(session_with(adapter), URL, sleep=slept.append)
    assert raised.value.code == "rate_limited" and raised.value.status == 429
    assert len(slept) == WAITS and len(adapter.sent) == WAITS + 1


def test_a_503_that_says_how_long_is_waited_out_too(capsys: pytest.CaptureFixture[str]) -> None:
    """No browser was free: nothing was sent, and the service says when to try again."""
    adapter = Canned(refused("platform_unavailable", 5, status=503), WHOAMI)
    slept: list[float] = []
    assert call(session_with(adapter), URL, sleep=slept.append)["handle"] == "alice"
    assert slept == [5] and len(adapter.sent) == 2
    assert capsys.readouterr().err.splitlines() == ["waiting 5 s: platform_unavailable message"]


def test_a_wait_longer_than_the_script_will_sleep_is_reported_at_once() -> None:
    adapter = Canned(refused("rate_limited", LONGEST_WAIT + 1))
    slept: list[float] = []
    with pytest.raises(ApiError, match="rate_limited"):
        call(session_with(adapter), URL, sleep=slept.append)
    assert slept == [] and len(adapter.sent) == 1


@pytest.mark.parametrize(
    ("answer", "code", "status"),
    [
        (refused("connection_expired", status=409), "connection_expired", 409),
        (refused("unauthorized", status=401), "unauthorized", 401),
        (refused("platform_unavailable", status=503), "platform_unavailable", 503),  # may have acted
        ((502, {}, "<html>Bad gateway</html>"), "http_error", 502),  # a proxy's page, not the API's body
    ],
)
def test_other_refusals_are_reported_by_their_code_and_never_retried(
    answer: tuple[int, dict[str, str], Any], code: str, status: int
) -> None:
    adapter = Canned(answer)
    slept: list[float] = []
    with pytest.raises(ApiError) as raised:
        call(session_with(adapter), URL, sleep=slept.append)
    assert (raised.value.code, raised.value.status) == (code, status)
    assert slept == [] and len(adapter.sent) == 1


POST = "0a06a296f7cd4d28b5da867098733415"
MADE: tuple[int, dict[str, str], Any] = (
    201,
    {},
    {"id": "1" * 32, "postId": POST, "parentId": None, "content": "Thanks"},
)
REPLAYED = (201, {"Idempotent-Replayed": "true"}, MADE[2])


def in_progress() -> Answer:
    body = {"error": {"code": "conflict", "message": "still in progress", "details": {"reason": "in_progress"}}}
    return 409, {}, body


def post_comment(adapter: Canned, slept: list[float]) -> tuple[dict[str, Any], bool]:
    return comment(session_with(adapter), "http://api.test", POST, "Thanks", parent=None, key="k-1", sleep=slept.append)


def test_a_comment_with_no_answer_is_sent_again_under_the_same_key_and_made_once() -> None:
    adapter = Canned(requests.Timeout("read timed out"), requests.ConnectionError("reset"), in_progress(), REPLAYED)
    slept: list[float] = []
    made, replayed = post_comment(adapter, slept)
    assert made["id"] == "1" * 32 and replayed
    assert slept == list(PAUSES)
    assert [request.headers["Idempotency-Key"] for request in adapter.sent] == ["k-1"] * 4
    assert {request.body for request in adapter.sent} == {b'{"content": "Thanks"}'}  # the same request each time


def test_a_comment_answered_at_once_is_not_a_replay() -> None:
    adapter = Canned(MADE)
    assert post_comment(adapter, []) == (MADE[2], False)
    assert adapter.sent[0].url == f"http://api.test/v1/posts/{POST}/comments"


def test_no_answer_at_all_ends_with_the_key_to_finish_it_with() -> None:
    adapter = Canned(*[requests.Timeout("read timed out")] * (len(PAUSES) + 1))
    with pytest.raises(Unfinished, match="--idempotency-key k-1 to finish it"):
        post_comment(adapter, [])
    assert len(adapter.sent) == len(PAUSES) + 1


@pytest.mark.parametrize(
    ("details", "status"),
    [
        ({"reason": "different_request"}, 409),  # the key was used for another comment: never sent again
        ({"reason": "never_finished", "outcomeUnknown": True}, 409),
        ({"outcomeUnknown": True}, 502),  # the platform may have published it: look first
    ],
)
def test_a_refusal_or_an_unknown_outcome_is_never_sent_again(details: dict[str, Any], status: int) -> None:
    body = {"error": {"code": "conflict" if status == 409 else "platform_error", "message": "m", "details": details}}
    adapter = Canned((status, {}, body))
    slept: list[float] = []
    with pytest.raises(ApiError) as raised:
        post_comment(adapter, slept)
    assert raised.value.details == details and len(adapter.sent) == 1 and slept == []
