"""``MemoryRoom``: the memory question the browser pool asks before it starts a local browser, answered from
the machine's figures and the reservations of the starts in flight, in this process and in others (real
files, a real second process)."""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from adapters.platform import memory_room, procfs
from adapters.platform.memory_room import MIN_FREE_MIB, RESERVATION_SECONDS, STARTING_MIB, MemoryRoom

ROOT = Path(__file__).resolve().parents[2]


class Figures:
    def __init__(self, *mib: int | None) -> None:
        self.mib = list(mib)

    def __call__(self) -> list[int | None]:
        return self.mib


def test_the_machines_figure_and_its_cgroups_both_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(procfs, "cgroup_headroom_mib", lambda: None)
    monkeypatch.setattr(procfs, "memory_available_mib", lambda: MIN_FREE_MIB - 1)
    room = MemoryRoom(str(tmp_path / "starts"))
    assert room() is None
    monkeypatch.setattr(procfs, "memory_available_mib", lambda: MIN_FREE_MIB)
    assert room() is not None
    monkeypatch.setattr(procfs, "memory_available_mib", lambda: None)  # unknown: not a reason to refuse
    assert MemoryRoom(str(tmp_path / "other"))() is not None
    monkeypatch.setattr(procfs, "cgroup_headroom_mib", lambda: MIN_FREE_MIB - 1)  # a unit's limit
    assert MemoryRoom(str(tmp_path / "third"))() is None


def test_starts_in_flight_count_until_released(tmp_path: Path) -> None:
    """A start needs 600 MiB free beside what the starts in flight will take: just short of two of those, the
    third start, asked while the first two still load, is refused though the machine's figure has not moved."""
    room = MemoryRoom(str(tmp_path), figures=Figures(MIN_FREE_MIB + 2 * STARTING_MIB - 1, None))
    first, second = room(), room()
    assert first is not None and second is not None
    assert room() is None and room.pending() == 2
    first.release()
    assert room.pending() == 1
    third = room()
    assert third is not None
    first.release()  # twice: harmless
    second.release()
    third.release()
    assert room.pending() == 0 and [p.name for p in tmp_path.iterdir()] == ["lock"]


def test_questions_asked_at_once_by_many_threads_get_only_the_room_there_is(tmp_path: Path) -> None:
    room = MemoryRoom(str(tmp_path), figures=Figures(MIN_FREE_MIB + 3 * STARTING_MIB))
    answers: list[object] = []
    gate = threading.Barrier(12)

    def ask() -> None:
        gate.wait()
        answers.append(room())

    threads = [threading.Thread(target=ask) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(answer is not None for answer in answers) == 4  # the fourth finds 600 beside three in flight


def test_another_workers_start_counts_and_stops_counting_when_its_process_ends(tmp_path: Path) -> None:
    worker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys
                from adapters.platform.memory_room import MemoryRoom
                held = MemoryRoom({str(tmp_path)!r}, figures=lambda: [None])()
                print("reserved" if held is not None else "refused", flush=True)
                sys.stdin.read()  # keeps its reservation until told to end
                """
            ),
        ],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stdout is not None and worker.stdout.readline().strip() == "reserved"
        room = MemoryRoom(str(tmp_path), figures=Figures(MIN_FREE_MIB + STARTING_MIB - 1))
        assert room.pending() == 1
        assert room() is None  # the other worker's browser is starting: no room for a second one
        worker.kill()  # died before releasing it (a worker killed mid-start)
        worker.wait(10)
        assert room.pending() == 0  # its reservation no longer counts, and is removed
        assert room() is not None
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(10)
        for pipe in (worker.stdin, worker.stdout):
            if pipe is not None:
                pipe.close()


def test_a_pools_first_browser_is_reserved_whatever_the_memory_says(tmp_path: Path) -> None:
    room = MemoryRoom(str(tmp_path), figures=Figures(MIN_FREE_MIB - 1))
    assert room() is None
    first = room(first=True)
    assert first is not None and room.pending() == 1  # counted by the others' starts meanwhile
    first.release()
    assert room.pending() == 0


def test_a_reservation_past_its_time_no_longer_counts(tmp_path: Path) -> None:
    now = [1_000_000.0]
    room = MemoryRoom(str(tmp_path), figures=Figures(MIN_FREE_MIB + STARTING_MIB - 1), clock=lambda: now[0])
    assert room() is not None
    assert room() is None
    now[0] += RESERVATION_SECONDS + 1  # a call that overran every deadline: its browser is running anyway
    assert room.pending() == 0 and room() is not None


@pytest.mark.parametrize("content", ["", "not a time", "1e400x"])
def test_an_unreadable_reservation_is_removed(tmp_path: Path, content: str) -> None:
    room = MemoryRoom(str(tmp_path), figures=Figures(None))
    assert room.pending() == 0  # makes the folder
    (tmp_path / f"{os.getpid()}-abc").write_text(content)
    (tmp_path / "stray").write_text("9e99")
    (tmp_path / f"{os.getpid()}-folder").mkdir()  # not a reservation, and not removable as a file
    assert room.pending() == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["lock", f"{os.getpid()}-folder"])
    assert room() is not None  # asking does not fail for it


def test_a_folder_another_user_could_write_is_not_trusted(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    folder = tmp_path / "starts"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)  # as if made by someone else in a shared /tmp: its reservations could be forged
    room = MemoryRoom(str(folder), figures=Figures(MIN_FREE_MIB + STARTING_MIB - 1))
    with caplog.at_level(logging.WARNING, logger="adapters.platform.memory_room"):
        assert room() is not None and room() is not None  # judged by the machine's figure alone
        assert room.pending() == 0
    assert list(folder.iterdir()) == []  # nothing written there
    assert len([r for r in caplog.records if "not counted across workers" in r.getMessage()]) == 1  # said once
    assert MemoryRoom(str(tmp_path / "link"), figures=Figures(MIN_FREE_MIB - 1))() is None  # figures still hold


def test_a_symlink_in_place_of_the_folder_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    (tmp_path / "starts").symlink_to(target)
    room = MemoryRoom(str(tmp_path / "starts"), figures=Figures(None))
    assert room() is not None
    assert list(target.iterdir()) == []


def test_a_lock_held_too_long_is_not_waited_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process stopped while it holds the lock (a debugger, SIGSTOP) must not stall the pool, which asks
    with its own lock held: past the wait, the machine's figure decides alone."""
    monkeypatch.setattr(memory_room, "LOCK_WAIT_SECONDS", 0.2)
    room = MemoryRoom(str(tmp_path), figures=Figures(MIN_FREE_MIB))
    assert room.pending() == 0  # makes the folder and its lock file
    holder = os.open(tmp_path / "lock", os.O_RDWR)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)  # another open file: conflicts as another process's would
        started = time.monotonic()
        assert room() is not None  # 600 MiB free: enough, judged by the figure alone
        assert 0.15 <= time.monotonic() - started < 2
        assert [p.name for p in tmp_path.iterdir()] == ["lock"]  # nothing reserved without the lock
    finally:
        os.close(holder)
    assert room() is not None and room.pending() == 1  # the lock free again: counted as before


def test_a_reservation_that_cannot_be_removed_is_released_quietly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Released as a platform call ends, in the pool's ``finally``: an error there would replace the call's
    answer. When the file cannot be removed, the release says nothing and the file's time runs out."""
    now = [1_000_000.0]
    room = MemoryRoom(str(tmp_path), figures=Figures(MIN_FREE_MIB + STARTING_MIB - 1), clock=lambda: now[0])
    held = room()
    assert held is not None

    def refused(path: str) -> None:
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(memory_room.os, "unlink", refused)
    held.release()
    monkeypatch.undo()
    assert room() is None  # still counted
    now[0] += RESERVATION_SECONDS + 1
    assert room() is not None


def test_without_locks_on_the_file_system_starts_are_judged_by_the_figures_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file system without ``flock`` (ENOLCK: some network mounts) is not waited on as if the lock were held,
    and reservations read or written without the lock would be counted by chance."""
    room = MemoryRoom(str(tmp_path), figures=Figures(MIN_FREE_MIB + STARTING_MIB - 1))
    held = room()  # one start in flight, counted while locks work
    assert held is not None and room() is None

    def no_locks(descriptor: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(memory_room.fcntl, "flock", no_locks)
    started = time.monotonic()
    assert room() is not None and room.pending() == 0
    assert time.monotonic() - started < memory_room.LOCK_WAIT_SECONDS
    assert len(list(tmp_path.iterdir())) == 2  # the lock and the first reservation: nothing written unlocked


def test_reservations_in_an_untrusted_folder_are_neither_counted_nor_removed(tmp_path: Path) -> None:
    folder = tmp_path / "starts"
    folder.mkdir()
    folder.chmod(0o777)
    forged = folder / f"{os.getpid()}-forged"
    forged.write_text(repr(time.time() + 3600))  # would refuse every start if it counted
    room = MemoryRoom(str(folder), figures=Figures(MIN_FREE_MIB + STARTING_MIB - 1))
    assert room() is not None and room.pending() == 0
    assert forged.exists()


@pytest.mark.parametrize("mode", [0o770, 0o750, 0o710, 0o707, 0o701])
def test_a_folder_its_group_or_others_may_enter_is_not_trusted(tmp_path: Path, mode: int) -> None:
    folder = tmp_path / "starts"
    folder.mkdir()
    folder.chmod(mode)
    room = MemoryRoom(str(folder), figures=Figures(None))
    assert room() is not None
    assert list(folder.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a folder to another user")
def test_a_private_folder_of_another_user_is_not_trusted(tmp_path: Path) -> None:
    folder = tmp_path / "starts"
    folder.mkdir(mode=0o700)
    os.chown(folder, 65534, 65534)  # nobody's: its owner could forge reservations or remove ours
    room = MemoryRoom(str(folder), figures=Figures(None))
    assert room() is not None
    assert list(folder.iterdir()) == []


def test_a_symlink_in_place_of_the_lock_is_not_followed(tmp_path: Path) -> None:
    folder = tmp_path / "starts"
    folder.mkdir(mode=0o700)
    target = tmp_path / "elsewhere"
    (folder / "lock").symlink_to(target)
    room = MemoryRoom(str(folder), figures=Figures(None))
    assert room() is not None
    assert not target.exists() and [p.name for p in folder.iterdir()] == ["lock"]


def test_a_reservation_stops_counting_the_moment_its_time_is_up(tmp_path: Path) -> None:
    now = [1_000_000.0]
    room = MemoryRoom(str(tmp_path), figures=Figures(None), clock=lambda: now[0])
    assert room() is not None
    now[0] += RESERVATION_SECONDS - 0.5
    assert room.pending() == 1
    now[0] += 0.5
    assert room.pending() == 0


def test_a_reservation_that_cannot_be_written_leaves_no_file_and_the_start_goes_ahead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    room = MemoryRoom(str(tmp_path), figures=Figures(None))
    assert room.pending() == 0  # makes the folder

    def disk_full(descriptor: int, *args: object, **kwargs: object) -> object:
        os.close(descriptor)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(memory_room.os, "fdopen", disk_full)
    with caplog.at_level(logging.WARNING, logger="adapters.platform.memory_room"):
        held = room()
    monkeypatch.undo()
    assert held is not None
    held.release()
    assert [p.name for p in tmp_path.iterdir()] == ["lock"]  # no empty reservation left to be read as broken
    assert any("could not be reserved" in r.getMessage() for r in caplog.records)


def test_many_starts_of_one_process_each_have_a_reservation_of_their_own(tmp_path: Path) -> None:
    room = MemoryRoom(str(tmp_path), figures=Figures(None))
    held = [room() for _ in range(60)]
    assert room.pending() == 60
    for each in held:
        assert each is not None
        each.release()
    assert room.pending() == 0
