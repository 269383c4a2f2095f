"""How ``PlatformClient`` sends requests through a connection's browser, with a fake pool and page: a read may
be sent again (after a browser failure, or once after a 5xx), a write only if nothing of it left; each
sending counted on the call's meter; a write's session looked at before it is sent; and what each failure
says about whether the platform may have acted (a retry under the same Idempotency-Key trusts it)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from adapters.platform.browser import BrowserFailure
from adapters.platform.browser_pool import PoolBusy
from adapters.platform.page_fetch import PageRunner, Req
from adapters.platform.platform_answers import Resp
from adapters.platform.platform_client import PlatformClient
from community_api.errors import ConnectionExpired, InvalidRequest, PlatformError, PlatformUnavailable
from community_api.model import PlatformSession
from community_api.platform_meter import metered
from fakes.clock import FakeClock
from fakes.platform_pace import FakePlatformPace

API = "https://api2.example-community.com"
SESSION = PlatformSession(connection_id="con_1", token="t")
READ = Req("GET", f"{API}/self/chat-channels?offset=0&limit=30")
WRITE = Req("POST", f"{API}/posts?follow=true", body={"post_type": "generic"})
ACCOUNT = "a" * 32


def ok(data: object = None) -> Resp:
    return Resp(200, "application/json", json.dumps({} if data is None else data))


class Lease:
    def __init__(self, pool: FakePool) -> None:
        self.pool = pool

    def browser(self) -> object:
        return object()

    def discard(self) -> None:
        self.pool.discarded += 1


class FakePool:
    def __init__(self) -> None:
        self.discarded = 0

    @contextlib.contextmanager
    def lease(self, connection_id: str) -> Iterator[Lease]:
        yield Lease(self)


class ScriptedPage(PageRunner):
    """Each ``prepare`` and ``fetch`` takes the next step of its script: an answer list, or an exception."""

    def __init__(self, prepares: list[Exception | None], fetches: list[list[Resp] | Exception]) -> None:
        super().__init__("https://www.example-community.com", API, timeout=5)
        self.prepares, self.fetches = prepares, fetches
        self.check_alive: list[bool] = []
        self.fetched: list[list[str]] = []

    def prepare(self, browser: Any, token: str, *, check_alive: bool = False) -> None:
        self.check_alive.append(check_alive)
        step = self.prepares.pop(0) if self.prepares else None
        if step is not None:
            raise step

    def fetch(self, browser: Any, reqs: Sequence[Req]) -> list[Resp]:
        self.fetched.append([r.method for r in reqs])
        step = self.fetches.pop(0)
        if isinstance(step, Exception):
            raise step
        return step


def client(page: ScriptedPage) -> PlatformClient:
    return PlatformClient(page, FakePool(), timeout=20)  # type: ignore[arg-type]


def test_the_session_is_looked_at_before_a_write_and_not_before_a_read() -> None:
    """A write sent with a dead session could be answered "nothing" and be taken for done; a read's answer
    says it for itself, so the extra look would only cost time."""
    page = ScriptedPage([], [[ok()], [ok()]])
    client(page).call(SESSION, [READ])
    client(page).call(SESSION, [WRITE], read=False)
    assert page.check_alive == [False, True]


@pytest.mark.parametrize("status", [500, 502, 503])
def test_a_read_answered_5xx_is_asked_once_more_and_a_write_never(status: int) -> None:
    failed = Resp(status, "application/json", '{"message": "busy"}')
    page = ScriptedPage([], [[failed], [ok({"channels": []})]])
    assert client(page).call(SESSION, [READ])[0].status == 200 and len(page.fetched) == 2
    page = ScriptedPage([], [[failed]])
    assert client(page).call(SESSION, [WRITE], read=False)[0].status == status and len(page.fetched) == 1


def test_a_read_whose_second_ask_the_pace_refuses_keeps_its_5xx_answer() -> None:
    """No room in the pace to ask again: the platform's 5xx stands as the answer, never a refusal of ours."""
    pace = FakePlatformPace(FakeClock(), reads_per_minute=2)
    pace.admit(ACCOUNT, 1)  # another call's read
    pace.admit(ACCOUNT, 1)  # this call's, as on_platform admits it: the minute is full
    page = ScriptedPage([], [[Resp(502, "text/html", "<h1>502</h1>")]])
    with metered(pace, ACCOUNT, reads=1, writes=0):
        assert client(page).call(SESSION, [READ])[0].status == 502
    assert len(page.fetched) == 1


def test_a_read_the_browser_failed_is_sent_again_in_a_fresh_browser_and_counted_twice() -> None:
    pace = FakePlatformPace(FakeClock())
    page = ScriptedPage([], [BrowserFailure("tab crashed"), [ok({"channels": []})]])
    with metered(pace, ACCOUNT, reads=0, writes=0) as meter:
        assert client(page).call(SESSION, [READ])[0].status == 200
    assert meter.reads_sent == 2 and len(page.fetched) == 2  # the first may have reached the platform


def test_a_write_the_browser_failed_while_sending_is_never_sent_again() -> None:
    """It may have reached the platform: sent again, a post could appear twice. The error says it may have
    acted, so a retry under the same Idempotency-Key is answered from that, not sent."""
    page = ScriptedPage([], [BrowserFailure("tab crashed"), [ok()]])
    with pytest.raises(PlatformUnavailable) as failed:
        client(page).call(SESSION, [WRITE], read=False)
    assert len(page.fetched) == 1 and failed.value.may_have_acted is True


def test_a_write_whose_browser_failed_before_sending_is_sent_once_from_a_fresh_browser() -> None:
    pace = FakePlatformPace(FakeClock())
    page = ScriptedPage([BrowserFailure("died while idle")], [[ok()]])
    with metered(pace, ACCOUNT, reads=0, writes=0) as meter:
        assert client(page).call(SESSION, [WRITE], read=False)[0].status == 200
    assert meter.writes_sent == 1 and len(page.fetched) == 1  # counted once: sent once


def test_a_write_that_never_left_says_so() -> None:
    """Two browsers failed before it was sent: nothing was done, and a retry may send it."""
    page = ScriptedPage([BrowserFailure("no"), BrowserFailure("no again")], [])
    with pytest.raises(PlatformUnavailable, match="before the write was sent") as failed:
        client(page).call(SESSION, [WRITE], read=False)
    assert failed.value.may_have_acted is False and page.fetched == []


def test_a_write_the_firewall_blocked_did_not_reach_the_platform() -> None:
    page = ScriptedPage([], [[Resp(403, "text/html", "<h1>403 ERROR</h1>Request blocked.")]])
    with pytest.raises(PlatformError, match="firewall") as failed:
        client(page).write(SESSION, WRITE, "group g", lambda data: data)
    assert failed.value.may_have_acted is False


def test_a_write_accepted_with_an_answer_we_cannot_read_may_have_acted() -> None:
    page = ScriptedPage([], [[ok([1, 2])]])

    def read_answer(data: object) -> object:
        raise PlatformError("post is not an object")

    with pytest.raises(PlatformError, match="accepted the write") as failed:
        client(page).write(SESSION, WRITE, "group g", read_answer)
    assert failed.value.may_have_acted is True


def test_who_the_session_is_is_asked_once() -> None:
    alice = {"id": ACCOUNT, "name": "alice", "first_name": "Alice", "last_name": "A"}
    page = ScriptedPage([], [[ok(alice)], [ok(alice)]])
    platform = client(page)
    assert platform.me(SESSION).id == ACCOUNT and platform.me(SESSION).id == ACCOUNT
    assert len(page.fetched) == 1
    assert platform.me(SESSION, fresh=True).id == ACCOUNT and len(page.fetched) == 2


def test_a_write_answered_401_with_nothing_whose_session_cannot_be_checked_was_refused() -> None:
    """Only an empty 200 leaves a write's outcome unknown: a 401, with a body or without, refused it."""
    page = ScriptedPage([], [[Resp(401, "application/json", "")], BrowserFailure("gone"), BrowserFailure("gone")])
    with pytest.raises(PlatformError, match="could not be checked") as failed:
        client(page).call(SESSION, [WRITE], read=False)
    assert not isinstance(failed.value, ConnectionExpired) and failed.value.may_have_acted is False


class BusyPool(FakePool):
    @contextlib.contextmanager
    def lease(self, connection_id: str) -> Iterator[Lease]:
        raise PoolBusy("every browser is in use")
        yield Lease(self)  # pragma: no cover - a generator's shape, never reached


def test_no_free_browser_is_a_wait_that_sent_nothing() -> None:
    platform = PlatformClient(ScriptedPage([], []), BusyPool(), timeout=20)  # type: ignore[arg-type]
    with pytest.raises(PlatformUnavailable, match="no browser is free") as busy:
        platform.call(SESSION, [WRITE], read=False)
    assert busy.value.may_have_acted is False and busy.value.details["retryAfter"] == 5


@pytest.mark.parametrize("token", ["", "   ", "a b", "a,b", "a\tb", "a;b", "a\rb", "a\nb"])
def test_a_session_token_no_cookie_can_hold_is_refused_without_a_browser(token: str) -> None:
    """A space, comma, tab or semicolon cannot be in a cookie's value (RFC 6265): refused before a browser
    is started for it (the fake pool has none to start)."""
    with pytest.raises(InvalidRequest, match="not valid"):
        client(ScriptedPage([], [])).adopt(token)
