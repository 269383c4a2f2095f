"""The files the commands are pointed at: a database path that cannot be used, names nothing, names a folder,
another program's database or a read-only place; a throttle storage that does not answer or names the wrong
file. Each is one line before anything starts, and a file that is not the service's is left as it was."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.processes import ROOT
from tests.integration.cli_support import SECRET, run
from tests.small_filesystem import UNSHARE, require_namespaces


def _newer_schema(path: Path) -> None:
    import sqlite3

    from adapters.store.sqlite_schema import SCHEMA_VERSION

    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")


_SERVE = ("serve", "--bind", "127.0.0.1:1")
_CREATE = ("accounts", "create", "ops@example.com")
_USERS = (
    ("accounts", "delete", "ops@example.com"),
    ("accounts", "set-password", "ops@example.com"),
    ("keys", "mint", "--email", "ops@example.com"),
)


@pytest.mark.parametrize(
    ("case", "command"),
    [
        *[("a file where a folder should be", command) for command in (_SERVE, _CREATE)],
        *[("a newer schema", command) for command in (_SERVE, _CREATE, *_USERS)],
    ],
    ids=lambda c: c if isinstance(c, str) else " ".join(c[:2]),
)
def test_a_database_that_cannot_be_used_is_one_line_before_anything_starts(
    tmp_path: Path, case: str, command: tuple[str, ...]
) -> None:
    """Before, serve started with such a path, answered 500 to every request and logged nothing at start;
    the other commands ended in a traceback. (Only serve and accounts create make a database where there
    is none: the others refuse such a path, below.)"""
    if case == "a newer schema":
        db = tmp_path / "db.sqlite3"
        _newer_schema(db)
        expected = "schema version"
    else:
        (tmp_path / "not-a-folder").write_text("")
        db = tmp_path / "not-a-folder" / "db.sqlite3"
        expected = "File exists"
    result = run(
        *command, stdin="a strong password\n", env={"COMMUNITY_API_DB": str(db), "COMMUNITY_API_SECRET": SECRET}
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"community-api: COMMUNITY_API_DB: cannot use {db}: "), lines
    assert expected in lines[0]
    assert "Listening" not in result.stderr


@pytest.mark.parametrize(
    "command",
    [
        ("accounts", "list"),
        ("accounts", "delete", "ops@example.com"),
        ("accounts", "set-password", "ops@example.com"),
        ("keys", "mint", "--email", "ops@example.com"),
        ("keys", "revoke"),
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_a_command_on_what_a_database_holds_refuses_a_path_with_none(tmp_path: Path, command: tuple[str, ...]) -> None:
    """Before, a mistyped COMMUNITY_API_DB made a new empty database (and its folders) and answered "no
    accounts yet" or "no account with the email", as if the service's database were empty."""
    db = tmp_path / "mistyped" / "db.sqlite3"
    result = run(
        *command, stdin="a strong password\n", env={"COMMUNITY_API_DB": str(db), "COMMUNITY_API_SECRET": SECRET}
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip().splitlines() == [
        f"community-api: no database at {db} (COMMUNITY_API_DB): set it to the service's database; "
        "`community-api accounts create EMAIL` makes a new one"
    ]
    assert not (tmp_path / "mistyped").exists()


@pytest.mark.parametrize(
    ("storage", "expected"),
    [("redis://127.0.0.1:1", "Connection refused"), ("mmap:///{tmp}/not-a-folder/throttle.mmap", "File exists")],
    ids=["redis down", "mmap under a file"],
)
def test_serve_refuses_a_throttle_storage_that_does_not_answer(tmp_path: Path, storage: str, expected: str) -> None:
    (tmp_path / "not-a-folder").write_text("")
    env = {
        "COMMUNITY_API_DB": str(tmp_path / "db.sqlite3"),
        "COMMUNITY_API_SECRET": SECRET,
        "COMMUNITY_API_THROTTLE_STORAGE": storage.format(tmp=str(tmp_path).lstrip("/")),
    }
    result = run("serve", "--bind", "127.0.0.1:1", env=env)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("community-api: COMMUNITY_API_THROTTLE_STORAGE"), lines
    assert expected in lines[0]


@pytest.mark.parametrize(
    "command", [("serve", "--bind", "127.0.0.1:1"), ("accounts", "list"), ("backup", "--into", ".")]
)
@pytest.mark.parametrize(("db", "said"), [("{tmp}", "is a folder"), ("/dev/null", "is not a regular file")])
def test_a_database_path_that_is_no_file_is_named_so(
    tmp_path: Path, command: tuple[str, ...], db: str, said: str
) -> None:
    """Before: SQLite's "unable to open database file" or "disk I/O error", or "no database at"."""
    result = run(*command, env={"COMMUNITY_API_DB": db.format(tmp=tmp_path), "COMMUNITY_API_MODE": "test"})
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"community-api: COMMUNITY_API_DB: {db.format(tmp=tmp_path)} {said}: set it to the database file's path"
    ]


@pytest.mark.parametrize("command", [("accounts", "list"), ("serve", "--bind", "127.0.0.1:1")])
def test_another_programs_database_is_refused_in_one_line_and_left_as_it_is(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """Before: ``accounts list`` added the key store's tables to it and answered "no accounts yet"."""
    db = tmp_path / "photos.sqlite3"
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)")
    held = db.read_bytes()
    result = run(*command, env={"COMMUNITY_API_DB": str(db), "COMMUNITY_API_MODE": "test"})
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"community-api: COMMUNITY_API_DB: cannot use {db}: it is a SQLite database of something else (tables"
        " photos): name the service's own database, or a new file"
    ]
    assert db.read_bytes() == held


@pytest.mark.parametrize("flag", ["--db", "--secret", "--platform-url", "--platform-api-url"])
@pytest.mark.parametrize("command", [("accounts", "create", "ops@example.com"), ("accounts", "list"), ("serve",)])
def test_a_common_flag_given_empty_is_refused(tmp_path: Path, flag: str, command: tuple[str, ...]) -> None:
    """Before, ``--db "$DB"`` with DB unset fell back to the default database, and ``accounts create`` made
    one there (in the working folder)."""
    result = run(*command, flag, "", stdin="a strong password\n", env={"COMMUNITY_API_MODE": "test"})
    assert result.returncode == 2
    variable = "COMMUNITY_API_" + flag[2:].replace("-", "_").upper()
    assert result.stderr.splitlines() == [
        f"community-api: {flag} was given empty: give it a value, or leave it out to use {variable}"
    ]


def test_a_database_under_home_is_the_same_file_for_every_command(tmp_path: Path) -> None:
    """``COMMUNITY_API_DB=~/…`` unexpanded (a systemd environment file, a quoted value): before, the account
    was made under the home folder and ``accounts list`` then found "no database at ~/db.sqlite3"."""
    env = {"COMMUNITY_API_DB": "~/db.sqlite3", "COMMUNITY_API_MODE": "test", "HOME": str(tmp_path)}
    assert run("accounts", "create", "ops@example.com", stdin="a strong password\n", env=env).returncode == 0
    listed = run("accounts", "list", env=env)
    assert listed.returncode == 0 and "ops@example.com" in listed.stdout, listed.stderr
    assert (tmp_path / "db.sqlite3").is_file()


def test_a_database_on_a_read_only_file_system_says_why_it_cannot_be_opened(tmp_path: Path) -> None:
    """Before: SQLite's "unable to open database file" (and "not a readable SQLite database" from backup), for
    a file that is there and readable: in WAL mode SQLite makes its -wal and -shm files beside it."""
    require_namespaces()
    env = {"COMMUNITY_API_DB": str(tmp_path / "db.sqlite3"), "COMMUNITY_API_MODE": "test"}
    assert run("accounts", "create", "ops@example.com", stdin="a strong password\n", env=env).returncode == 0
    frozen = tmp_path / "frozen"
    frozen.mkdir()
    (tmp_path / "copies").mkdir()
    script = (
        f'mount -t tmpfs none "{frozen}" && cp "{tmp_path}/db.sqlite3" "{frozen}/" && mount -o remount,ro "{frozen}"'
        f' && {{ "$0" -m adapters.cli accounts list; "$0" -m adapters.cli backup --into "{tmp_path}/copies"; }}'
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("COMMUNITY_API_")}
    result = subprocess.run(
        [*UNSHARE, "sh", "-c", script, sys.executable],
        cwd=ROOT,
        env={**clean, **env, "COMMUNITY_API_DB": str(frozen / "db.sqlite3")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    why = (
        f"the folder {frozen} takes no new file (read-only, or not this user's to write), and SQLite keeps the"
        " database's -wal and -shm files beside it"
    )
    assert result.stderr.splitlines() == [
        f"community-api: COMMUNITY_API_DB: cannot use {frozen}/db.sqlite3: {why}",
        f"community-api: cannot read {frozen}/db.sqlite3: {why}",
    ]
    assert not any((tmp_path / "copies").iterdir())


@pytest.mark.parametrize(
    ("scheme", "said"),
    [
        ("mmap", "{other} is not a throttle file: it holds something else, left as it is"),
        ("sqlite", "{other}: it is a SQLite database of something else (tables photos)"),
    ],
)
def test_a_throttle_storage_naming_another_programs_database_is_refused(tmp_path: Path, scheme: str, said: str) -> None:
    other = tmp_path / "photos.sqlite3"
    with contextlib.closing(sqlite3.connect(other)) as conn, conn:
        conn.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)")
    held = other.read_bytes()
    env = {
        "COMMUNITY_API_DB": str(tmp_path / "db.sqlite3"),
        "COMMUNITY_API_MODE": "test",
        "COMMUNITY_API_THROTTLE_STORAGE": f"{scheme}://{other}",
    }
    result = run("serve", "--bind", "127.0.0.1:1", env=env)
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("community-api: COMMUNITY_API_THROTTLE_STORAGE (default: a file beside the database)")
    assert said.format(other=other) in line
    assert other.read_bytes() == held


def test_a_mapped_throttle_file_naming_the_database_is_refused_and_the_database_kept(tmp_path: Path) -> None:
    """Before: ``mmap://`` took the database for a table of its own and cleared it: every account, key and
    connection gone. (``sqlite://`` may name the database: its tables live beside the service's.)"""
    db = tmp_path / "db.sqlite3"
    env = {"COMMUNITY_API_DB": str(db), "COMMUNITY_API_MODE": "test"}
    assert run("accounts", "create", "ops@example.com", stdin="a strong password\n", env=env).returncode == 0
    held = db.read_bytes()
    result = run("serve", "--bind", "127.0.0.1:1", env={**env, "COMMUNITY_API_THROTTLE_STORAGE": f"mmap://{db}"})
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("community-api: COMMUNITY_API_THROTTLE_STORAGE") and f"{db} is not a throttle" in line
    assert db.read_bytes() == held
    assert "ops@example.com" in run("accounts", "list", env=env).stdout


def test_serve_refuses_a_metrics_folder_that_holds_other_files(tmp_path: Path) -> None:
    """Before, gunicorn's configuration deleted every ``*.db`` in it: the service's state folder, named by
    mistake, lost any database of that name."""
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "community.db").write_text("someone's data")
    env = {"COMMUNITY_API_DB": str(tmp_path / "db.sqlite3"), "COMMUNITY_API_MODE": "test"}
    result = run("serve", "--bind", "127.0.0.1:1", env={**env, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics")})
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"community-api: PROMETHEUS_MULTIPROC_DIR={tmp_path / 'metrics'} holds files that are not"
        " prometheus_client's (community.db): give the metrics a folder of their own, or leave the variable unset"
        " (serve makes one)"
    ]
    assert (tmp_path / "metrics" / "community.db").read_text() == "someone's data"


def test_gunicorns_configuration_empties_only_the_librarys_files(tmp_path: Path) -> None:
    """What gunicorn's master does as it reads ``adapters/gunicorn_conf.py`` with the folder named."""
    for name in ["counter_12.db", "gauge_livesum_41.db", "community.db"]:
        (tmp_path / name).write_text("x")
    env = {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-c", "import adapters.gunicorn_conf"], cwd=ROOT, env=env, check=True, timeout=60)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["community.db"]
