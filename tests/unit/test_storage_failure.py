"""A failure of the service's own storage is told apart from a bug (``adapters/storage_failure.py``), with
real SQLite errors where SQLite can make them, and answered as 503 ``service_unavailable`` by both edges.
The whole path on a disk that really fills: ``tests/e2e/test_full_disk.py``."""

from __future__ import annotations

import errno
import json
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from adapters.storage_failure import storage_failure
from tests.unit.test_mcp_world import McpWorld

FEED = "builders-club"


def full_database(tmp_path: Path) -> sqlite3.Error:
    """SQLITE_FULL: the database may not grow past its pages (as on a full disk)."""
    db = sqlite3.connect(tmp_path / "full.sqlite3")
    db.execute("CREATE TABLE t (x BLOB)")
    db.execute(f"PRAGMA max_page_count = {db.execute('PRAGMA page_count').fetchone()[0] + 1}")
    try:
        for _ in range(100):
            db.execute("INSERT INTO t VALUES (?)", (bytes(4096),))
    except sqlite3.Error as error:
        return error
    raise AssertionError("the database never filled")


def read_only_database(tmp_path: Path) -> sqlite3.Error:
    path = tmp_path / "ro.sqlite3"
    sqlite3.connect(path).execute("CREATE TABLE t (x)").connection.commit()
    db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        db.execute("INSERT INTO t VALUES (1)")
    except sqlite3.Error as error:
        return error
    raise AssertionError("a read-only database took a write")


def busy_database(tmp_path: Path) -> sqlite3.Error:
    path = tmp_path / "busy.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN IMMEDIATE")
    try:
        sqlite3.connect(path, timeout=0, isolation_level=None).execute("BEGIN IMMEDIATE")
    except sqlite3.Error as error:
        return error
    finally:
        holder.execute("ROLLBACK")
    raise AssertionError("two writers at once")


def constraint(tmp_path: Path) -> sqlite3.Error:
    db = sqlite3.connect(tmp_path / "c.sqlite3")
    db.execute("CREATE TABLE t (x UNIQUE)")
    db.execute("INSERT INTO t VALUES (1)")
    try:
        db.execute("INSERT INTO t VALUES (1)")
    except sqlite3.Error as error:
        return error
    raise AssertionError("a duplicate was taken")


def raised_from(cause: BaseException) -> BaseException:
    try:
        try:
            raise cause
        except BaseException as inner:
            raise RuntimeError("while writing usage") from inner
    except RuntimeError as outer:
        return outer


def extended(name: str) -> sqlite3.Error:
    """An error of SQLite's with an extended result code (SQLITE_IOERR_WRITE, …), as the module reports one."""
    error = sqlite3.OperationalError("disk I/O error")
    error.sqlite_errorname = name
    return error


def raised_while_handling(cause: BaseException) -> BaseException:
    try:
        try:
            raise cause
        except BaseException:
            raise RuntimeError("while writing usage")  # noqa: B904 (no ``from``: the cause is the context)
    except RuntimeError as outer:
        return outer


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda _: extended("SQLITE_IOERR_WRITE"), "the disk failed a read or a write"),
        (lambda _: extended("SQLITE_READONLY_DBMOVED"), "the database is read-only"),
        (lambda _: extended("SQLITE_BUSY_SNAPSHOT"), "the database stayed busy"),
        (lambda tmp: raised_while_handling(full_database(tmp)), "the disk is full"),
        (full_database, "the disk is full"),
        (read_only_database, "the database is read-only"),
        (busy_database, "the database stayed busy"),
        (lambda _: OSError(errno.ENOSPC, "No space left on device"), "the disk is full"),
        (lambda _: OSError(errno.EDQUOT, "Disk quota exceeded"), "the disk quota is used up"),
        (lambda _: OSError(errno.EROFS, "Read-only file system"), "the file system is read-only"),
        (lambda _: OSError(errno.EIO, "Input/output error"), "the disk failed a read or a write"),
        (lambda tmp: raised_from(full_database(tmp)), "the disk is full"),
        # A bug, or another failure, stays what it is.
        (constraint, None),
        (lambda _: OSError(errno.ECONNREFUSED, "Connection refused"), None),
        (lambda _: FileNotFoundError(errno.ENOENT, "No such file"), None),
        (lambda _: KeyError("x"), None),
        (lambda _: sqlite3.OperationalError("no such table: t"), None),
    ],
)
def test_what_is_a_failure_of_the_storage(
    tmp_path: Path, make: Callable[[Path], BaseException], said: str | None
) -> None:
    assert storage_failure(make(tmp_path)) == said


def test_a_chain_of_causes_that_loops_ends() -> None:
    """Exceptions can be made to name each other as context; the walk through them must still end."""
    first, second = RuntimeError("first"), RuntimeError("second")
    first.__context__, second.__context__ = second, first
    answers: list[str | None] = []
    walker = threading.Thread(target=lambda: answers.append(storage_failure(first)), daemon=True)
    walker.start()
    walker.join(timeout=10)
    assert not walker.is_alive() and answers == [None]


@pytest.fixture
def world() -> Iterator[McpWorld]:
    built = McpWorld.build()
    yield built
    built.close()


def test_both_edges_answer_503_and_say_a_write_may_have_been_done(
    world: McpWorld, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    world.gateway.fail_next("whoami", full_database(tmp_path), times=2)
    read = world.client.simulate_get("/v1/whoami", headers=world.headers(world.all_key))
    # One line for the operator says why (a traceback per request while the disk is full would not).
    [line] = [json.loads(r.getMessage()) for r in caplog.records if r.name == "community_api.errors"]
    assert line["status"] == 503 and line["code"] == "service_unavailable"
    assert line["message"] == read.json["error"]["message"] and line["cause"].endswith("database or disk is full")
    assert read.status_code == 503 and read.headers["Retry-After"] == "30"
    assert read.json["error"]["code"] == "service_unavailable"
    assert read.json["error"]["message"] == (
        "the service cannot use its storage right now (the disk is full); try again later"
    )
    tool = world.fail("whoami", {})
    assert tool["code"] == "service_unavailable" and tool["details"] == {"retryAfter": 30}
    assert tool["message"] == read.json["error"]["message"]

    world.gateway.fail_next("create_post", OSError(errno.ENOSPC, "No space left on device"))
    write = world.fail("create_post", {"group": FEED, "title": "Maybe"})
    assert write["code"] == "service_unavailable"
    assert "may have been done all the same: look before sending it again" in write["message"]
