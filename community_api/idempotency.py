"""``Idempotency-Key`` on the POSTs that create something on the platform (posts, comments, DMs).

Rules (DESIGN §2):
- a retry with the same key and the same request within 24 hours answers the first answer again and
  does not act again; the same key with a different request is a ``Conflict``;
- a retry that arrives while the first request is still in flight is a ``Conflict`` (try again later);
  each of these conflicts says which it is in ``details.reason`` (``IN_PROGRESS``, ``DIFFERENT_REQUEST``,
  ``NEVER_FINISHED``);
- keys are scoped to the account, so two accounts never see each other's answers; an account's
  records go with it when it is deleted, and every record goes once past its 24 hours;
- an answer is kept when it is a success, or when the outcome on the platform is unknown, so a client
  that retries never double-posts. The outcome is unknown when the error says the platform may have
  acted (``ServiceError.may_have_acted``: no answer in time, a write answered 5xx or in a shape we cannot
  read: the post may exist), and when anything but a refusal stopped the request: a fault of ours after the
  platform answered, or the worker stopping mid-call (gunicorn's time-out raises ``SystemExit`` in the
  request's thread). For a refusal (the platform or our checks said no) nothing happened, so the claim
  is released and a retry may act;
- a claim still in flight after ``STALE_CLAIM`` belongs to a worker that was killed outright (nothing
  could record its outcome): a retry is told so, and that it may have acted, instead of "retry later"
  for the rest of the 24 hours.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from datetime import timedelta

import attrs

from community_api.errors import Conflict, InvalidRequest, ServiceError
from community_api.model import IN_FLIGHT, IdempotencyRecord
from community_api.ports import Clock, KeyStore

# Visible ASCII but the comma: an HTTP server hands a header sent twice to the application as one value,
# the two joined by a comma (gunicorn does), so a client that sent two keys would have been held to a third,
# "a,b", and a retry sending "a" alone would have acted again.
KEY_PATTERN = r"^[\x21-\x2b\x2d-\x7e]{1,255}$"  # published as the MCP tools' idempotencyKey pattern
KEY_PROBLEM = "must be 1 to 255 visible ASCII characters, without a comma"
_KEY = re.compile(KEY_PATTERN)
CREATED = 201
# Longer than any request can run: every gateway call ends within its deadline (twice the platform
# time-out, 40 s by default), a create makes at most three, and gunicorn restarts a silent worker after
# 120 s by default.
STALE_CLAIM = timedelta(minutes=10)
CHECK_FIRST = "what it asked for may have been done: look before sending it again under a new Idempotency-Key"
MAY_HAVE_ACTED = "it may have been done all the same: look before sending it again"
# ``details.reason`` of the 409s a reused key meets.
IN_PROGRESS = "in_progress"  # the first request runs still: ask again in a moment, with the same key
DIFFERENT_REQUEST = "different_request"  # the key was used for another request: a bug of the client's
NEVER_FINISHED = "never_finished"  # the service stopped during the first: it may have acted, look first


class InterruptedRequest(ServiceError):
    """The answer kept for a request stopped by something other than a refusal: its outcome is unknown."""

    code = "internal_error"


@attrs.frozen
class Answer:
    status: int
    body: str
    replayed: bool = False


def account_prefix(account_id: str) -> str:
    """What every record key of the account starts with: keys are scoped to their account."""
    return f"{account_id}:"


def run_once(
    store: KeyStore,
    clock: Clock,
    *,
    account_id: str,
    idempotency_key: str | None,
    request_fingerprint: bytes,
    act: Callable[[], str],
    render_error: Callable[[ServiceError], tuple[int, str]],
) -> Answer:
    """Run ``act`` (which creates something and answers its serialized form) at most once per
    (account, idempotency key). ``render_error`` turns an error whose answer is kept into a status and
    body; every other error propagates and releases the claim."""

    def action() -> Answer:
        try:
            return Answer(CREATED, act())
        except ServiceError as error:
            if not error.may_have_acted:
                raise
            # The platform may have acted: the answer says so (a client, or an agent, must not simply send
            # it again), and is kept for retries of the same key.
            error.message = f"{error.message}; {MAY_HAVE_ACTED}"
            error.details.setdefault("outcomeUnknown", True)
            status, body = render_error(error)
            return Answer(status, body)

    if idempotency_key is None:
        return action()
    if not _KEY.fullmatch(idempotency_key):  # not match: "$" also matches before a final newline
        if "," in idempotency_key:
            raise InvalidRequest(f"Idempotency-Key {KEY_PROBLEM} (was the header sent twice? send one key, once)")
        raise InvalidRequest(f"Idempotency-Key {KEY_PROBLEM}")
    record_key = account_prefix(account_id) + idempotency_key
    fingerprint = hashlib.sha256(request_fingerprint).hexdigest()
    claim = IdempotencyRecord(key=record_key, fingerprint=fingerprint, status=0, body="", created_at=clock.now())
    existing = store.claim_idempotency(claim)
    if existing is not None:
        # ``details.reason`` tells a client's code the three apart: only "in_progress" is worth asking again.
        if existing.fingerprint != fingerprint:
            raise Conflict("this Idempotency-Key was used with a different request", reason=DIFFERENT_REQUEST)
        if existing.status == IN_FLIGHT:
            if clock.now() - existing.created_at < STALE_CLAIM:
                raise Conflict(
                    "a request with this Idempotency-Key is still in progress; retry later", reason=IN_PROGRESS
                )
            raise Conflict(
                f"a request with this Idempotency-Key started at {existing.created_at.isoformat(timespec='seconds')}"
                f" and never finished (the service stopped during it); {CHECK_FIRST}",
                reason=NEVER_FINISHED,
                outcomeUnknown=True,
            )
        return Answer(existing.status, existing.body, replayed=True)
    try:
        answer = action()
    except ServiceError:
        # A refusal: nothing was created, so a retry may act.
        store.release_idempotency(record_key)
        raise
    except BaseException:
        # Not a refusal: the platform may have acted before this (a fault of ours past its answer, the
        # worker stopping mid-call). Kept as unknown, so that a retry never acts twice.
        interrupted = InterruptedRequest(f"the service failed during this request; {CHECK_FIRST}", outcomeUnknown=True)
        status, body = render_error(interrupted)
        store.complete_idempotency(record_key, status, body)
        raise
    store.complete_idempotency(record_key, answer.status, answer.body)
    return answer
