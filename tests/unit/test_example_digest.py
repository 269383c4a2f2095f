"""The example script's client (``scripts/examples/digest.py``) meets the API's refusals as it says it does:
a 429 is waited out for its Retry-After, a few times at most; every other error is reported by its code.
The answers come from a transport adapter of requests' own kind, so the script's real session code runs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
import requests
from requests.adapters import BaseAdapter

from scripts.examples.digest import LONGEST_WAIT, WAITS, ApiError, call

URL = "http://api.test/v1/whoami"


class Canned(BaseAdapter):
    """Answers each request with the next of ``answers`` (status, headers, body) and keeps the requests."""

    def __init__(self, *answers: tuple[int, Mapping[str, str], Any]) -> None:
        super().__init__()
        self.answers = list(answers)
        self.sent: list[requests.PreparedRequest] = []

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        self.sent.append(request)
        status, headers, body = self.answers.pop(0)
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


WHOAMI = (200, {}, {"id": "a" * 32, "handle": "alice", "name": "Alice"})


def test_a_429_is_waited_out_for_its_retry_after_then_the_answer_is_read(capsys: pytest.CaptureFixture[str]) -> None:
    adapter = Canned(refused("rate_limited", 7), refused("rate_limited", 2), WHOAMI)
    slept: list[float] = []
    assert call(session_with(adapter), URL, sleep=slept.append)["handle"] == "alice"
    assert slept == [7, 2] and len(adapter.sent) == 3
    # The person running it is told why it pauses.
    assert capsys.readouterr().err.splitlines() == [
        "digest: waiting 7 s. rate_limited message",
        "digest: waiting 2 s. rate_limited message",
    ]


def test_waiting_stops_after_a_few_tries_and_the_refusal_is_reported() -> None:
    adapter = Canned(*[refused("rate_limited", 1)] * (WAITS + 1))
    slept: list[float] = []
    with pytest.raises(ApiError) as raised:
        call(session_with(adapter), URL, sleep=slept.append)
    assert raised.value.code == "rate_limited" and raised.value.status == 429
    assert len(slept) == WAITS and len(adapter.sent) == WAITS + 1


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
        (refused("platform_unavailable", retry_after=5, status=503), "platform_unavailable", 503),
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
