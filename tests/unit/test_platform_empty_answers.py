"""PLATFORM.md: "an expired platform session can answer 200 with an empty body, or 401", and a 401 saying
"action not permitted" means "not a member". The gateway takes such an answer for neither until ``self``
says whether the session is alive: a dead session is an expired connection (to re-link), never a malformed
answer to a read nor a deletion done; a live one's 401 is a refusal of that request, never a connection
marked expired (which every later request of it would answer until the account is linked again)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from adapters.platform.page_fetch import PageRunner, Req
from adapters.platform.platform_answers import Resp
from adapters.platform.platform_client import PlatformClient
from community_api.errors import ConnectionExpired, Forbidden, NotFound, PlatformError, RateLimited
from community_api.model import PlatformSession

WWW, API = "https://www.platform.test", "https://api2.platform.test"
SESSION = PlatformSession(connection_id="con_1", token="t")
ALICE = {"id": "a" * 32, "name": "alice", "first_name": "Alice", "last_name": "Andersen"}
NOTHING = Resp(200, "application/json", "")


class CannedPlatform(PlatformClient):
    """Answers every request but ``self`` with ``answer``; ``self`` as a live session (alice) or, when the
    session is dead, as the platform does: 200 and nothing."""

    def __init__(self, answer: Resp, *, alive: bool) -> None:
        super().__init__(PageRunner(WWW, API, timeout=5), pool=None, timeout=5)  # type: ignore[arg-type]
        self.answer, self.alive = answer, alive
        self.sent: list[tuple[str, str]] = []

    def _send(self, session: PlatformSession, reqs: Sequence[Req], *, read: bool) -> list[Resp]:
        self.sent += [(req.method, req.url.removeprefix(API)) for req in reqs]
        return [
            (
                Resp(200, "application/json", json.dumps(ALICE) if self.alive else "")
                if req.url == f"{API}/self"
                else self.answer
            )
            for req in reqs
        ]


COMMENTS = Req("GET", f"{API}/posts/{'p' * 32}/comments?limit=25")
DELETE = Req("DELETE", f"{API}/posts/{'c' * 32}")


def test_a_read_answered_with_nothing_by_a_dead_session_is_an_expired_connection() -> None:
    platform = CannedPlatform(NOTHING, alive=False)
    with pytest.raises(ConnectionExpired):
        platform.one(SESSION, COMMENTS, "post p")
    assert platform.sent[-1] == ("GET", "/self")


def test_a_deletion_answered_with_nothing_by_a_dead_session_is_not_reported_done() -> None:
    """A known comment is deleted without a look first: the DELETE's own answer is all there is."""
    platform = CannedPlatform(NOTHING, alive=False)
    with pytest.raises(ConnectionExpired) as refused:
        platform.act(SESSION, DELETE, "comment c")
    assert refused.value.may_have_acted is False  # a dead session did nothing


def test_with_a_live_session_nothing_is_an_unreadable_answer_to_a_read_and_done_to_a_deletion() -> None:
    platform = CannedPlatform(NOTHING, alive=True)
    with pytest.raises(PlatformError, match="answered 200 with nothing in it"):
        platform.one(SESSION, COMMENTS, "post p")
    platform.act(SESSION, DELETE, "comment c")
    assert platform.sent.count(("GET", "/self")) == 2  # one look per empty answer, no more


@pytest.mark.parametrize("answer", [Resp(204, "", ""), Resp(200, "application/json", "{}")])
def test_an_answer_with_a_status_or_a_body_needs_no_look(answer: Resp) -> None:
    platform = CannedPlatform(answer, alive=False)
    platform.act(SESSION, DELETE, "comment c")
    assert platform.sent == [("DELETE", f"/posts/{'c' * 32}")]


def refusal(status: int, message: str) -> Resp:
    return Resp(status, "application/json", json.dumps({"message": message}))


def test_a_401_from_a_dead_session_is_an_expired_connection() -> None:
    platform = CannedPlatform(refusal(401, "unauthorized"), alive=False)
    with pytest.raises(ConnectionExpired):
        platform.one(SESSION, COMMENTS, "post p")


@pytest.mark.parametrize("request_", [COMMENTS, DELETE], ids=["read", "deletion"])
def test_a_401_to_a_live_session_is_a_refusal_not_an_expired_connection(request_: Req) -> None:
    platform = CannedPlatform(refusal(401, "you cannot do that here"), alive=True)
    with pytest.raises(Forbidden, match="you cannot do that here"):
        platform.one(SESSION, request_, "post p") if request_ is COMMENTS else platform.act(SESSION, request_, "c")
    assert ("GET", "/self") in platform.sent


@pytest.mark.parametrize("message", ["action not permitted", "Action not permitted", "ACTION NOT PERMITTED"])
def test_not_permitted_is_not_a_member_without_a_look(message: str) -> None:
    # Read tolerantly: the words are the platform's, their case is not a contract.
    platform = CannedPlatform(refusal(401, message), alive=False)
    with pytest.raises(NotFound):
        platform.one(SESSION, COMMENTS, "post p")
    assert ("GET", "/self") not in platform.sent


class UncheckablePlatform(CannedPlatform):
    """The session check cannot be made: the read pace has no room left for it."""

    def _send(self, session: PlatformSession, reqs: Sequence[Req], *, read: bool) -> list[Resp]:
        if any(req.url == f"{API}/self" for req in reqs):
            raise RateLimited("no room in the read pace", retry_after=10, reason="read_pace")
        return super()._send(session, reqs, read=read)


def test_a_write_whose_session_cannot_be_checked_keeps_its_unknown_outcome() -> None:
    """A create answered with nothing may have been done: if the session check cannot be made, the answer
    is not turned into a refusal ("nothing done"), which a retry would take as leave to post again."""
    platform = UncheckablePlatform(NOTHING, alive=True)
    create = Req("POST", f"{API}/posts?follow=true", body={"post_type": "comment"})
    with pytest.raises(PlatformError) as failed:
        platform.write(SESSION, create, "post p", lambda data: data)
    assert failed.value.may_have_acted is True
    with pytest.raises(PlatformError) as failed:  # nor is a deletion answered so reported done
        platform.act(SESSION, DELETE, "comment c")
    assert failed.value.may_have_acted is True
    with pytest.raises(RateLimited):  # a read has nothing to lose: the check's refusal is its answer
        platform.one(SESSION, COMMENTS, "post p")


@pytest.mark.parametrize("request_", [DELETE, Req("POST", f"{API}/posts?follow=true", body={})], ids=["act", "write"])
def test_a_write_refused_401_whose_session_cannot_be_checked_marks_nothing_expired(request_: Req) -> None:
    """The 401 may mean a dead session or a refusal PLATFORM.md does not describe; unchecked, it is neither:
    the write was refused (nothing done, so a DM's quota is given back and a retry may send it), and the
    connection is not marked expired, which only the person linking the account again would undo."""
    platform = UncheckablePlatform(refusal(401, "unauthorized"), alive=True)
    with pytest.raises(PlatformError, match="could not be checked") as failed:
        if request_ is DELETE:
            platform.act(SESSION, request_, "comment c")
        else:
            platform.write(SESSION, request_, "post p", lambda data: data)
    assert not isinstance(failed.value, ConnectionExpired)
    assert failed.value.may_have_acted is False
