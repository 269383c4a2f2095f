"""What Linux's /proc says of a process: its state, parent, start time, command name and line. Used to end
local browsers by PID (``browser.py``) and to find the ones a dead worker left behind (``orphans.py``)."""

from __future__ import annotations

import os


def _stat_text(pid: int | str) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as found:
            return found.read()
    except OSError:
        return None


def stat(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first, then the parent's PID...), or
    None when the process is gone."""
    text = _stat_text(pid)
    if text is None or ")" not in text:
        return None
    return text.rsplit(")", 1)[1].split()


def command_name(pid: int | str) -> str | None:
    """The command name (``comm``, at most 15 characters: ``chromedriver``, ``chromium``), or None."""
    text = _stat_text(pid)
    return None if text is None else text[text.find("(") + 1 : text.rfind(")")]


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


def _children_by_parent() -> dict[int, list[int]]:
    """Every process's children, from one pass over /proc."""
    found: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if entry.isdigit() and (fields := stat(entry)) is not None and len(fields) > 1 and fields[1].isdigit():
            found.setdefault(int(fields[1]), []).append(int(entry))
    return found


def children(parent: int) -> list[int]:
    """PIDs whose parent is ``parent``."""
    return sorted(_children_by_parent().get(parent, []))


def descendants(root: int) -> list[int]:
    """Every process below ``root`` (children first, then theirs)."""
    by_parent = _children_by_parent()
    found: list[int] = []
    queue = list(by_parent.get(root, []))
    while queue:
        pid = queue.pop(0)
        found.append(pid)
        queue.extend(by_parent.get(pid, []))
    return found
