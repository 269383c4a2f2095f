"""What Linux's /proc says of a process: its state, parent, start time, command name and line. Used to end
local browsers by PID (``browser.py``), to find the ones a dead worker left behind (``orphans.py``) and
the partial backups of a killed run (``backup_folder.py``).
And of the machine, the memory a new process may still take (``memory_available_mib``, and within this
process's cgroup, v2 or v1, ``cgroup_headroom_mib``: the browser pool starts no browser there is no room
for)."""

from __future__ import annotations

import os


def _stat_text(pid: int | str) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as found:
            return found.read()
    except OSError:
        return None


def _name_and_fields(text: str | None) -> tuple[str, list[str]] | None:
    """The command name of a /proc/PID/stat text and the fields after it (the name may hold spaces and
    parentheses: it ends at the last ``)``)."""
    if text is None or ")" not in text:
        return None
    head, tail = text.rsplit(")", 1)
    return head[head.find("(") + 1 :], tail.split()


def stat(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first, then the parent's PID...), or
    None when the process is gone."""
    found = _name_and_fields(_stat_text(pid))
    return None if found is None else found[1]


def command_name(pid: int | str) -> str | None:
    """The command name (``comm``, at most 15 characters: ``chromedriver``, ``chromium``), or None."""
    found = _name_and_fields(_stat_text(pid))
    return None if found is None else found[0]


def arguments(pid: int | str) -> list[str]:
    """The process's command line, [] when it is gone (or a zombie)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as found:
            raw = found.read()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def running(pid: int) -> bool:
    """Alive and not a zombie waiting for its parent."""
    fields = stat(pid)
    return fields is not None and bool(fields) and fields[0] != "Z"


def start_time(pid: int) -> str | None:
    """When the process started (field 22 of /proc/PID/stat): with the PID, it names one process, not
    whichever later reuses its number."""
    fields = stat(pid)
    return fields[19] if fields and len(fields) > 19 else None


def process_table() -> dict[int, tuple[int, str]]:
    """PID -> (parent's PID, command name) of every process, from one pass over /proc."""
    found: dict[int, tuple[int, str]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit() or (parsed := _name_and_fields(_stat_text(entry))) is None:
            continue
        name, fields = parsed
        if len(fields) > 1 and fields[1].isdigit():
            found[int(entry)] = (int(fields[1]), name)
    return found


def _children_by_parent(table: dict[int, tuple[int, str]]) -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        found.setdefault(parent, []).append(pid)
    return found


def children(parent: int) -> list[int]:
    """PIDs whose parent is ``parent``."""
    return sorted(_children_by_parent(process_table()).get(parent, []))


def descendants(root: int, table: dict[int, tuple[int, str]] | None = None) -> list[int]:
    """Every process below ``root`` (children first, then theirs), in ``table`` (a snapshot from
    ``process_table``, so that names read from it match) or in a fresh one."""
    by_parent = _children_by_parent(process_table() if table is None else table)
    found: list[int] = []
    queue = list(by_parent.get(root, []))
    while queue:
        pid = queue.pop(0)
        found.append(pid)
        queue.extend(by_parent.get(pid, []))
    return found


def memory_available_mib(meminfo: str = "/proc/meminfo") -> int | None:
    """The kernel's estimate of the memory new processes may take without swapping (``MemAvailable``),
    in MiB; None where it cannot be read (not Linux, a kernel before 3.14)."""
    try:
        with open(meminfo, encoding="ascii") as lines:
            for line in lines:
                name, _, value = line.partition(":")
                if name == "MemAvailable":
                    number, _, unit = value.strip().partition(" ")
                    return int(number) // 1024 if unit == "kB" and number.isdigit() else None
    except OSError:
        return None
    return None


def cgroup_headroom_mib(own: str = "/proc/self/cgroup", root: str = "/sys/fs/cgroup") -> int | None:
    """How much more memory this process's cgroup may take before its limit, counting the page cache the
    kernel would reclaim first, in MiB; None where no limit applies or none can be read.

    cgroup v2 (``root`` is its mount): the least over the process's cgroup and each one above it with a
    ``memory.max`` (systemd's ``MemoryMax=``, a container's limit). cgroup v1, or a hybrid host's v1 memory
    controller (mounted at ``root/memory``): the process's memory cgroup, whose ``memory.stat`` gives the
    least limit over it and its ancestors (``hierarchical_memory_limit``; systemd's ``MemoryLimit=``, a
    container's limit on an older Docker host)."""
    try:
        with open(own, encoding="utf-8") as text:
            lines = text.read().splitlines()
    except OSError:
        return None
    v2 = next((line[3:].strip() for line in lines if line.startswith("0::")), None)
    if v2 is not None and os.path.exists(os.path.join(root, "cgroup.controllers")):
        return _v2_headroom_mib(root, v2)
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if "memory" in controllers.split(","):
            return _v1_headroom_mib(os.path.join(root, "memory"), path.strip())
    return None


def _within(path: str, top: str) -> bool:
    """Is the normalised ``path`` ``top`` or below it (a string prefix is not enough: ``cgroup2``)?"""
    return os.path.commonpath([path, top]) == top


def _v2_headroom_mib(root: str, path: str) -> int | None:
    top = os.path.normpath(root)
    level = os.path.normpath(os.path.join(top, path.lstrip("/")))
    if not _within(level, top):
        # A cgroup outside the part of the tree this process sees (``/../…`` in a cgroup namespace,
        # cgroup_namespaces(7)): its levels cannot be read, and what lies outside the mount is not them.
        return None
    least: int | None = None
    while True:
        headroom = _headroom(level)
        if headroom is not None:
            least = headroom if least is None else min(least, headroom)
        if level == top:
            return None if least is None else least // (1024 * 1024)
        level = os.path.dirname(level)


def _headroom(level: str) -> int | None:
    """Bytes the cgroup (v2) at ``level`` may still take, or None (no limit, or nothing readable there)."""
    try:
        with open(os.path.join(level, "memory.max"), encoding="ascii") as text:
            limit = text.read().strip()
        with open(os.path.join(level, "memory.current"), encoding="ascii") as text:
            current = int(text.read().strip())
        stat = _stat_file(os.path.join(level, "memory.stat"))
    except (OSError, ValueError):
        return None
    if not limit.isdigit():  # "max": no limit at this level
        return None
    return max(0, int(limit) - current + stat.get("inactive_file", 0))


# cgroup v1 writes "no limit" as the largest multiple of the page size below 2^63; any limit this large is none.
_V1_NO_LIMIT = 1 << 60


def _v1_headroom_mib(mount: str, path: str) -> int | None:
    """The v1 memory cgroup at ``path`` under ``mount``; in a container without its own cgroup namespace the
    path is the host's, and the container's cgroup is the mount itself."""
    for level in (os.path.normpath(os.path.join(mount, path.lstrip("/"))), mount):
        if not _within(level, os.path.normpath(mount)):
            continue
        try:
            with open(os.path.join(level, "memory.limit_in_bytes"), encoding="ascii") as text:
                limits = [int(text.read().strip())]
            with open(os.path.join(level, "memory.usage_in_bytes"), encoding="ascii") as text:
                usage = int(text.read().strip())
            stat = _stat_file(os.path.join(level, "memory.stat"))
        except FileNotFoundError:
            continue
        except (OSError, ValueError):
            return None
        limits += [stat["hierarchical_memory_limit"]] if "hierarchical_memory_limit" in stat else []
        limit = min(limits)
        if limit >= _V1_NO_LIMIT:
            return None
        reclaimable = stat.get("total_inactive_file", stat.get("inactive_file", 0))
        return max(0, limit - usage + reclaimable) // (1024 * 1024)
    return None


def _stat_file(path: str) -> dict[str, int]:
    """A cgroup's ``memory.stat``: name and number a line (``ValueError`` if a number is not one)."""
    with open(path, encoding="ascii") as text:
        return {
            name: int(value) for name, _, value in (line.partition(" ") for line in text.read().splitlines()) if value
        }
