"""What ``procfs`` reads of real processes (this machine's /proc) and of memory figures written as the kernel
writes them: a command name holding spaces and parentheses, the parent, the start that tells a process from
a later one with its PID, a zombie that is no longer running, the tree below a process."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.platform import procfs
from tests.integration.test_selenium_gateway_pool import MIB, cgroup_level, cgroup_v1_level

NAME = "a) b (c"  # a command name ``stat`` writes as ``PID (a) b (c) S ...``


@pytest.fixture
def odd_sleep(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """A ``sleep`` running under a command name that holds spaces and parentheses."""
    program = tmp_path / NAME
    shutil.copy(shutil.which("sleep") or "/bin/sleep", program)
    process = subprocess.Popen([str(program), "30", "1s"])
    try:
        yield process, str(program)
    finally:
        process.kill()
        process.wait()


def uptime() -> float:
    return float(Path("/proc/uptime").read_text().split()[0])


def test_a_process_is_read_whatever_its_name_holds(odd_sleep: tuple[subprocess.Popen[bytes], str]) -> None:
    process, program = odd_sleep
    assert procfs.command_name(process.pid) == NAME
    fields = procfs.stat(process.pid)
    assert fields is not None and fields[0] in "RS" and fields[1] == str(os.getpid())
    assert procfs.process_table()[process.pid] == (os.getpid(), NAME)
    assert procfs.arguments(process.pid) == [program, "30", "1s"]
    assert procfs.running(process.pid)
    assert process.pid in procfs.children(os.getpid())


def test_a_processs_start_is_when_it_started(odd_sleep: tuple[subprocess.Popen[bytes], str]) -> None:
    """Field 22 of ``stat``, in clock ticks since boot: with the PID it names one process, not a later one."""
    process, _ = odd_sleep
    started = procfs.start_time(process.pid)
    assert started is not None and started.isdigit()
    assert abs(int(started) / os.sysconf("SC_CLK_TCK") - uptime()) < 30  # it started just now
    assert int(started) >= int(procfs.start_time(os.getpid()) or 0)  # and after this test's process


def test_children_come_sorted(tmp_path: Path) -> None:
    processes = [subprocess.Popen(["sleep", "30"]) for _ in range(4)]
    try:
        found = procfs.children(os.getpid())
        assert found == sorted(found) and {p.pid for p in processes} <= set(found)
    finally:
        for process in processes:
            process.kill()
            process.wait()


def test_a_zombie_is_not_running_and_an_ended_process_is_gone() -> None:
    process = subprocess.Popen(["sleep", "30"])
    process.kill()
    deadline = time.monotonic() + 5
    while (procfs.stat(process.pid) or ["?"])[0] != "Z" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert procfs.command_name(process.pid) == "sleep"  # still listed, waiting for its parent
    assert not procfs.running(process.pid)
    process.wait()
    assert procfs.stat(process.pid) is None and procfs.command_name(process.pid) is None
    assert procfs.arguments(process.pid) == [] and procfs.start_time(process.pid) is None
    assert not procfs.running(process.pid)


def test_a_stat_text_without_a_command_name_is_read_as_no_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(procfs, "_stat_text", lambda pid: "4242 truncated")
    assert procfs.stat(4242) is None and procfs.command_name(4242) is None and not procfs.running(4242)


def test_descendants_are_children_first_and_read_from_the_table_given() -> None:
    table = {2: (1, "chromedriver"), 3: (1, "chromium"), 4: (2, "chromium"), 5: (4, "chromium"), 6: (9, "other")}
    assert procfs.descendants(1, table) == [2, 3, 4, 5]
    assert procfs.descendants(4, table) == [5] and procfs.descendants(5, table) == []


def test_descendants_of_a_live_process_are_found() -> None:
    shell = subprocess.Popen(["sh", "-c", "sleep 30 & wait"])
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # the shell forks, then its child becomes sleep
            found = procfs.descendants(shell.pid)
            if found and procfs.command_name(found[0]) == "sleep":
                break
            time.sleep(0.01)
        (child,) = procfs.descendants(shell.pid)
        assert procfs.command_name(child) == "sleep"
    finally:
        for pid in procfs.descendants(shell.pid):
            os.kill(pid, 9)
        shell.kill()
        shell.wait()


@pytest.mark.parametrize(
    "line",
    ["MemAvailable:    9437184 MB\n", "MemAvailable:    9437184\n", "MemAvailable:    lots kB\n"],
)
def test_memory_written_otherwise_than_in_kb_is_unknown(tmp_path: Path, line: str) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       16318412 kB\n" + line)
    assert procfs.memory_available_mib(str(meminfo)) is None


def test_a_v1_memory_cgroup_is_found_by_its_controller_and_whole_path(tmp_path: Path) -> None:
    """Only the ``memory`` controller's line counts (not a named hierarchy whose name holds the word), and a
    cgroup path may hold a colon."""
    root, own = tmp_path / "cgroup", tmp_path / "self-cgroup"
    cgroup_v1_level(root / "memory", 1 << 62, 0, 1 << 62, 0)  # the controller's root: no limit
    cgroup_v1_level(root / "memory" / "svc:1", 1024 * MIB, 700 * MIB, 1024 * MIB, 0)
    cgroup_v1_level(root / "memory" / "wrong", 2048 * MIB, 0, 2048 * MIB, 0)
    own.write_text("3:name=memorywatch:/wrong\n5:memory:/svc:1\n0::/svc:1\n")
    assert procfs.cgroup_headroom_mib(str(own), str(root)) == 324


def test_the_v2_headroom_is_the_least_of_every_level_wherever_it_is(tmp_path: Path) -> None:
    root, own = tmp_path / "cgroup", tmp_path / "self-cgroup"
    root.mkdir()
    (root / "cgroup.controllers").write_text("memory\n")
    own.write_text("0::/system.slice/x.service\n")
    cgroup_level(root / "system.slice" / "x.service", str(1000 * MIB), 900 * MIB, 0)  # the unit's own limit is tighter
    cgroup_level(root / "system.slice", str(4000 * MIB), 1000 * MIB, 0)
    assert procfs.cgroup_headroom_mib(str(own), str(root)) == 100


def headroom_within(seconds: float, own: Path, root: Path) -> int | None:
    """``cgroup_headroom_mib``, failing the test if it does not return in time (a walk up that never meets
    the root)."""
    found: list[int | None] = []
    worker = threading.Thread(target=lambda: found.append(procfs.cgroup_headroom_mib(str(own), str(root))), daemon=True)
    worker.start()
    worker.join(seconds)
    assert found, "cgroup_headroom_mib did not return"
    return found[0]


def test_a_cgroup_path_climbing_out_of_the_mount_reads_nothing_outside_it(tmp_path: Path) -> None:
    """/proc/self/cgroup names paths relative to the cgroup namespace; one that climbs out of the mount (``..``)
    never makes files elsewhere count."""
    root, own = tmp_path / "mnt" / "cgroup", tmp_path / "self-cgroup"
    root.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("memory\n")
    cgroup_level(tmp_path / "outside", str(100 * MIB), 0, 0)  # a limit a climbing path would find
    own.write_text("0::/../../outside\n")
    assert headroom_within(5, own, root) is None  # not visible here: unknown
    cgroup_level(tmp_path / "mnt" / "cgroup2", str(100 * MIB), 0, 0)  # beside the mount, its name starting alike
    own.write_text("0::/../cgroup2\n")
    assert headroom_within(5, own, root) is None
    cgroup_v1_level(tmp_path / "mnt" / "outside", 100 * MIB, 0, 100 * MIB, 0)
    cgroup_v1_level(root / "memory", 1024 * MIB, 700 * MIB, 1024 * MIB, 0)
    (root / "cgroup.controllers").unlink()
    own.write_text("5:memory:/../../outside\n")
    assert headroom_within(5, own, root) == 324  # the mount's own: as in a container without a namespace
    cgroup_v1_level(root / "memory2", 100 * MIB, 0, 100 * MIB, 0)  # beside the mount, its name starting alike
    own.write_text("5:memory:/../memory2\n")
    assert headroom_within(5, own, root) == 324


def test_a_v1_cgroup_without_its_totals_counts_its_own_reclaimable_cache(tmp_path: Path) -> None:
    """``total_inactive_file`` (the cgroup and those below it) is missing from some kernels' ``memory.stat``:
    the cgroup's own ``inactive_file`` is room all the same."""
    root, own = tmp_path / "cgroup", tmp_path / "self-cgroup"
    unit = root / "memory" / "x.service"
    cgroup_v1_level(unit, 1024 * MIB, 1000 * MIB, 1024 * MIB, 0)
    (unit / "memory.stat").write_text(f"hierarchical_memory_limit {1024 * MIB}\ninactive_file {50 * MIB}\n")
    own.write_text("5:memory:/x.service\n")
    assert procfs.cgroup_headroom_mib(str(own), str(root)) == 74
