"""``backup --into FOLDER --keep N`` on a real database file: dated copies, the newest kept."""

from __future__ import annotations

import os
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from adapters.store.backup_folder import NAME_FORMAT, backup_into
from adapters.store.sqlite_backup import BackupError
from adapters.store.sqlite_key_store import SqliteKeyStore
from community_api.model import Account

T0 = datetime(2026, 11, 29, 3, 0, tzinfo=UTC)


@pytest.fixture
def database(tmp_path: Path) -> Path:
    db = tmp_path / "db.sqlite3"
    store = SqliteKeyStore.open(db, "backup-folder-test-secret")
    store.add_account(Account("acc_1", "ops@example.com", T0), "argon-hash")
    store.close()
    return db


def names(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


def test_each_day_adds_a_copy_named_by_its_time_and_the_oldest_beyond_keep_go(database: Path, tmp_path: Path) -> None:
    folder = tmp_path / "backups"
    folder.mkdir()
    days = [T0 + timedelta(days=n) for n in range(5)]
    for day in days:
        done = backup_into(database, folder, keep=3, now=day)
        assert done.made.target == folder / day.strftime(NAME_FORMAT) and done.made.accounts == 1
    assert names(folder) == [day.strftime(NAME_FORMAT) for day in days[2:]]
    assert names(folder)[0] == "community-api-20261201T030000Z.sqlite3"


def test_fewer_copies_than_keep_are_all_kept(database: Path, tmp_path: Path) -> None:
    folder = tmp_path / "backups"
    folder.mkdir()
    days = [T0 + timedelta(days=n) for n in range(4)]
    for day in days:
        assert backup_into(database, folder, keep=5, now=day).removed == ()
    assert names(folder) == [day.strftime(NAME_FORMAT) for day in days]


def test_the_copy_just_made_stays_when_the_clock_went_back(database: Path, tmp_path: Path) -> None:
    folder = tmp_path / "backups"
    folder.mkdir()
    for n in (3, 4):
        backup_into(database, folder, keep=2, now=T0 + timedelta(days=n))
    back = backup_into(database, folder, keep=2, now=T0)  # sorts first, yet it is the newest copy
    assert back.made.target.exists()
    assert names(folder) == [T0.strftime(NAME_FORMAT), (T0 + timedelta(days=4)).strftime(NAME_FORMAT)]
    assert [path.name for path in back.removed] == [(T0 + timedelta(days=3)).strftime(NAME_FORMAT)]


def test_only_files_of_the_name_form_are_removed_never_links_or_folders(database: Path, tmp_path: Path) -> None:
    folder, elsewhere = tmp_path / "backups", tmp_path / "elsewhere.txt"
    folder.mkdir()
    elsewhere.write_text("kept")
    os.symlink(elsewhere, folder / "community-api-20250101T000000Z.sqlite3")
    (folder / "community-api-20250102T000000Z.sqlite3").mkdir()
    for other in ("community-api-20250103T000000Z.sqlite3.bak", "db.sqlite3", ".hidden"):
        (folder / other).write_text("kept")
    before = set(names(folder))
    done = backup_into(database, folder, keep=1, now=T0)
    assert done.removed == () and set(names(folder)) == before | {T0.strftime(NAME_FORMAT)}
    assert elsewhere.read_text() == "kept"


def test_a_failed_copy_removes_nothing(database: Path, tmp_path: Path) -> None:
    folder = tmp_path / "backups"
    folder.mkdir()
    backup_into(database, folder, keep=1, now=T0)
    with pytest.raises(BackupError, match="exists"):
        backup_into(database, folder, keep=1, now=T0)  # the same second: refused, the copy there kept
    with pytest.raises(BackupError, match="no database"):
        backup_into(tmp_path / "missing.sqlite3", folder, keep=1, now=T0 + timedelta(days=1))
    assert names(folder) == [T0.strftime(NAME_FORMAT)]


def test_a_partial_copy_left_by_a_killed_run_is_removed_and_one_in_progress_kept(
    database: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "backups"
    folder.mkdir()
    ended = subprocess.Popen(["true"])
    ended.wait()  # a process that has ended: its partial copy is litter
    left = folder / f".community-api-20261101T030000Z.sqlite3.partial-{ended.pid}"
    in_progress = folder / f".community-api-20261128T030000Z.sqlite3.partial-{os.getpid()}"
    other = folder / ".something.partial-1"
    for path in (left, in_progress, other):
        path.write_bytes(b"half a database")
    # A link named as a partial copy of an ended run: not a file this command wrote, and never followed.
    target = tmp_path / "kept.txt"
    target.write_text("kept")
    link = folder / f".community-api-20261102T030000Z.sqlite3.partial-{ended.pid}"
    os.symlink(target, link)
    done = backup_into(database, folder, keep=3, now=T0)
    assert done.removed == (left,)
    assert not left.exists() and in_progress.exists() and other.exists()
    assert link.is_symlink() and target.read_text() == "kept"


def test_a_file_in_the_way_of_the_partial_copy_is_refused_in_one_line_and_left(database: Path, tmp_path: Path) -> None:
    """A run killed outright under this process id left its partial copy (or someone placed a link there):
    one line, nothing written through it, and it is left for the operator."""
    from adapters.store.sqlite_backup import backup_database

    victim = tmp_path / "victim"
    victim.write_bytes(b"not to be overwritten")
    target = tmp_path / "copy.sqlite3"
    in_the_way = tmp_path / f".copy.sqlite3.partial-{os.getpid()}"
    in_the_way.symlink_to(victim)
    with pytest.raises(BackupError, match=rf"^{in_the_way} is in the way \(a copy left by a run that was killed"):
        backup_database(database, target)
    assert victim.read_bytes() == b"not to be overwritten" and in_the_way.is_symlink() and not target.exists()
    in_the_way.unlink()
    assert backup_database(database, target).accounts == 1
    # A name the folder takes, whose partial copy's longer name it does not: one line too.
    long_name = tmp_path / ("c" * 250)
    with pytest.raises(BackupError, match=rf"^the backup could not be started in {tmp_path} \(.*File name too long"):
        backup_database(database, long_name)


def test_what_is_no_copy_to_make_is_refused_before_anything_is_written(database: Path, tmp_path: Path) -> None:
    import sqlite3

    from adapters.store.sqlite_backup import backup_database
    from adapters.store.sqlite_schema import SCHEMA_VERSION

    with pytest.raises(BackupError, match=f"^no folder {tmp_path / 'missing'} to write the backup in$"):
        backup_database(database, tmp_path / "missing" / "copy.sqlite3")
    other = tmp_path / "photos.sqlite3"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY)")
    with pytest.raises(BackupError, match=f"^{other} is not a Community Data API database$"):
        backup_database(other, tmp_path / "a.sqlite3")
    with sqlite3.connect(database) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(BackupError, match=f"has schema version {SCHEMA_VERSION + 1}, newer than this release's"):
        backup_database(database, tmp_path / "b.sqlite3")
    left = names(tmp_path)
    assert "a.sqlite3" not in left and "b.sqlite3" not in left and not [n for n in left if "partial" in n]
