"""``community-api backup --into FOLDER --keep N``: dated backups in a folder, the oldest beyond N removed.

What a timer runs every day (``deploy/systemd/community-api-backup.timer``): each copy is named by the
moment it was taken, in UTC (``community-api-20261129T182300Z.sqlite3``), so that names sort as times do
and two runs never name the same file (a run within the same second is refused, as any existing target
is). Only after a copy is made and checked are older copies removed, and only files of exactly that name
form: whatever else the folder holds is never touched, and a failing backup never costs an old one. The
newest ``keep`` copies stay, however old: a backup that stopped working does not age the last good
ones away. A partial copy left by a run that was killed outright (its process gone) is removed too.
"""

from __future__ import annotations

import os
import re
from datetime import datetime
from pathlib import Path

import attrs

from adapters.platform import procfs
from adapters.store.sqlite_backup import BackupError, BackupSummary, backup_database

NAME_FORMAT = "community-api-%Y%m%dT%H%M%SZ.sqlite3"
_NAME = re.compile(r"community-api-[0-9]{8}T[0-9]{6}Z\.sqlite3")
# What ``backup_database`` writes before the rename: a run killed outright (the OOM killer, power lost)
# leaves it behind, hidden and as large as the database.
_PARTIAL = re.compile(r"\.community-api-[0-9]{8}T[0-9]{6}Z\.sqlite3\.partial-([0-9]{1,9})")
MAX_KEEP = 10_000


@attrs.frozen
class FolderBackup:
    made: BackupSummary
    removed: tuple[Path, ...]  # older copies removed, oldest first, then partial copies of killed runs


def backup_into(
    source: str | os.PathLike[str], folder: str | os.PathLike[str], keep: int, now: datetime
) -> FolderBackup:
    """Back ``source`` up into ``folder`` under a name of ``now`` (UTC), then keep the newest ``keep``
    copies of that name form and remove the others, and the partial copies of runs no longer running."""
    if not 1 <= keep <= MAX_KEEP:
        raise BackupError(f"--keep takes a number of copies from 1 to {MAX_KEEP}, not {keep}")
    if not os.fspath(folder):  # (not the working folder, as Path("") would be)
        raise BackupError("--into needs the folder to write the copies in")
    where = Path(folder)
    if where.exists() and not where.is_dir():
        raise BackupError(f"{where} is not a folder: --into names the folder to write the copies in")
    if not where.is_dir():
        raise BackupError(f"no folder {where} to write the backup in")
    made = backup_database(source, where / now.strftime(NAME_FORMAT))
    # The copy just made always stays (even if the clock went back and its name sorts before others).
    others = sorted(entry for entry in os.listdir(where) if _NAME.fullmatch(entry) and entry != made.target.name)
    removed = []
    for name in others[: max(0, len(others) - (keep - 1))]:
        path = where / name
        if path.is_file() and not path.is_symlink():  # a copy this command made, not something put there
            path.unlink()
            removed.append(path)
    for entry in sorted(os.listdir(where)):
        partial = _PARTIAL.fullmatch(entry)
        path = where / entry
        # Another run's in progress is kept: only one whose process is gone left it behind.
        if partial and not procfs.running(int(partial[1])) and path.is_file() and not path.is_symlink():
            path.unlink()
            removed.append(path)
    return FolderBackup(made, tuple(removed))
