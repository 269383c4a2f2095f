"""A creating request whose outcome is unknown never acts twice under its Idempotency-Key, and a DM whose
outcome is unknown counts against the quota.

gunicorn's time-out stops a worker by raising ``SystemExit`` in the request's thread (its SIGABRT
handler), possibly after the platform sent the DM; a fault of ours after the platform's answer is the
same. Both released the claim, so the client's retry with the same key sent again. A worker killed
outright (SIGKILL) leaves its claim in flight, which answered "retry later" for 24 hours. And an error
that says the platform may have acted (a 5xx to the write: ``may_have_acted``) is kept; one raised before
anything was sent (no browser free) is not."""

from __future__ import annotations

import hashlib
from typing import Any

import falcon.testing
import pytest

from community_api.errors import Conflict, PlatformError, PlatformUnavailable
from community_api.idempotency import Answer, account_prefix, run_once
from community_api.model import IdempotencyRecord
from fakes.clock import FakeClock
from fakes.key_store import FakeKeyStore
from tests.unit.world_support import Ready

FEED = "/v1/groups/builders-club/posts"


def send(ready: Ready, body: dict[str, str], **kwargs: Any) -> falcon.testing.Result:
    return ready.world.post("/v1/dms", ready.key, body, **kwargs)


@pytest.mark.parametrize("stop", [SystemExit(1), KeyboardInterrupt()])
def test_a_dm_stopped_mid_send_is_never_sent_again_and_counts_against_the_quota(
    ready: Ready, stop: BaseException
) -> None:
    world = ready.world
    bob = world.gateway.user("bob")
    world.gateway.fail_next("send_message", stop)
    headers = {"Idempotency-Key": "dm-stopped"}
    with pytest.raises(type(stop)):
        send(ready, {"to": bob.id, "content": "maybe sent"}, headers=headers)
    retry = send(ready, {"to": bob.id, "content": "maybe sent"}, headers=headers)
    assert retry.status_code == 500 and retry.headers.get("Idempotent-Replayed") == "true"
    assert "look before sending it again under a new Idempotency-Key" in retry.json["error"]["message"]
    assert world.gateway.calls["send_message"] == 1
    assert world.throttle.quota(ready.connection["platformUserId"]).sent_last_hour == 1


def test_a_fault_after_the_platform_answered_is_kept_as_unknown(ready: Ready) -> None:
    world = ready.world
    world.gateway.fail_next("create_post", RuntimeError("a mapping bug"))
    headers = {"Idempotency-Key": "post-bug"}
    first = world.post(FEED, ready.key, {"title": "Maybe"}, headers=headers)
    assert first.status_code == 500
    again = world.post(FEED, ready.key, {"title": "Maybe"}, headers=headers)
    assert again.status_code == 500 and again.headers.get("Idempotent-Replayed") == "true"
    assert again.json["error"]["code"] == "internal_error" and again.json["error"]["details"]["outcomeUnknown"]
    assert world.gateway.calls["create_post"] == 1


def test_a_refusal_still_releases_the_claim(ready: Ready) -> None:
    world = ready.world
    headers = {"Idempotency-Key": "refused"}
    assert world.post(FEED, ready.key, {"title": "x", "label": "Nope"}, headers=headers).status_code == 400
    assert world.post(FEED, ready.key, {"title": "x"}, headers=headers).status_code == 201


def test_a_claim_left_by_a_killed_worker_says_so_and_never_acts() -> None:
    store, clock = FakeKeyStore(), FakeClock()
    fingerprint = b"POST /v1/dms ..."
    # What a worker killed outright (SIGKILL) leaves: its claim, in flight for ever.
    store.claim_idempotency(
        IdempotencyRecord(
            key=account_prefix("acc_1") + "dm-1",
            fingerprint=hashlib.sha256(fingerprint).hexdigest(),
            status=0,
            body="",
            created_at=clock.now(),
        )
    )
    acted: list[str] = []

    def retry() -> Answer:
        return run_once(
            store,
            clock,
            account_id="acc_1",
            idempotency_key="dm-1",
            request_fingerprint=fingerprint,
            act=lambda: acted.append("sent") or "{}",  # type: ignore[func-returns-value]
            render_error=lambda error: (500, error.message),
        )

    # Ten minutes, as docs/decisions.md says: longer than any request runs (its deadlines, gunicorn's time-out).
    clock.advance(minutes=9, seconds=59)
    with pytest.raises(Conflict, match="still in progress; retry later") as running:
        retry()
    assert running.value.details == {"reason": "in_progress"}  # the one worth asking again, with the same key
    clock.advance(seconds=1)
    with pytest.raises(Conflict, match=r"started at 2026-11-01T12:00:00\+00:00 and never finished") as refused:
        retry()
    assert "look before sending it again under a new Idempotency-Key" in refused.value.message
    assert refused.value.details == {"reason": "never_finished", "outcomeUnknown": True}
    clock.advance(hours=23)
    with pytest.raises(Conflict, match="never finished"):
        retry()
    assert acted == []
    clock.advance(hours=1, seconds=1)  # past the 24 hours every answer is kept for: the key is free again
    assert retry().status == 201 and acted == ["sent"]


def _maybe_acted(message: str) -> PlatformError:
    error = PlatformError(message)
    error.may_have_acted = True
    return error


def test_a_write_answered_5xx_is_kept_and_counts_as_sent(ready: Ready) -> None:
    world = ready.world
    bob = world.gateway.user("bob")
    world.gateway.fail_next("send_message", _maybe_acted("the platform failed to answer (502)"))
    headers = {"Idempotency-Key": "dm-502"}
    first = send(ready, {"to": bob.id, "content": "maybe"}, headers=headers)
    assert first.status_code == 502 and first.json["error"]["details"] == {"outcomeUnknown": True}
    assert first.json["error"]["message"].endswith("it may have been done all the same: look before sending it again")
    again = send(ready, {"to": bob.id, "content": "maybe"}, headers=headers)
    assert again.status_code == 502 and again.headers.get("Idempotent-Replayed") == "true"
    assert world.gateway.calls["send_message"] == 1
    assert world.throttle.quota(ready.connection["platformUserId"]).sent_last_hour == 1


def test_nothing_sent_leaves_the_key_and_the_quota_free(ready: Ready) -> None:
    world = ready.world
    bob = world.gateway.user("bob")
    busy = PlatformUnavailable("no browser is free")
    busy.may_have_acted = False
    world.gateway.fail_next("send_message", busy)
    headers = {"Idempotency-Key": "dm-busy"}
    assert send(ready, {"to": bob.id, "content": "later"}, headers=headers).status_code == 503
    assert world.throttle.quota(ready.connection["platformUserId"]).sent_last_hour == 0
    retry = send(ready, {"to": bob.id, "content": "later"}, headers=headers)
    assert retry.status_code == 201 and "Idempotent-Replayed" not in retry.headers
    assert len(world.gateway.sent_messages()) == 1
