"""A failure of the service's own storage — the SQLite database, the throttles' file — told apart from a
bug, so that both edges (REST and MCP) answer it as what it is: the box cannot write right now (503
``service_unavailable``, try again later), not "the service failed" (500 ``internal_error``).

Measured on a full disk before this existed: every write answered 500 ``internal_error`` with a
traceback per request in the log, while reads went on working. The error still propagates through the
core as it is (not as a ``ServiceError``): a storage failure after the platform acted must stay an
unknown outcome for ``idempotency.run_once``, never a refusal that would let a retry act again.
"""

from __future__ import annotations

import errno
import sqlite3

# Seconds a client is asked to wait: a full disk or a read-only file system needs an operator, a busy
# database a moment; either way, not an immediate retry.
STORAGE_RETRY_AFTER = 30
CODE = "service_unavailable"

# By SQLite's primary result code (``sqlite_errorname`` starts with it: SQLITE_IOERR_WRITE, …).
_SQLITE = (
    ("SQLITE_FULL", "the disk is full"),
    ("SQLITE_IOERR", "the disk failed a read or a write"),
    ("SQLITE_READONLY", "the database is read-only"),
    ("SQLITE_CANTOPEN", "the database cannot be opened"),
    ("SQLITE_BUSY", "the database stayed busy"),
    ("SQLITE_LOCKED", "the database stayed busy"),
)
_ERRNO = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EROFS: "the file system is read-only",
    errno.EIO: "the disk failed a read or a write",
}


def storage_failure(error: BaseException) -> str | None:
    """What went wrong with the storage, in a few words, if ``error`` (or what it was raised from) is a
    failure of the storage itself; None for anything else (a bug stays a bug)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, sqlite3.Error):
            name = getattr(current, "sqlite_errorname", "") or ""
            for prefix, cause in _SQLITE:
                if name == prefix or name.startswith(prefix + "_"):
                    return cause
        elif isinstance(current, OSError) and current.errno in _ERRNO:
            return _ERRNO[current.errno]
        current = current.__cause__ or current.__context__
    return None


def storage_message(cause: str, *, changes: bool) -> str:
    """The answer's message. ``changes``: the request was to change something (not a read), and the
    storage may have failed after the platform had done it."""
    if not changes:
        return f"the service cannot use its storage right now ({cause}); try again later"
    return (
        f"the service could not use its storage ({cause}) and did not finish this request; what it asked for "
        "may have been done all the same: look before sending it again, later"
    )
