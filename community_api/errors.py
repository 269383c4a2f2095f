"""The one error family of the core.

Each error carries a stable machine-readable ``code`` and a human message, never an HTTP status:
the HTTP error serializer (``adapters/http/errors.py``) maps codes to statuses, and the MCP adapter
maps the same codes to tool errors. ``details`` holds extra, JSON-safe facts a client can act on.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class ServiceError(Exception):
    """Base of every error the core raises on purpose."""

    code: str = "internal_error"
    # Set when the error came out of a platform call (``deps.on_platform``): the platform refused, failed
    # or could not be reached. Never shown to clients; the request log gives such errors a line of their own.
    via_platform: bool = False
    # True when the platform may have done what was asked although this error is answered: it did not
    # answer in time, or it answered a write with a 5xx or in a shape we cannot read. A creating request's
    # Idempotency-Key then keeps this answer (a retry must not act twice), and a DM counts as sent.
    may_have_acted: bool = False

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details


class InvalidRequest(ServiceError):
    """The client sent something we cannot act on (bad value, missing field, unknown label...)."""

    code = "invalid_request"


class Unauthorized(ServiceError):
    """Missing, malformed, unknown, expired or revoked credentials. One message for all of them."""

    code = "unauthorized"


class Forbidden(ServiceError):
    """Authenticated, but not allowed (a missing scope: ``details['requiredScope']``)."""

    code = "forbidden"


class ConnectionMismatch(ServiceError):
    """A key bound to one connection asked for another in ``X-Community-Connection``."""

    code = "connection_mismatch"


class NotFound(ServiceError):
    code = "not_found"


class Conflict(ServiceError):
    code = "conflict"


class RateLimited(ServiceError):
    """Refused by a throttle. ``retry_after`` is whole seconds, at least 1."""

    code = "rate_limited"

    def __init__(self, message: str, retry_after: int, **details: Any) -> None:
        retry_after = max(1, int(retry_after))
        super().__init__(message, retryAfter=retry_after, **details)
        self.retry_after = retry_after


class PlatformError(ServiceError):
    """The platform answered, but with something we cannot use (5xx, unexpected shape)."""

    code = "platform_error"


class PlatformUnavailable(ServiceError):
    """The platform (or the browser in front of it) did not answer in time."""

    code = "platform_unavailable"
    may_have_acted = True  # by default: an instance raised before anything was sent says False


class ConnectionExpired(ServiceError):
    """The platform session of this connection is no longer valid: the account must be re-linked."""

    code = "connection_expired"


@contextmanager
def before_the_write() -> Iterator[None]:
    """Around the reads a write needs before it is sent (the group of a new post, its label, the post a
    comment answers, the thread a DM goes to, the signed-in user, opening the chat with a member): a failure
    there sent nothing, whatever its kind (a read that timed out says by default that it may have acted), so
    a DM's quota is given back and a retry under the same Idempotency-Key may act."""
    try:
        yield
    except ServiceError as error:
        error.may_have_acted = False
        raise
