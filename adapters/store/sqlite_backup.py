"""``community-api backup PATH``: a consistent copy of the key store while the service serves (``--into
FOLDER``, dated copies with the oldest removed: ``backup_folder.py``).

SQLite's online backup (``sqlite3.Connection.backup``) copies the pages within one read transaction when
it is asked for every page at once: in WAL mode that transaction sees one committed state and never stops
the service's writers (they append to the WAL meanwhile). Copying the file with ``cp`` instead could catch
a half-applied checkpoint, and would miss what is still in the ``-wal`` file.

The copy is written to a temporary file beside the target, checked (``PRAGMA quick_check``), switched
out of WAL (one self-contained file, no ``-wal`` sidecar), then renamed into place: a target that exists
is never half written. It is created readable by its owner only: it holds the sealed platform sessions
and the key hashes. A restore needs the same ``COMMUNITY_API_SECRET`` (docs/deployment.md).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

import attrs

from adapters.sqlite_wal import unwritable_folder
from adapters.storage_failure import storage_failure
from adapters.store.sqlite_schema import SCHEMA_VERSION


class BackupError(Exception):
    """A backup that could not be made; the message says why, for the operator."""


@attrs.frozen
class BackupSummary:
    target: Path
    size_bytes: int
    accounts: int
    keys: int
    connections: int


def backup_database(
    source: str | os.PathLike[str], target: str | os.PathLike[str], busy_timeout_ms: int = 5000
) -> BackupSummary:
    source_path, target_path = Path(source), Path(target)
    if os.fspath(target).endswith(("/", os.sep)):
        # Path() drops the slash: ``backup copies/`` would have written a file named ``copies``.
        raise BackupError(f"{os.fspath(target)} names a folder: name a new file in it, or use --into FOLDER")
    if not source_path.is_file():
        raise BackupError(f"no database at {source_path} (COMMUNITY_API_DB)")
    if target_path.exists():
        raise BackupError(f"{target_path} exists: name a new file, an existing one is never overwritten")
    if not target_path.parent.is_dir():
        raise BackupError(f"no folder {target_path.parent} to write the backup in")
    if target_path.resolve() == source_path.resolve():
        raise BackupError("the backup must be another file than the database")
    partial = target_path.with_name(f".{target_path.name}.partial-{os.getpid()}")
    # O_EXCL: never write through a file (or a link) someone placed there; 0600: the copy is as secret
    # as the database. A file there is never removed: it may be another's, or a link to one.
    try:
        os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        # A run killed outright under this process id (ids come round again, and soon in a container)
        # left it: before, a traceback on every later run of that id. (``--into`` removes those its own
        # dated copies leave, once their run is gone.)
        raise BackupError(
            f"{partial} is in the way (a copy left by a run that was killed, or not ours): remove it and run again"
        ) from None
    except OSError as error:
        raise BackupError(f"the backup could not be started in {target_path.parent} ({_cause(error)})") from None
    try:
        # Read-only: the backup never creates, migrates or changes the service's file.
        src = sqlite3.connect(f"{source_path.resolve().as_uri()}?mode=ro", uri=True, timeout=busy_timeout_ms / 1000)
        try:
            _check_is_key_store(src, source_path)
            dst = sqlite3.connect(partial, isolation_level=None)
            try:
                src.backup(dst, pages=-1)  # every page in one step: one consistent state
                dst.execute("PRAGMA journal_mode = DELETE")
                if dst.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                    raise BackupError("the copy failed SQLite's quick_check; the database was left as it was")
                counts = [
                    dst.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # noqa: S608 - fixed names
                    for table in ("accounts", "keys", "connections")
                ]
            finally:
                dst.close()
        finally:
            src.close()
        os.replace(partial, target_path)
    except BaseException as error:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
        if isinstance(error, sqlite3.Error | OSError):
            # A full disk under the target, most often: one line for the operator (or cron), no traceback.
            raise BackupError(f"the backup failed ({_cause(error)}); nothing was left at {target_path}") from None
        raise
    return BackupSummary(target_path, target_path.stat().st_size, *counts)


def _cause(error: BaseException) -> str:
    """Why, in one line for the operator: the storage's failure in a few words, else the error itself."""
    return storage_failure(error) or f"{type(error).__name__}: {error}"


def _check_is_key_store(conn: sqlite3.Connection, path: Path) -> None:
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as error:
        if isinstance(error, sqlite3.OperationalError) and (why := unwritable_folder(str(path))):
            raise BackupError(f"cannot read {path}: {why}") from None
        raise BackupError(f"{path} is not a readable SQLite database: {error}") from None
    if version > SCHEMA_VERSION:
        raise BackupError(f"{path} has schema version {version}, newer than this release's {SCHEMA_VERSION}")
    if not {"accounts", "keys", "connections"} <= tables:
        raise BackupError(f"{path} is not a Community Data API database")
