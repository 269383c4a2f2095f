"""A SQLite file that several connections open at once (the key store's file, the throttles' ``sqlite://``
storage): made readable by its owner only, and put in WAL mode. Shared by both."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time


def create_owner_only(path: str) -> None:
    """Create the file ``path`` (and its folder) readable and writable by its owner only, if it does not
    exist yet; a file that exists keeps the mode its operator gave it.

    sqlite3 would create it with the process's umask (commonly 0644: every local user could read the
    accounts' password hashes and sealed platform sessions). SQLite makes the file's ``-wal`` and ``-shm``
    with the database file's own mode, so they are owner-only too. ``O_EXCL``: never through a link placed
    there."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))


def unwritable_folder(path: str) -> str | None:
    """Why SQLite may be "unable to open database file" that is there: in WAL mode it makes the ``-wal`` and
    ``-shm`` files beside the database, so its folder must take new files (a read-only file system, or a
    folder this user may not write, does not). None when the folder is writable, or the file is not there."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isfile(path) and not os.access(folder, os.W_OK | os.X_OK):
        return (
            f"the folder {folder} takes no new file (read-only, or not this user's to write), and SQLite keeps"
            " the database's -wal and -shm files beside it"
        )
    return None


def use_wal(conn: sqlite3.Connection, patience: float) -> None:
    """Switch the file to WAL (a property of the file, kept once set).

    Switching needs an exclusive lock, and SQLite answers "database is locked" at once, without its
    busy handler, when another connection holds any lock: on a fresh file several workers (or threads)
    starting together do. So retry until the file is in WAL (whoever switched it) or ``patience`` runs
    out."""
    deadline = time.monotonic() + patience
    delay = 0.005
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal":
                return
            if conn.execute("PRAGMA journal_mode = WAL").fetchone()[0].lower() == "wal":
                return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) and "busy" not in str(error):
                raise
            if time.monotonic() >= deadline:
                raise
        if time.monotonic() >= deadline:
            raise sqlite3.OperationalError("could not switch the SQLite file to WAL mode")
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
