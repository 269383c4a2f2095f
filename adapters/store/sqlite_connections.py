"""One SQLite connection per thread and per process, for a file shared by gunicorn workers.

sqlite3 connections must not be shared by threads that may write at once, and SQLite forbids using a
connection across ``fork()`` (locks are per process: the child would corrupt the parent's view). So
each thread opens its own connection at first use, and a thread that finds a connection opened by
another process (it was forked, e.g. by ``gunicorn --preload``) opens a new one. Inherited connections
are kept referenced for ever and never used or closed in the child, so nothing in the child runs
SQLite's close path (checkpoint, unlocking) on the parent's behalf.
"""

from __future__ import annotations

import os
import threading
import weakref

from sqlite_utils import Database

from adapters.store.sqlite_schema import connect


class _Handle:
    """One thread's connection and the process that opened it (weak-referenceable, unlike sqlite3's)."""

    __slots__ = ("db", "pid", "closed", "__weakref__")

    def __init__(self, db: Database, pid: int) -> None:
        self.db = db
        self.pid = pid
        self.closed = False


_INHERITED: list[_Handle] = []
_OPEN: weakref.WeakSet[_Handle] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    # Other threads of the parent do not exist in the child; their thread-locals may be dropped at any
    # time, which would close their connections here. Keep them alive instead.
    _INHERITED.extend(_OPEN)
    _OPEN.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


class ThreadConnections:
    """Hands each thread of each process its own sqlite-utils ``Database`` on ``path``."""

    def __init__(self, path: str, busy_timeout_ms: int) -> None:
        self._path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._local = threading.local()
        self._handles: weakref.WeakSet[_Handle] = weakref.WeakSet()
        self._lock = threading.Lock()

    @property
    def db(self) -> Database:
        """This thread's connection; a dead thread's connection is closed when its locals go."""
        handle: _Handle | None = getattr(self._local, "handle", None)
        pid = os.getpid()
        if handle is not None and handle.pid == pid and not handle.closed:
            return handle.db
        if handle is not None and handle.pid != pid:
            _INHERITED.append(handle)
        conn = connect(self._path, self._busy_timeout_ms)
        handle = _Handle(Database(conn, execute_plugins=False, recursive_triggers=False), pid)
        self._local.handle = handle
        with self._lock:
            self._handles.add(handle)
            _OPEN.add(handle)
        return handle.db

    def close(self) -> None:
        """Close this process's connections, every thread's. Later use opens new ones."""
        pid = os.getpid()
        with self._lock:
            for handle in [h for h in self._handles if h.pid == pid]:
                self._handles.discard(handle)
                _OPEN.discard(handle)
                handle.closed = True
                handle.db.close()
        self._local.__dict__.clear()
