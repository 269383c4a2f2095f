"""The unit of work of ``SqliteKeyStore``: one ``BEGIN IMMEDIATE`` transaction on the thread's connection.

``BEGIN IMMEDIATE`` takes the database's write lock before the step's first read, so no other worker's
write can land between the step's reads and its writes: a rotation and a revocation of one key, run at
once by two workers, happen one after the other. (A deferred ``BEGIN`` would read first and fail with
"database is locked" on its first write under contention, whatever the busy timeout.)

The store's own methods run on the thread's connection, so inside the block they join the transaction:
their single statements run in it, and their own ``BEGIN IMMEDIATE`` blocks (``_immediate``) join instead of
nesting. A block opened inside another joins the outermost; only the outermost commits. Cached reads are
bypassed inside the block: the cache vouches for committed state only.
"""

from __future__ import annotations

import os
import threading
from types import TracebackType
from typing import Protocol

from community_api.ports import KeyStore


class _Transactional(Protocol):
    """What the unit of work needs of the store."""

    def _begin(self) -> None: ...

    def _finish(self, commit: bool) -> None: ...


class _Depth(threading.local):
    depth = 0  # a class-level default: reading it never goes through a missing attribute's exception


class UnitDepth:
    """How many unit-of-work blocks the current thread is inside. The hot path reads ``local.depth``
    itself (a plain thread-local attribute, about 70 ns, rather than a method call on every cached
    look-up); a forked child starts outside any block (the hook below), whatever the forking thread did."""

    def __init__(self) -> None:
        self.local = _Depth()
        os.register_at_fork(after_in_child=self._forget)

    def get(self) -> int:
        return self.local.depth

    def set(self, depth: int) -> None:
        self.local.depth = depth

    def _forget(self) -> None:
        self.local = _Depth()


class SqliteUnitOfWork:
    def __init__(self, store: KeyStore, transactional: _Transactional, depth: UnitDepth) -> None:
        # Every role is served by the store itself, on the thread's connection inside the transaction.
        self.store = self.accounts = self.connections = self.keys = self.audit = self.attempts = store
        self.oauth = self.idempotency = store
        self._transactional = transactional
        self._depth = depth
        self._committed = False
        self._outermost = False

    def __enter__(self) -> SqliteUnitOfWork:
        depth = self._depth.get()
        self._outermost = depth == 0
        if self._outermost:
            self._transactional._begin()
        self._depth.set(depth + 1)
        return self

    def commit(self) -> None:
        self._committed = True

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._depth.set(self._depth.get() - 1)
        if self._outermost:
            self._transactional._finish(commit=self._committed and error is None)
