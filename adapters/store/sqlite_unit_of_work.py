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


class UnitDepth:
    """How many unit-of-work blocks the current thread of the current process is inside."""

    def __init__(self) -> None:
        self._local = threading.local()

    def get(self) -> int:
        if getattr(self._local, "pid", None) != os.getpid():
            self._local.pid, self._local.depth = os.getpid(), 0  # a forked child starts outside any block
        return int(self._local.depth)

    def set(self, depth: int) -> None:
        self._local.pid, self._local.depth = os.getpid(), depth


class SqliteUnitOfWork:
    def __init__(self, store: KeyStore, transactional: _Transactional, depth: UnitDepth) -> None:
        self.store = store
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
