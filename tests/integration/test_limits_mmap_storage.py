"""What only the ``mmap://`` storage has: its URI, its capacity, a table that grows while other processes
use it, and a file that outlives the processes. (What it shares with the SQLite storage — the answers of
``limits``' own storages, exact counts across threads and processes — is in ``test_limits_storages.py``.)"""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import struct
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

import pytest
from freezegun import freeze_time
from freezegun.api import FrozenDateTimeFactory
from limits.errors import ConfigurationError
from limits.storage import storage_from_string

from adapters.throttle.limits_platform_pace import LimitsPlatformPace
from adapters.throttle.limits_throttle import LimitsThrottle
from adapters.throttle.mmap_limits_storage import DEFAULT_CAPACITY, MAGIC, MmapStorage, parse_uri
from tests.small_filesystem import UNSHARE, require_namespaces

FORK = multiprocessing.get_context("fork")
START = datetime(2100, 1, 1, tzinfo=UTC)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "var" / "throttle.mmap"


def open_storage(path: Path, capacity: int | None = None) -> MmapStorage:
    made = storage_from_string(f"mmap://{path}" + (f"?capacity={capacity}" if capacity else ""))
    assert isinstance(made, MmapStorage)
    return made


@pytest.fixture
def frozen() -> Iterator[FrozenDateTimeFactory]:
    with freeze_time(START) as clock:
        yield cast(FrozenDateTimeFactory, clock)


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("mmap:///srv/api/throttle.mmap", ("/srv/api/throttle.mmap", DEFAULT_CAPACITY)),
        ("mmap:////srv/api/throttle.mmap", ("/srv/api/throttle.mmap", DEFAULT_CAPACITY)),
        ("mmap://var/throttle.mmap", ("var/throttle.mmap", DEFAULT_CAPACITY)),
        ("mmap:///srv/my%20api/t.mmap?capacity=600", ("/srv/my api/t.mmap", 600)),
        ("mmap://~/t.mmap", ("{home}/t.mmap", DEFAULT_CAPACITY)),  # before: a folder named "~" where it ran
        ("mmap:///t.mmap?capacity=65536", ("/t.mmap", 65536)),  # the largest
        ("mmap:///t.mmap?capacity=1&capacity=8", ("/t.mmap", 8)),  # the last one given, as query strings go
    ],
)
def test_the_uri_names_the_file_and_the_capacity(
    uri: str, expected: tuple[str, int], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert parse_uri(uri) == (expected[0].format(home=tmp_path), expected[1])


@pytest.mark.parametrize(
    "uri",
    [
        "mmap://",
        "mmap:///",
        "mmap:///t.mmap?capacity=0",
        "mmap:///t.mmap?capacity=65537",
        "mmap:///t.mmap?capacity=ten",
        "mmap:///t.mmap?capacity=%C2%B2",  # "²": a digit to str.isdigit(), not to int()
        "mmap:///t.mmap?capacity=",
        "mmap:///t.mmap?size=4",
    ],
)
def test_a_uri_without_a_file_or_with_a_bad_option_is_refused(uri: str) -> None:
    with pytest.raises(ConfigurationError):
        storage_from_string(uri)


def test_a_window_larger_than_the_capacity_is_refused_not_miscounted(path: Path) -> None:
    storage = open_storage(path, capacity=4)
    assert storage.acquire_entry("k", 4, 60, amount=4)
    with pytest.raises(ConfigurationError, match=r"\?capacity=5"):
        storage.acquire_entry("k", 5, 60)
    # Each user checks at start-up that its largest window fits.
    with pytest.raises(ConfigurationError, match="platform pace keeps windows of 60"):
        LimitsPlatformPace(f"mmap://{path}?capacity=59", 60)
    with pytest.raises(ConfigurationError, match="platform pace keeps windows of 70"):
        LimitsPlatformPace(f"mmap://{path}?capacity=69", 20, 70)  # writes too
    LimitsPlatformPace(f"mmap://{path}?capacity=70", 20, 70)
    with pytest.raises(ConfigurationError, match="DM throttle"):
        LimitsThrottle(f"mmap://{path}?capacity=100", salt="s")
    LimitsThrottle(f"mmap://{path}?capacity=101", salt="s")


def test_a_larger_capacity_starts_the_file_again_and_a_smaller_one_uses_it(path: Path) -> None:
    small = open_storage(path, capacity=8)
    assert small.acquire_entry("k", 8, 60)
    large = open_storage(path, capacity=16)
    assert large.get_moving_window("k", 8, 60)[1] == 0  # rebuilt empty at the larger capacity
    assert large.acquire_entry("k", 16, 60, amount=16)
    # The first storage maps the file again at its new capacity and sees the same entries.
    assert small.get_moving_window("k", 16, 60)[1] == 16
    assert open_storage(path, capacity=8).get_moving_window("k", 16, 60)[1] == 16


def test_a_slot_used_again_does_not_read_the_entries_it_held(path: Path, frozen: FrozenDateTimeFactory) -> None:
    """A ring as long as the window, filled, then cleared (or expired): the slot is used again, and the
    ring still holds the old times, which a new window must not count."""
    storage = open_storage(path, capacity=4)
    assert storage.acquire_entry("k", 4, 60, amount=4)
    storage.clear("k")
    assert storage.acquire_entry("k", 4, 60, amount=2)
    assert storage.acquire_entry("k", 4, 60, amount=2)  # the ring's other half holds the old times
    assert not storage.acquire_entry("k", 4, 60)


def test_state_outlives_the_process(path: Path) -> None:
    assert open_storage(path).acquire_entry("k", 3, 600)
    assert open_storage(path).get_moving_window("k", 3, 600)[1] == 1  # a new instance, as after a restart


@pytest.mark.parametrize(
    "held",
    [
        b"not a throttle file" * 10,
        b"SQLite format 3\x00" + bytes(2000),  # the database, named by mistake: it was cleared, every account gone
        b"x",  # shorter than a header
        bytes(10) + b"data",
    ],
)
def test_a_file_that_holds_something_else_is_refused_and_left_as_it_is(path: Path, held: bytes) -> None:
    path.parent.mkdir()
    path.write_bytes(held)
    storage = open_storage(path)
    with pytest.raises(ConfigurationError, match=f"^{path} is not a throttle file: it holds something else"):
        storage.acquire_entry("k", 3, 600)
    with pytest.raises(ConfigurationError):
        storage.get_moving_window("k", 3, 600)
    assert path.read_bytes() == held
    # The refusal left the file unlocked: the other workers, each on a descriptor of its own, are not stuck.
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)


@pytest.mark.parametrize(
    "held",
    [
        b"",
        bytes(10),
        bytes(64),
        bytes(64) + b"an old table's slots",
        MAGIC + struct.pack("<III", DEFAULT_CAPACITY, 0, 0) + bytes(52),  # the mark, and a table of no slots
    ],
)
def test_an_empty_file_or_one_of_zeros_is_made_a_table(path: Path, held: bytes) -> None:
    """A new file, or one whose making was cut short (``_make`` writes the header last, so a file of zeros
    there may hold an old table's slots after it)."""
    path.parent.mkdir()
    path.write_bytes(held)
    storage = open_storage(path)
    assert storage.acquire_entry("k", 3, 600)
    assert path.read_bytes()[:8] == MAGIC


def test_the_table_grows_and_keeps_every_live_key(path: Path, frozen: FrozenDateTimeFactory) -> None:
    storage = open_storage(path, capacity=2)
    assert storage.check()  # opens the file lazily, as every operation does
    before = path.stat().st_size
    for i in range(3000):
        assert storage.acquire_entry(f"key-{i}", 2, 600)
        assert storage.incr(f"counter-{i}", 600) == 1
    assert path.stat().st_size > before
    assert all(storage.get_moving_window(f"key-{i}", 2, 600)[1] == 1 for i in range(3000))
    assert all(storage.get(f"counter-{i}") == 1 for i in range(3000))
    assert not storage.acquire_entry("key-7", 1, 600)
    assert storage.reset() == 6000
    assert path.stat().st_size == before  # forgetting every key gives the disk back
    assert storage.get("counter-7") == 0 and storage.acquire_entry("key-7", 1, 600)


def new_keys_that_grow_the_file(storage: MmapStorage, path: Path, keys: int) -> list[int]:
    """Which of ``keys`` new keys (counting from 1) found the file larger once it was added."""
    grew, size = [], 0
    for n in range(1, keys + 1):
        storage.incr(f"counter-{n}", 600)
        if path.stat().st_size != size:
            grew.append(n)
            size = path.stat().st_size
    return grew


def test_a_table_is_rebuilt_twice_as_large_when_seventy_percent_full(path: Path, frozen: FrozenDateTimeFactory) -> None:
    """A new table has 1,024 slots: 716 keys fit (70 %), the 717th doubles it to 2,048, where 1,433 fit."""
    storage = open_storage(path, capacity=2)
    assert new_keys_that_grow_the_file(storage, path, 1500) == [1, 717, 1434]
    assert all(storage.get(f"counter-{n}") == 1 for n in range(1, 1501))


def test_a_table_of_large_rings_starts_with_sixteen_slots(path: Path, frozen: FrozenDateTimeFactory) -> None:
    """At the largest capacity a slot is 512 KiB: the first table is 16 of them (8 MiB), not the 1 MiB a
    smaller ring's table is, and not one slot that grows at every new key. 11 keys fit; the 12th doubles it."""
    storage = open_storage(path, capacity=65536)
    storage.check()
    assert 8 << 20 < path.stat().st_size < 9 << 20
    assert new_keys_that_grow_the_file(storage, path, 12) == [1, 12]
    assert 16 << 20 < path.stat().st_size < 17 << 20


def test_a_file_cut_short_is_made_again_at_its_larger_capacity(path: Path) -> None:
    """A table whose file lost its end (a copy cut short, say) is made again, empty, at the larger of its
    own capacity and the opener's, so that a worker asking for the larger one does not empty it again."""
    assert open_storage(path, capacity=16).acquire_entry("k", 16, 60)
    os.truncate(path, 100)  # the header is whole, the slots are not
    small = open_storage(path, capacity=8)
    assert small.get_moving_window("k", 8, 60)[1] == 0
    assert small.acquire_entry("k", 8, 60, amount=8)
    assert open_storage(path, capacity=16).get_moving_window("k", 16, 60)[1] == 8


def test_expired_and_cleared_slots_are_reused_so_the_table_stays_small(
    path: Path, frozen: FrozenDateTimeFactory
) -> None:
    storage = open_storage(path, capacity=2)
    for i in range(3000):  # never more than a few live at once
        assert storage.acquire_entry(f"short-{i}", 1, 1)
        storage.clear(f"short-{i - 1}")
        frozen.tick(0.5)
    size = path.stat().st_size
    for i in range(3000, 6000):
        assert storage.acquire_entry(f"short-{i}", 1, 1)
        frozen.tick(0.5)
    assert path.stat().st_size == size


def _grow(path: Path, start: int, ready: multiprocessing.Queue) -> None:  # type: ignore[type-arg,unused-ignore]
    storage = open_storage(path, capacity=2)
    for i in range(start, start + 2000):
        assert storage.acquire_entry(f"key-{i}", 2, 3600)
    ready.put(os.getpid())


def test_other_processes_see_the_table_grown_by_one_of_them(path: Path) -> None:
    storage = open_storage(path, capacity=2)
    assert storage.acquire_entry("parent", 2, 3600)  # mapped at the first size before the children grow it
    done: multiprocessing.Queue = FORK.Queue()  # type: ignore[type-arg,unused-ignore]
    children = [FORK.Process(target=_grow, args=(path, n * 2000, done)) for n in range(3)]
    for child in children:
        child.start()
    for child in children:
        child.join(60)
        assert child.exitcode == 0
    assert storage.get_moving_window("parent", 2, 3600)[1] == 1
    assert all(storage.get_moving_window(f"key-{i}", 2, 3600)[1] == 1 for i in range(6000))
    assert storage.acquire_entry("parent", 2, 3600)
    assert not storage.acquire_entry("parent", 2, 3600)


def test_the_read_pace_step_answers_as_its_three_separate_calls_would(
    path: Path, frozen: FrozenDateTimeFactory
) -> None:
    """``acquire_entry_unless_held`` is get + get_expiry + acquire_entry in one lock (the pace's hot path)."""
    storage = open_storage(path, capacity=4)
    assert storage.acquire_entry_unless_held("hold", "reads", 3, 60, amount=2) == (0.0, True)
    assert storage.acquire_entry_unless_held("hold", "reads", 3, 60, amount=2) == (0.0, False)  # 4 > 3
    assert storage.acquire_entry_unless_held("hold", "reads", 3, 60, amount=4) == (0.0, False)  # > limit
    storage.incr("hold", 30)  # as the pace's hold counts: 1, expiring when the hold ends
    assert storage.acquire_entry_unless_held("hold", "reads", 3, 60) == (START.timestamp() + 30, False)
    assert storage.get_moving_window("reads", 3, 60)[1] == 2  # a held call adds nothing
    frozen.tick(30)  # the hold expires with its counter
    assert storage.acquire_entry_unless_held("hold", "reads", 3, 60) == (0.0, True)
    assert storage.get_moving_window("reads", 3, 60)[1] == 3


def holes(path: Path) -> int:
    """Bytes of the file that have no disk block (a sparse file's holes)."""
    stat = path.stat()
    return max(0, stat.st_size - stat.st_blocks * 512)


def test_every_block_of_the_file_is_allocated_made_grown_or_inherited(path: Path) -> None:
    # A page without a block, written through the mapping on a full disk, is SIGBUS: the worker dies.
    storage = open_storage(path)
    storage.acquire_entry("first", 10, 60)
    assert path.stat().st_size > 0 and holes(path) == 0
    size = path.stat().st_size
    for n in range(1500):  # past the first table: it is rebuilt twice as large
        storage.acquire_entry(f"key {n}", 10, 60)
    assert path.stat().st_size > size and holes(path) == 0
    # A file an earlier version left sparse is given its blocks by the first process that maps it.
    os.truncate(path, 0)
    os.truncate(path, 1 << 20)
    fd = os.open(path, os.O_RDWR)
    os.pwrite(fd, MAGIC, 0)  # a table's mark, with no slots: made again
    os.close(fd)
    assert holes(path) > 0
    open_storage(path).acquire_entry("first", 10, 60)
    assert holes(path) == 0


FULL_DISK = r"""
import os, sys
from adapters.throttle.mmap_limits_storage import MmapStorage
folder = sys.argv[1]
if os.system(f"mount -t tmpfs -o size=3M none {folder}") != 0:
    sys.exit("no small file system could be mounted")  # never fill the real disk below
storage = MmapStorage(f"mmap://{folder}/throttle.mmap")
for _ in range(3):
    storage.acquire_entry("kept", 10, 60)
fd = os.open(f"{folder}/filler", os.O_WRONLY | os.O_CREAT)
try:
    while True:
        os.write(fd, bytes(4096))
except OSError:
    pass
refused = 0
for n in range(2000):  # far more slots than the first table holds: it must grow, and cannot
    try:
        storage.acquire_entry(f"key {n}", 10, 60)
    except OSError:
        refused += 1
os.close(fd)
os.remove(f"{folder}/filler")
storage.acquire_entry("after", 10, 60)
print(refused, storage.get_moving_window("kept", 10, 60)[1], storage.get_moving_window("after", 10, 60)[1])
"""


def test_a_full_disk_is_an_error_of_the_storage_not_a_dead_process(tmp_path: Path) -> None:
    """On a 3 MiB file system, filled once the first table (1 MiB) is made: the table cannot grow.
    Before, the process died of SIGBUS."""
    require_namespaces()
    folder = tmp_path / "small"
    folder.mkdir()
    ran = subprocess.run(
        [
            *UNSHARE,
            sys.executable,
            "-c",
            FULL_DISK,
            str(folder),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert ran.returncode == 0, (ran.returncode, ran.stderr[-2000:])  # -7 before: SIGBUS
    refused, kept, after = map(int, ran.stdout.split())
    assert refused > 0  # an OSError for each key that needed a larger table
    assert kept == 3  # the table in the file survived the failed growth
    assert after == 1  # and with room again, the storage works
