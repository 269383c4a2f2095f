"""Runs the ``PlatformGateway`` contract (``gateway_cases``) against every implementation in ``HARNESSES``,
plus a few checks of the fake's own test helpers.

Adding an implementation is one line in ``HARNESSES``: a context manager factory taking the pytest request
and yielding a ``PlatformHarness``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timedelta

import attrs
import pytest

from community_api.errors import InvalidRequest, NotFound, PlatformUnavailable
from community_api.model import LinkedAccount, PlatformSession
from fakes.clock import FakeClock
from fakes.platform import FakePlatformGateway
from fakes.platform_seed import platform_id
from fakes.platform_sessions import SESSION_LIFETIME
from tests.contract.gateway_cases import (
    GROUP,
    PASSWORD,
    PlatformHarness,
    TestDirectMessages,
    TestFeed,
    TestGroups,
    TestPosts,
    TestReportedVariants,
    TestSessions,
    email,
)

__all__ = ["TestDirectMessages", "TestFeed", "TestGroups", "TestPosts", "TestReportedVariants", "TestSessions"]


@attrs.define
class FakeHarness:
    gateway: FakePlatformGateway

    def login(self, handle: str) -> PlatformSession:
        linked = self.gateway.login(email(handle), PASSWORD)
        return PlatformSession(connection_id=f"con-{handle}", token=linked.session_token)

    def now(self) -> datetime:
        return self.gateway.clock.now()

    def expire_sessions(self, handle: str) -> None:
        self.gateway.expire_sessions(handle)

    def login_lasting(self, handle: str, seconds: float) -> LinkedAccount:
        self.gateway.session_lifetime = timedelta(seconds=seconds)
        try:
            return self.gateway.login(email(handle), PASSWORD)
        finally:
            self.gateway.session_lifetime = SESSION_LIFETIME

    def readout_posts(self) -> list[str]:
        return [p.id for p in self.gateway.created_posts()] + [c.id for c in self.gateway.created_comments()]

    def readout_messages(self) -> list[tuple[str, str]]:
        return [(m.conversation_id, m.content) for m in self.gateway.sent_messages()]


@contextmanager
def fake_platform(request: pytest.FixtureRequest) -> Iterator[PlatformHarness]:
    yield FakeHarness(FakePlatformGateway(seed=1))


HARNESSES: dict[str, Callable[[pytest.FixtureRequest], AbstractContextManager[PlatformHarness]]] = {
    "fake": fake_platform,
}


@pytest.fixture(params=list(HARNESSES))
def platform(request: pytest.FixtureRequest) -> Iterator[PlatformHarness]:
    with HARNESSES[request.param](request) as harness:
        yield harness


# --- the fake's own helpers ----------------------------------------------------------------------


@pytest.fixture
def fake() -> FakePlatformGateway:
    return FakePlatformGateway(clock=FakeClock(), seed=1)


def test_seed_is_deterministic_and_holds_the_documented_facts(fake: FakePlatformGateway) -> None:
    again = FakePlatformGateway(clock=FakeClock(), seed=1)
    alice, dave = fake.session_for("alice"), fake.session_for("dave")
    feed = fake.feed_pages(alice, GROUP, "best", list(range(1, 9)))
    assert again.feed_pages(again.session_for("alice"), GROUP, "best", list(range(1, 9))) == feed
    assert len({p.id for page in feed for p in page}) == 200 and feed[-1] == []
    assert sum(p.pinned for p in feed[0]) == 2
    group = fake.get_group(alice, platform_id("grp-builders-club"))
    assert [label.id for label in group.labels][0] == platform_id("lbl-builders-club-general")
    assert len(group.labels) == 4
    assert [len(p) for p in fake.feed_pages(alice, GROUP, "best-1d", [1])][0] == 5 + 2  # 2 pinned lead
    assert len(fake.list_conversations(alice, 30, 30)) == 15  # 45 in all
    assert {g.slug for g in fake.list_groups(dave)} == {"builders-club", "design-guild"}
    with pytest.raises(NotFound):  # olive shares no group with alice
        fake.open_conversation(alice, fake.user("olive").id, None)


def test_best_windows_follow_the_clock(fake: FakePlatformGateway) -> None:
    session = fake.session_for("alice")
    clock = fake.clock
    assert isinstance(clock, FakeClock)
    clock.advance(days=2)  # the five posts of the last 24 h are now older than a day
    [page] = fake.feed_pages(session, GROUP, "best-1d", [1])
    assert page and all(p.pinned for p in page)


def test_fail_next_raises_the_given_error_the_given_number_of_times(fake: FakePlatformGateway) -> None:
    session = fake.session_for("alice")
    fake.fail_next("whoami", PlatformUnavailable("slow"), times=2)
    for _ in range(2):
        with pytest.raises(PlatformUnavailable):
            fake.whoami(session)
    assert fake.whoami(session).handle == "alice"
    assert fake.calls["whoami"] == 3
    with pytest.raises(ValueError):
        fake.fail_next("no_such_method", PlatformUnavailable("x"))


def test_failed_send_is_not_recorded(fake: FakePlatformGateway) -> None:
    session = fake.session_for("alice")
    conv = fake.open_conversation(session, fake.user("bob").id, None)
    fake.fail_next("send_message", InvalidRequest("refused"))
    with pytest.raises(InvalidRequest):
        fake.send_message(session, conv.id, "Hi")
    fake.send_message(session, conv.id, "Hi")
    assert [m.content for m in fake.sent_messages()] == ["Hi"]


def test_calls_and_pages_asked_are_counted(fake: FakePlatformGateway) -> None:
    session = fake.session_for("alice")
    fake.feed_pages(session, GROUP, "newest", [1])
    fake.feed_pages(session, GROUP, "newest", [2, 3])
    assert fake.calls["feed_pages"] == 2 and fake.feed_requests == [(1,), (2, 3)] and fake.pages_asked() == 3


def test_the_fakes_log_of_feeds_keeps_the_latest_and_counts_them_all(fake: FakePlatformGateway) -> None:
    """A bench serves millions of feeds from the fake: its log of them must not be what grows."""
    from fakes.platform import FEED_REQUESTS_KEPT

    session = fake.session_for("alice")
    for page in range(1, FEED_REQUESTS_KEPT + 501):
        fake.feed_pages(session, GROUP, "newest", [page % 5 + 1])
    assert len(fake.feed_requests) == FEED_REQUESTS_KEPT and fake.feed_requests[-1] == (
        (FEED_REQUESTS_KEPT + 500) % 5 + 1,
    )
    assert fake.pages_asked() == FEED_REQUESTS_KEPT + 500


def test_read_outs_keep_the_author_and_replies_to_replies_join_the_thread(fake: FakePlatformGateway) -> None:
    session = fake.session_for("alice")
    post = fake.create_post(session, GROUP, "Title", "Body", None)
    assert fake.created_posts()[0].author == fake.user("alice") and post.author is None
    top = fake.create_comment(session, post.id, "Top", None, None)
    reply = fake.create_comment(session, post.id, "Reply", top.id, None)
    deeper = fake.create_comment(session, post.id, "Deeper", reply.id, None)
    assert deeper.parent_id == top.id
    assert [c.id for c in fake.created_comments()] == [top.id, reply.id, deeper.id]
    fake.delete_comment(session, top.id)  # its replies go with it
    assert fake.post_detail(session, post.id, None).post.comment_count == 0
