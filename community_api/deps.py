"""The collaborators every use case may need, built once by the composition root (``adapters/wiring``)
and by the tests with fakes (cosmicpython's bootstrap)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import attrs
from argon2 import PasswordHasher

from community_api.errors import ConnectionExpired
from community_api.model import CONNECTION_EXPIRED
from community_api.ports import Clock, KeyStore, PlatformGateway, Throttle
from community_api.usage import UsageRecorder


@attrs.define
class Deps:
    store: KeyStore
    gateway: PlatformGateway
    throttle: Throttle
    clock: Clock
    usage: UsageRecorder
    password_hasher: PasswordHasher = attrs.field(factory=PasswordHasher)


@contextmanager
def marking_expiry(deps: Deps, connection_id: str) -> Iterator[None]:
    """Run a platform call; when the platform says the session expired, mark the connection so that the
    next request answers ``connection_expired`` at once and the dashboard shows it."""
    try:
        yield
    except ConnectionExpired as error:
        deps.store.set_connection_status(connection_id, CONNECTION_EXPIRED)
        error.details.setdefault("connectionId", connection_id)
        raise
