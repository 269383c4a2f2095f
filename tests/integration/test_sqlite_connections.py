"""``ThreadConnections`` on a real SQLite file: one connection per thread and per process, all of this
process's closed by ``close()``, and a forked child opening one of its own beside those it inherited."""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import sqlite3
import threading
from pathlib import Path

import pytest
from sqlite_utils import Database

from adapters.store.sqlite_connections import ThreadConnections


@pytest.fixture
def db_path(tmp_path: Path) -> str:
    return str(tmp_path / "store.db")


def _files_open_on(path: str) -> int:
    """How many of this process's file descriptors name ``path`` (the database itself, not its WAL)."""
    real = os.path.realpath(path)
    fds = Path("/proc/self/fd")
    count = 0
    for fd in fds.iterdir():
        with contextlib.suppress(OSError):  # the descriptor of the listing itself, gone by now
            count += os.readlink(fd) == real
    return count


def _in_thread(connections: ThreadConnections, until: threading.Event) -> Database:
    """The connection a new thread is given; the thread lives on until ``until`` is set (a dead thread's
    connection goes with its locals)."""
    found: list[Database] = []
    opened = threading.Event()

    def run() -> None:
        found.append(connections.db)
        opened.set()
        until.wait(10)

    threading.Thread(target=run, daemon=True).start()
    assert opened.wait(10)
    return found[0]


def test_each_thread_has_its_own_connection_and_keeps_it(db_path: str) -> None:
    connections = ThreadConnections(db_path, 1000)
    mine = connections.db
    assert connections.db is mine
    end = threading.Event()
    try:
        assert _in_thread(connections, end).conn is not mine.conn
    finally:
        end.set()


def test_close_closes_every_threads_connection_and_lets_go_of_the_file(db_path: str) -> None:
    connections = ThreadConnections(db_path, 1000)
    end = threading.Event()
    try:
        held = [connections.db, _in_thread(connections, end), _in_thread(connections, end)]
        assert _files_open_on(db_path) == 3
        connections.close()
        assert _files_open_on(db_path) == 0
        for db in held:
            with pytest.raises(sqlite3.ProgrammingError):
                db.execute("select 1")
    finally:
        end.set()


def test_a_thread_whose_connection_was_closed_by_another_gets_a_new_one(db_path: str) -> None:
    """``close()`` runs in one thread (a worker ending, a test's teardown); a thread that goes on using
    the store afterwards must be given a new connection, not fail on the closed one."""
    connections = ThreadConnections(db_path, 1000)
    connections.db.execute("create table t (x integer)")
    ready, closed = threading.Event(), threading.Event()
    results: list[object] = []

    def worker() -> None:
        connections.db.execute("insert into t values (1)")
        ready.set()
        closed.wait(10)
        try:
            connections.db.execute("insert into t values (2)")
            results.append("written")
        except Exception as error:  # noqa: BLE001 - the failure is the outcome under test
            results.append(error)

    thread = threading.Thread(target=worker)
    thread.start()
    assert ready.wait(10)
    connections.close()
    closed.set()
    thread.join(10)
    assert results == ["written"]
    assert [row[0] for row in connections.db.execute("select x from t order by x").fetchall()] == [1, 2]


def _child(connections: ThreadConnections, path: str, answers: multiprocessing.Queue[object]) -> None:
    try:
        gc.collect()  # the parent's other threads are gone here
        answers.put(("inherited, kept open", _files_open_on(path)))
        own = connections.db
        own.execute("insert into t values (2)")
        answers.put(("and one of its own", _files_open_on(path)))
        connections.close()
        try:
            own.execute("select 1")
            answers.put(("its own closed", False))
        except sqlite3.ProgrammingError:
            answers.put(("its own closed", True))
    except Exception as error:  # noqa: BLE001 - reported to the parent, which fails the test
        answers.put(("error", repr(error)))


@pytest.mark.slow
def test_a_forked_child_opens_a_connection_of_its_own_and_leaves_the_inherited_ones(db_path: str) -> None:
    """The parent has connections on two threads when it forks (``gunicorn --preload``): the child opens a
    connection of its own and leaves the inherited ones open (they are never used there; closing them would
    run SQLite's close path on the parent's behalf)."""
    connections = ThreadConnections(db_path, 1000)
    connections.db.execute("create table t (x integer)")
    connections.db.execute("insert into t values (1)")
    end = threading.Event()
    try:
        _in_thread(connections, end)
        assert _files_open_on(db_path) == 2
        ctx = multiprocessing.get_context("fork")
        answers: multiprocessing.Queue[object] = ctx.Queue()
        child = ctx.Process(target=_child, args=(connections, db_path, answers))
        child.start()
        child.join(30)
        assert child.exitcode == 0
        told = [answers.get(timeout=5) for _ in range(3)]
        assert told == [("inherited, kept open", 2), ("and one of its own", 3), ("its own closed", True)]
        assert _files_open_on(db_path) == 2
        assert [row[0] for row in connections.db.execute("select x from t order by x").fetchall()] == [1, 2]
    finally:
        end.set()
