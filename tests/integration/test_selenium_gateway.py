"""``SeleniumPlatformGateway`` in headless Chromium against the stand-in platform, under the faults the
real site produces: a deploy (stale build id), an expired firewall token, an expired session, 5xx
answers, slowness, a crashed browser. One sandbox process (session fixture) and one gateway serve the
module; the sandbox is reset around each test.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs

import attrs
import jwt
import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from adapters.platform.platform_client import DRIVER_LOGGER
from adapters.platform.selenium_platform_gateway import SeleniumPlatformGateway
from community_api.errors import (
    ConnectionExpired,
    Forbidden,
    InvalidRequest,
    NotFound,
    PlatformError,
    PlatformUnavailable,
    ServiceError,
)
from community_api.model import PlatformSession
from scripts.processes import alive
from scripts.sandbox.seed import build_world
from tests.sandbox_support import SandboxProcess

pytestmark = [pytest.mark.browser, pytest.mark.slow]

GROUP = "builders-club"
TIMEOUT = 5.0
INBOX = "/api2/self/chat-channels"


@pytest.fixture(scope="module")
def gateway(sandbox: SandboxProcess) -> Iterator[SeleniumPlatformGateway]:
    gw = SeleniumPlatformGateway(
        sandbox.url, sandbox.api_url, pool_size=3, timeout=TIMEOUT, trusted_spki=sandbox.trusted_spki
    )
    try:
        yield gw
    finally:
        gw.close()


@pytest.fixture(scope="module")
def alice(gateway: SeleniumPlatformGateway, sandbox: SandboxProcess) -> PlatformSession:
    sandbox.reset()
    linked = gateway.login("alice@sandbox.test", "sandbox")
    return PlatformSession(connection_id="con-alice", token=linked.session_token)


@pytest.fixture(autouse=True)
def clean(sandbox: SandboxProcess) -> Iterator[None]:
    sandbox.reset()
    yield
    sandbox.reset()


def faults(sandbox: SandboxProcess) -> list[dict[str, Any]]:
    return list(sandbox.control("state")["faults"])


def asked(sandbox: SandboxProcess, since: int = 0) -> list[dict[str, Any]]:
    """The requests the stand-in served from the ``since``-th on, but Chromium's own ``/favicon.ico``, which a
    page load (of an earlier test's browser too) can send at any moment after it."""
    return [r for r in sandbox.control("requests")["requests"][since:] if r["path"] != "/favicon.ico"]


# --- renewals the client never sees ------------------------------------------------------------------
def test_stale_build_id_is_renewed_invisibly(
    gateway: SeleniumPlatformGateway, alice: PlatformSession, sandbox: SandboxProcess
) -> None:
    before = gateway.feed_pages(alice, GROUP, "newest", [1, 2])
    old = sandbox.control("state")["buildId"]
    new = sandbox.control("build-id", {})["buildId"]
    assert new != old
    assert gateway.feed_pages(alice, GROUP, "newest", [1, 2]) == before
    assert gateway.feed_pages(alice, GROUP, "newest", [1, 2]) == before


def test_expired_firewall_token_is_renewed_invisibly_for_reads_and_writes(
    gateway: SeleniumPlatformGateway, alice: PlatformSession, sandbox: SandboxProcess
) -> None:
    assert gateway.list_conversations(alice, 0, 30)
    sandbox.control("expire-firewall", {})
    assert len(gateway.list_conversations(alice, 0, 30)) == 30
    sandbox.control("expire-firewall", {})
    post = gateway.create_post(alice, GROUP, "Through a fresh firewall token", "", None)
    # The blocked attempt never reached the platform, so running it again created exactly one post.
    assert [r["id"] for r in sandbox.control("created")["created"]] == [post.id]


def test_expired_session_is_connection_expired(gateway: SeleniumPlatformGateway, sandbox: SandboxProcess) -> None:
    linked = gateway.login("carol@sandbox.test", "sandbox")
    carol = PlatformSession(connection_id="con-carol", token=linked.session_token)
    post = gateway.feed_pages(carol, GROUP, "newest", [1])[0][0]
    sandbox.control("expire-session", {"user": "carol"})
    calls = {
        "whoami (200, empty body)": lambda: gateway.whoami(carol),
        "feed (signed-out page data)": lambda: gateway.feed_pages(carol, GROUP, "newest", [1]),
        "inbox (401)": lambda: gateway.list_conversations(carol, 0, 30),
        "post detail (401)": lambda: gateway.post_detail(carol, post.id, GROUP),
    }
    for name, call in calls.items():
        with pytest.raises(ConnectionExpired):
            call()
            pytest.fail(f"{name} did not raise")


def test_a_session_token_that_says_it_has_ended_is_refused_without_asking_the_platform(
    gateway: SeleniumPlatformGateway, sandbox: SandboxProcess
) -> None:
    """The token's own ``exp`` is read (its signature is the platform's to check): one that has passed needs
    no browser and no request to say so, with its date."""
    ended = jwt.encode({"user_id": "0" * 32, "exp": int(time.time()) - 3600}, "not-the-platforms-key" * 2)
    with pytest.raises(InvalidRequest) as caught:
        gateway.adopt_session(ended)
    assert "the platform session token ended on" in caught.value.message
    assert asked(sandbox) == []


# --- server errors and slowness ----------------------------------------------------------------------
def test_one_500_on_a_read_is_asked_again(
    gateway: SeleniumPlatformGateway, alice: PlatformSession, sandbox: SandboxProcess
) -> None:
    sandbox.control("errors", {"route": INBOX, "status": 500, "count": 1})
    assert len(gateway.list_conversations(alice, 0, 30)) == 30
    assert faults(sandbox)[0]["remaining"] == 0  # the 500 was served, then the read asked again


def test_repeated_500s_on_a_read_are_a_platform_error_after_one_retry(
    gateway: SeleniumPlatformGateway, alice: PlatformSession, sandbox: SandboxProcess
) -> None:
    sandbox.control("errors", {"route": INBOX, "status": 500, "count": 3})
    with pytest.raises(PlatformError):
        gateway.list_conversations(alice, 0, 30)
    assert faults(sandbox)[0]["remaining"] == 1  # asked exactly twice


def test_a_500_on_a_write_is_never_retried(
    gateway: SeleniumPlatformGateway, alice: PlatformSession, sandbox: SandboxProcess
) -> None:
    sandbox.control("errors", {"route": "^/api2/posts$", "status": 500, "count": 1})
    with pytest.raises(PlatformError) as failed:
        gateway.create_post(alice, GROUP, "Refused once", "", None)
    assert failed.value.may_have_acted  # a 5xx to a write says nothing sure
    assert sandbox.control("created")["created"] == []
    gateway.create_post(alice, GROUP, "Accepted", "", None)
    assert [r["title"] for r in sandbox.control("created")["created"]] == ["Accepted"]


@pytest.mark.parametrize(
    ("status", "error", "may_have_acted"),
    [(502, PlatformError, True), (504, PlatformError, True), (400, InvalidRequest, False), (403, Forbidden, False)],
)
def test_whether_a_failed_dm_send_may_have_gone_out(
    gateway: SeleniumPlatformGateway,
    alice: PlatformSession,
    sandbox: SandboxProcess,
    status: int,
    error: type[ServiceError],
    may_have_acted: bool,
) -> None:
    """What the DM quota and the Idempotency-Key go by: a refusal (4xx) sent nothing, a 5xx may have."""
    conversation = gateway.list_conversations(alice, 0, 1)[0]
    sandbox.control("errors", {"route": "^/api2/channels/[^/]+/messages$", "status": status, "count": 1})
    with pytest.raises(error) as failed:
        gateway.send_message(alice, conversation.id, "maybe")
    assert failed.value.may_have_acted is may_have_acted


def test_a_dm_whose_sender_cannot_be_asked_is_not_sent_and_says_so(
    gateway: SeleniumPlatformGateway, alice: PlatformSession, sandbox: SandboxProcess
) -> None:
    """The sender (the signed-in user) is asked before the send: when that read times out, nothing went out,
    so the DM quota and an Idempotency-Key may be used again (``may_have_acted`` False)."""
    conversation = gateway.list_conversations(alice, 0, 1)[0]
    gateway._client._selves.pop(hashlib.sha256(alice.token.encode()).hexdigest())  # as a fresh worker
    sandbox.control("latency", {"route": "^/api2/self$", "ms": int((TIMEOUT + 3) * 1000)})
    with pytest.raises(PlatformUnavailable) as failed:
        gateway.send_message(alice, conversation.id, "never sent")
    assert failed.value.may_have_acted is False
    assert [m for m in sandbox.control("sent")["sent"] if m["content"] == "never sent"] == []


def test_a_comment_whose_post_cannot_be_read_first_is_not_sent_and_says_so(
    gateway: SeleniumPlatformGateway, alice: PlatformSession, sandbox: SandboxProcess
) -> None:
    """A new comment first reads its post (the group the platform wants in the body): when that read times
    out, nothing was sent, so a retry under the same Idempotency-Key may act (``may_have_acted`` False)."""
    post = gateway.create_post(alice, GROUP, "Commented later", "", None)
    sandbox.control("latency", {"route": f"^/api2/posts/{post.id}/comments$", "ms": int((TIMEOUT + 3) * 1000)})
    with pytest.raises(PlatformUnavailable) as failed:
        gateway.create_comment(alice, post.id, "never sent", None, GROUP)
    assert failed.value.may_have_acted is False
    assert [c for c in sandbox.control("created")["created"] if c["content"] == "never sent"] == []


def test_a_write_whose_browser_never_reached_the_platform_says_nothing_was_sent(
    gateway: SeleniumPlatformGateway, alice: PlatformSession, sandbox: SandboxProcess
) -> None:
    """A write's browser must be on the platform's page first: a fresh browser whose page does not load in
    time never sent the write, so a DM's quota and an Idempotency-Key may be used again."""
    conversation = gateway.list_conversations(alice, 0, 1)[0]
    gateway._client.me(alice)  # the sender known: the write is the first request the call makes
    fresh = attrs.evolve(alice, connection_id="con-alice-fresh")  # a browser not started yet
    sandbox.control("latency", {"route": "^/login$", "ms": int((TIMEOUT + 3) * 1000)})
    with pytest.raises(PlatformUnavailable) as failed:
        gateway.send_message(fresh, conversation.id, "never sent either")
    assert failed.value.may_have_acted is False
    assert [m for m in sandbox.control("sent")["sent"] if m["content"] == "never sent either"] == []


def test_latency_beyond_the_timeout_is_platform_unavailable(
    gateway: SeleniumPlatformGateway, alice: PlatformSession, sandbox: SandboxProcess
) -> None:
    gateway.list_conversations(alice, 0, 30)  # warm
    sandbox.control("latency", {"route": INBOX, "ms": int((TIMEOUT + 3) * 1000)})
    started = time.monotonic()
    with pytest.raises(PlatformUnavailable, match="did not answer in time"):  # not "could not be reached"
        gateway.list_conversations(alice, 0, 30)
    assert time.monotonic() - started < TIMEOUT + 2
    sandbox.control("clear-faults", {})
    assert gateway.list_conversations(alice, 0, 30)  # the browser is still fine


def test_a_new_browser_waits_for_the_firewalls_token_before_its_first_call(
    gateway: SeleniumPlatformGateway, alice: PlatformSession, sandbox: SandboxProcess
) -> None:
    """The page's firewall script obtains its token after the page has loaded (here, a second later): a
    call sent before it would be blocked, and sent again. The platform sees the call once."""
    sandbox.control("latency", {"route": "/__fw/challenge", "ms": 1500})
    fresh = PlatformSession(connection_id="con-fresh-browser", token=alice.token)
    since = len(sandbox.control("requests")["requests"])
    assert len(gateway.list_conversations(fresh, 0, 30)) == 30
    assert [r["path"] for r in asked(sandbox, since) if r["path"].startswith("/api2/")] == [INBOX]


# --- the browser itself ------------------------------------------------------------------------------
def test_signing_in_takes_its_browser_from_the_pool(sandbox: SandboxProcess) -> None:
    """A pool of one: linking a second account closes the idle warm browser first, so a worker never runs
    more browsers than its pool size (before, the sign-in browser started beside it)."""
    gw = SeleniumPlatformGateway(
        sandbox.url, sandbox.api_url, pool_size=1, timeout=TIMEOUT, trusted_spki=sandbox.trusted_spki
    )
    try:
        alice = PlatformSession("con-a", gw.login("alice@sandbox.test", "sandbox").session_token)
        gw.list_conversations(alice, 0, 1)
        warm = gw.browser_pids(alice.connection_id)
        assert warm and gw.live_browsers() == 1
        gw.login("bob@sandbox.test", "sandbox")
        assert not any(alive(pid) for pid in warm)
        assert gw.live_browsers() == 0
    finally:
        gw.close()


def test_killed_chromium_is_replaced_and_the_read_succeeds(
    gateway: SeleniumPlatformGateway, alice: PlatformSession, sandbox: SandboxProcess
) -> None:
    expected = [c.id for c in gateway.list_conversations(alice, 0, 30)]
    old = gateway.browser_pids(alice.connection_id)
    assert old
    sandbox.control("latency", {"route": INBOX, "ms": 1500})
    outcome: dict[str, Any] = {}

    def read() -> None:
        try:
            outcome["ids"] = [c.id for c in gateway.list_conversations(alice, 0, 30)]
        except Exception as error:  # reported below
            outcome["error"] = error

    reader = threading.Thread(target=read)
    reader.start()
    time.sleep(0.7)  # the request is waiting on the platform now
    for pid in old:
        os.kill(pid, signal.SIGKILL)
    reader.join(30)
    assert not reader.is_alive()
    assert "error" not in outcome, outcome.get("error")
    assert outcome["ids"] == expected
    new = gateway.browser_pids(alice.connection_id)
    assert new and not set(new) & set(old)


def test_a_browser_that_died_while_idle_is_replaced_before_a_write(
    gateway: SeleniumPlatformGateway, alice: PlatformSession, sandbox: SandboxProcess
) -> None:
    gateway.feed_pages(alice, GROUP, "newest", [1])  # the group is known: the write is the next call
    old = gateway.browser_pids(alice.connection_id)
    for pid in old:
        os.kill(pid, signal.SIGKILL)
    post = gateway.create_post(alice, GROUP, "After a crash", "", None)
    # Nothing had been sent when the dead browser failed, so the write went out once, on a fresh one.
    assert [r["id"] for r in sandbox.control("created")["created"]] == [post.id]
    assert not set(gateway.browser_pids(alice.connection_id)) & set(old)


def test_thirty_feed_pages_are_fetched_in_one_script_call(
    gateway: SeleniumPlatformGateway, alice: PlatformSession, sandbox: SandboxProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    gateway.feed_pages(alice, GROUP, "newest", [1])  # warm: browser, firewall token, build id
    sandbox.control("latency", {"route": "/_next/data/", "ms": 300})
    scripts: list[str] = []
    original = WebDriver.execute_async_script

    def counting(self: WebDriver, script: str, *args: Any) -> Any:
        scripts.append(script)
        return original(self, script, *args)

    monkeypatch.setattr(WebDriver, "execute_async_script", counting)
    started = time.monotonic()
    pages = gateway.feed_pages(alice, GROUP, "newest", list(range(1, 31)))
    elapsed = time.monotonic() - started
    assert len(scripts) == 1
    assert len(pages) == 30 and all(len(page) >= 30 for page in pages)
    # One page after another would take 30 × 300 ms = 9 s of latency alone; at once, six at a time over
    # HTTP/1.1, 1.5 s. Half the sequential time leaves a slow machine room without letting a sequence pass.
    assert elapsed < 4.5, f"30 pages took {elapsed:.2f} s"


def test_close_quits_every_browser_and_removes_its_profile(alice: PlatformSession, sandbox: SandboxProcess) -> None:
    own = SeleniumPlatformGateway(
        sandbox.url, sandbox.api_url, pool_size=2, timeout=TIMEOUT, trusted_spki=sandbox.trusted_spki
    )
    try:
        assert own.whoami(alice).handle == "alice"
        pids = own.browser_pids(alice.connection_id)
        assert pids
        profiles = [_profile_dir(pid) for pid in pids]
        assert all(p and os.path.isdir(p) for p in profiles)
    finally:
        own.close()
    time.sleep(0.5)
    assert not any(alive(pid) for pid in pids)
    assert not any(p and os.path.exists(p) for p in profiles)
    assert own.live_browsers() == 0


def test_an_idle_browser_is_closed_and_the_next_call_starts_another(
    alice: PlatformSession, sandbox: SandboxProcess
) -> None:
    own = SeleniumPlatformGateway(
        sandbox.url, sandbox.api_url, pool_size=2, timeout=TIMEOUT, trusted_spki=sandbox.trusted_spki, browser_idle=0.5
    )
    try:
        assert own.whoami(alice).handle == "alice"
        pids = own.browser_pids(alice.connection_id)
        profiles = [_profile_dir(pid) for pid in pids]
        deadline = time.monotonic() + 10  # the pool looks every second
        while own.live_browsers() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert own.live_browsers() == 0

        def left() -> tuple[bool, bool]:
            # The sweeper closes it on its own thread: processes end first, then the profile is removed.
            return any(alive(pid) for pid in pids), any(p and os.path.exists(p) for p in profiles)

        while left() != (False, False) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert left() == (False, False)
        # The connection's session is not lost with its browser: the next call signs a new one in with it.
        assert own.whoami(alice).handle == "alice"
        assert own.live_browsers() == 1 and set(own.browser_pids(alice.connection_id)).isdisjoint(pids)
    finally:
        own.close()


def _profile_dir(pid: int) -> str | None:
    with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
        args = cmdline.read().decode(errors="replace").split("\0")
    return next((a.split("=", 1)[1] for a in args if a.startswith("--user-data-dir=")), None)


# --- sign-in -----------------------------------------------------------------------------------------
def test_sign_in_refusals_are_clear_and_bounded(gateway: SeleniumPlatformGateway) -> None:
    started = time.monotonic()
    with pytest.raises(InvalidRequest, match="two-factor"):
        gateway.login("mallory@sandbox.test", "sandbox")
    assert time.monotonic() - started < TIMEOUT + 10  # a browser start plus the form, never a hang
    with pytest.raises(InvalidRequest, match="refused these credentials"):
        gateway.login("alice@sandbox.test", "wrong")
    with pytest.raises(InvalidRequest, match="not valid"):
        gateway.adopt_session("eyJhbGciOiJIUzI1NiJ9.e30.forged")


def test_a_sign_in_the_firewall_blocks_is_a_platform_failure_not_wrong_credentials(
    gateway: SeleniumPlatformGateway, sandbox: SandboxProcess
) -> None:
    """The login page says "Request blocked" when its firewall challenge fails: the form never reached the
    platform, so the caller must not be told the credentials are wrong (and go and change a right password)."""
    sandbox.control("errors", {"route": "/__fw/challenge", "status": 500, "count": 20})
    with pytest.raises(PlatformError, match="firewall blocked the login"):
        gateway.login("alice@sandbox.test", "sandbox")


def test_the_typed_password_is_not_logged_even_at_debug_level(
    gateway: SeleniumPlatformGateway, caplog: pytest.LogCaptureFixture
) -> None:
    """Selenium logs every WebDriver command at DEBUG, a typed text included: an operator who turns DEBUG on
    to see why linking fails must not find the platform password in the log."""
    caplog.set_level(logging.DEBUG, logger=DRIVER_LOGGER)
    assert gateway.login("alice@sandbox.test", "sandbox").user.handle == "alice"
    assert "/login" in caplog.text  # the driver's commands are logged
    # Selenium writes a command's parameters as a Python dict: the text typed would read 'sandbox'.
    assert "'sandbox'" not in caplog.text and '"sandbox"' not in caplog.text


def test_credentials_are_typed_as_written(gateway: SeleniumPlatformGateway) -> None:
    """WebDriver types a newline as Enter (the form went before the password was typed, and the sign-in that
    followed was reported as the page not working), a tab as a move to the next field, and U+E000-U+E05D as
    its named keys. Newlines are dropped, as the inputs themselves drop them; the rest is refused at once."""
    assert gateway.login("alice@sandbox.test\n", "sandbox\r\n").user.handle == "alice"
    for password in ["sand\tbox", "sandbox\ue007", "sand\ue003box", "sand\x00box"]:
        started = time.monotonic()
        with pytest.raises(InvalidRequest, match="control character"):
            gateway.login("alice@sandbox.test", password)
        assert time.monotonic() - started < 1  # refused before a browser starts
    with pytest.raises(InvalidRequest, match="email holds a control character") as caught:
        gateway.login("alice@sandbox.test\t", "sandbox")
    assert caught.value.details == {"field": "email"}


def test_credentials_the_login_form_keeps_back_are_the_callers_input(gateway: SeleniumPlatformGateway) -> None:
    """The login page's ``#email`` is an ``type=email`` input: the browser itself refuses to send the form
    for an address it cannot read, so nothing reaches the platform and waiting would end in a time-out.
    ``LOGIN_STATE`` reports the field; the caller hears which one, at once, in the browser's words."""
    started = time.monotonic()
    with pytest.raises(InvalidRequest, match="login form does not take this email") as caught:
        gateway.login("alice-at-sandbox.test", "sandbox")
    assert caught.value.details == {"field": "email"}
    assert time.monotonic() - started < TIMEOUT  # told, not timed out
    assert gateway.login("alice@sandbox.test", "sandbox").user.handle == "alice"  # the pool is unharmed


def test_a_sign_in_that_meets_a_captcha_fails_clearly(
    gateway: SeleniumPlatformGateway, sandbox: SandboxProcess
) -> None:
    """PLATFORM.md: captchas exist on the real site, and a sign-in that meets one must fail with a clear
    message, never hang. The stand-in shows an hCaptcha widget after the form (control API ``captcha``)."""
    sandbox.control("captcha", {"user": "carol"})
    try:
        started = time.monotonic()
        with pytest.raises(InvalidRequest, match="captcha"):
            gateway.login("carol@sandbox.test", "sandbox")
        assert time.monotonic() - started < TIMEOUT + 10
    finally:
        sandbox.control("captcha", {"user": "carol", "enabled": False})
    assert gateway.login("carol@sandbox.test", "sandbox").user.handle == "carol"


# --- comments beyond one page ------------------------------------------------------------------------
def test_post_detail_walks_every_page_of_comments(gateway: SeleniumPlatformGateway, alice: PlatformSession) -> None:
    post = gateway.create_post(alice, GROUP, "Many comments", "", None)
    made = [gateway.create_comment(alice, post.id, f"Comment {n}", None, GROUP).id for n in range(33)]
    reply = gateway.create_comment(alice, post.id, "A reply to the last", made[-1], None)
    detail = gateway.post_detail(alice, post.id, None)
    assert [c.id for c in detail.comments] == [*made, reply.id]
    assert detail.comments[-1].parent_id == made[-1]
    assert detail.post.comment_count == 33  # top-level comments: the reply is not counted


# --- privacy -----------------------------------------------------------------------------------------
def test_nothing_private_leaves_the_gateway(gateway: SeleniumPlatformGateway, sandbox: SandboxProcess) -> None:
    linked = gateway.login("alice@sandbox.test", "sandbox")
    session = PlatformSession(connection_id="con-alice-privacy", token=linked.session_token)
    group = gateway.get_group(session, GROUP)
    pages = gateway.feed_pages(session, GROUP, "newest", [1, 2])
    inbox = gateway.list_conversations(session, 0, 30)
    returned: list[Any] = [
        linked.user,
        gateway.whoami(session),
        gateway.list_groups(session),
        group,
        pages,
        gateway.post_detail(session, pages[0][0].id, None),
        inbox,
        gateway.get_messages(session, inbox[0].id, None),
    ]
    text = json.dumps([_plain(item) for item in returned], default=str)
    secrets = _private_values()
    assert secrets
    leaked = sorted(s for s in secrets if s in text)
    assert leaked == []
    assert linked.session_token not in text


def _plain(value: Any) -> Any:
    if attrs.has(type(value)):
        return attrs.asdict(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _private_values() -> set[str]:
    """Every private value of the sandbox's sign-in users (their ``self`` record): emails, payment
    methods, other services' keys, customer ids, and the field names themselves."""
    world = build_world(1, 0)
    found: set[str] = {
        "paymentMethods", "apiKeys", "stripeCustomerId", "payment_methods", "api_keys", "unreadChats", "unread_chats",
    }  # fmt: skip

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, str) and len(value) >= 6:
            found.add(value)

    for user in world.users.values():
        if user.email:
            found.add(user.email)
            walk(user.private)
    return found


def test_a_post_with_three_pages_of_comments_is_read_whole_25_at_a_time(
    gateway: SeleniumPlatformGateway, alice: PlatformSession, sandbox: SandboxProcess
) -> None:
    """PLATFORM.md: every client asks for 25 comments a page (50 is refused), and pages on with the
    ``last`` cursor of the previous answer. The busy post of the seed has 63 top-level comments."""
    from scripts.sandbox.seed import BUSY_TITLE

    world = build_world(1, int(time.time() * 1_000_000))
    busy = next(p for p in world.posts.values() if p.is_root and p.title == BUSY_TITLE)
    expected = {c.id for c in world.posts.values() if c.root_id == busy.id and c.id != busy.id}
    before = len(sandbox.control("requests")["requests"])
    detail = gateway.post_detail(alice, busy.id, GROUP)
    assert {c.id for c in detail.comments} == expected and len(detail.comments) == len(expected)
    asked = [
        r for r in sandbox.control("requests")["requests"][before:] if r["path"] == f"/api2/posts/{busy.id}/comments"
    ]
    assert len(asked) == 3 and all("limit=25" in r["query"] for r in asked)
    assert "created-gt" not in asked[0]["query"] and all("created-gt=" in r["query"] for r in asked[1:])
    # Its 41st top-level comment is pinned: the stand-in answers it apart from the pages
    # (``pinned_post_tree``, asked for with ``pinned=true`` on the first page), and it takes its place.
    assert "pinned=true" in asked[0]["query"]
    tops = [c for c in detail.comments if c.parent_id is None]
    assert [c.id for c in tops if c.pinned] == [tops[40].id]
    assert [c.created_at for c in tops] == sorted(c.created_at for c in tops)


def test_a_pinned_comment_in_the_pages_and_under_its_post_is_listed_once(
    gateway: SeleniumPlatformGateway, alice: PlatformSession
) -> None:
    """The other reading of ``pinned_post_tree`` (the post's tree holding the pinned comment), with the
    comment in its place in the pages too: night-owls on the stand-in."""
    from scripts.sandbox.posts import PINNED_UNDER_ROOT_GROUP

    world = build_world(1, int(time.time() * 1_000_000))
    group = world.group_by_slug(PINNED_UNDER_ROOT_GROUP)
    assert group is not None
    pin = next(p for p in world.posts.values() if p.pinned and not p.is_root and p.group_id == group.id)
    detail = gateway.post_detail(alice, pin.root_id, PINNED_UNDER_ROOT_GROUP)
    ids = [c.id for c in detail.comments]
    assert len(ids) == len(set(ids)) and pin.id in ids
    assert [c.id for c in detail.comments if c.pinned] == [pin.id]


# What the comments route answers without ``group-id`` is not known (every client sends it): each refusal
# that may mean "which group?" — a 400, a 404, the 401 of "not a member of that group".
REFUSED_WITHOUT_A_GROUP = [
    pytest.param({"status": 400}, id="400"),
    pytest.param({"status": 404}, id="404"),
    pytest.param({"status": 401, "message": "action not permitted"}, id="401-not-permitted"),
    # Another 401, the session alive (``self`` answers): a refusal as unknown as the rest, never "expired".
    pytest.param({"status": 401, "message": "unauthorized"}, id="401-session-alive"),
]


def _quiet_garden_post(gateway: SeleniumPlatformGateway) -> Any:
    """A post of quiet-garden with comments, its group forgotten by the gateway (as a fresh worker's)."""
    world = build_world(1, int(time.time() * 1_000_000))
    group = world.group_by_slug("quiet-garden")
    assert group is not None
    post = next(p for p in world.posts.values() if p.is_root and p.group_id == group.id and p.children)
    gateway._client.post_groups.pop(post.id)
    return post


@pytest.mark.parametrize("refusal", REFUSED_WITHOUT_A_GROUP)
def test_a_post_whose_group_is_unknown_is_looked_for_in_each_group(
    gateway: SeleniumPlatformGateway, alice: PlatformSession, sandbox: SandboxProcess, refusal: dict[str, Any]
) -> None:
    """Every client names the post's group (``group-id``; PLATFORM.md). A post read with no group given and
    none remembered is asked without it; should the platform refuse that, the post is looked for in
    each of the account's groups, every request within its own route, and each counted."""
    world = build_world(1, int(time.time() * 1_000_000))
    post = _quiet_garden_post(gateway)
    route = f"/api2/posts/{post.id}/comments"
    sandbox.control("errors", {"route": "^" + route + "$", "count": 1, **refusal})
    before = len(sandbox.control("requests")["requests"])
    detail = gateway.post_detail(alice, post.id, None)
    assert detail.post.id == post.id and detail.comments
    asked = [r for r in sandbox.control("requests")["requests"][before:] if r["path"] == route]
    assert "group-id" not in asked[0]["query"]  # the refused ask
    me = world.user_by_handle_or_id("alice")
    assert me is not None
    groups = {g.id for g in world.groups.values() if me.id in g.members}
    named = [parse_qs(r["query"]).get("group-id") for r in asked[1:]]
    assert len(named) == len(groups) and {g[0] for g in named if g} == groups  # each group once


@pytest.mark.parametrize("refusal", REFUSED_WITHOUT_A_GROUP)
def test_a_post_is_never_deleted_as_a_comment(
    gateway: SeleniumPlatformGateway, alice: PlatformSession, sandbox: SandboxProcess, refusal: dict[str, Any]
) -> None:
    """``DELETE posts/{id}`` takes posts too, so a comment's deletion first makes sure the id is no post.
    Whatever the platform answers the look asked without a group, a post's id given as a comment's is
    refused (404), and nothing is deleted."""
    post = _quiet_garden_post(gateway)
    route = f"/api2/posts/{post.id}/comments"
    sandbox.control("errors", {"route": "^" + route + "$", "count": 1, **refusal})
    before = len(sandbox.control("requests")["requests"])
    with pytest.raises(NotFound):
        gateway.delete_comment(alice, post.id)
    sent = sandbox.control("requests")["requests"][before:]
    assert [r for r in sent if r["method"] == "DELETE"] == []
    assert gateway.post_detail(alice, post.id, None).post.id == post.id  # still there


@pytest.mark.parametrize("refusal", REFUSED_WITHOUT_A_GROUP)
def test_a_post_refused_in_the_group_named_is_not_found_there(
    gateway: SeleniumPlatformGateway, alice: PlatformSession, sandbox: SandboxProcess, refusal: dict[str, Any]
) -> None:
    """Asked with a group, the same refusals say the post is not in it: not found, never the platform's 400
    passed on as the caller's bad request nor its 401 as a refusal, and not looked for elsewhere."""
    post = _quiet_garden_post(gateway)
    route = f"/api2/posts/{post.id}/comments"
    sandbox.control("errors", {"route": "^" + route + "$", "count": 1, **refusal})
    before = len(sandbox.control("requests")["requests"])
    with pytest.raises(NotFound):
        gateway.post_detail(alice, post.id, "quiet-garden")
    assert [r["path"] for r in asked(sandbox, before) if r["path"] == route] == [route]


def test_a_comment_seen_in_its_post_is_deleted_without_a_look(
    gateway: SeleniumPlatformGateway, alice: PlatformSession, sandbox: SandboxProcess
) -> None:
    """An id the gateway has seen as a comment (in its post's tree, or made here) is no post: deleting it is
    the DELETE alone, no read first, and asking for it as a post is a 404 without a read."""
    post = _quiet_garden_post(gateway)
    made = gateway.create_comment(alice, post.id, "made here", None, None)
    seen = gateway.create_comment(alice, post.id, "seen in its post", None, None)
    gateway._client.comment_posts.pop(seen.id)  # as a worker that did not make it, until it reads the post
    assert seen.id in {c.id for c in gateway.post_detail(alice, post.id, None).comments}
    for comment_id in (made.id, seen.id):
        before = len(sandbox.control("requests")["requests"])
        with pytest.raises(NotFound):  # nor is a comment taken for a post, or read to tell
            gateway.delete_post(alice, comment_id)
        gateway.delete_comment(alice, comment_id)
        sent = asked(sandbox, before)
        assert [(r["method"], r["path"]) for r in sent] == [("DELETE", f"/api2/posts/{comment_id}")]
        with pytest.raises(NotFound):  # gone: the platform says so
            gateway.delete_comment(alice, comment_id)


def test_a_reply_under_a_comment_of_another_post_is_refused_unsent(
    gateway: SeleniumPlatformGateway, alice: PlatformSession, sandbox: SandboxProcess
) -> None:
    """A parent the gateway has seen as a comment of another post is refused before anything is written:
    what the platform would do with such a reply is not ours to find out."""
    world = build_world(1, int(time.time() * 1_000_000))
    here, there = [p for p in world.posts.values() if p.is_root and p.children][:2]
    elsewhere = gateway.post_detail(alice, there.id, None).comments[0]
    before = len(sandbox.control("requests")["requests"])
    with pytest.raises(InvalidRequest) as refused:
        gateway.create_comment(alice, here.id, "a reply astray", elsewhere.id, None)
    assert refused.value.details.get("field") == "parentId"
    assert [r for r in sandbox.control("requests")["requests"][before:] if r["method"] == "POST"] == []


def test_a_parent_the_platform_refuses_is_named_in_the_error(
    gateway: SeleniumPlatformGateway, alice: PlatformSession, sandbox: SandboxProcess
) -> None:
    """A parent the gateway has never seen is left to the platform, whose 400 ("invalid parent") names no
    field: the error still says which of the client's fields it was, and nothing was created."""
    post = _quiet_garden_post(gateway)
    unseen = "f09d1070d763ae3300d9e266d019b233"
    with pytest.raises(InvalidRequest) as refused:
        gateway.create_comment(alice, post.id, "a reply to nothing", unseen, None)
    assert refused.value.details.get("field") == "parentId"
    assert "parent" in refused.value.message
    assert "a reply to nothing" not in {c.content for c in gateway.post_detail(alice, post.id, None).comments}
