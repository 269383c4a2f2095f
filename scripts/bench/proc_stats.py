"""What a process spends, read from ``/proc``: memory (PSS, USS) and CPU time, for the benches."""

from __future__ import annotations

import os
import re
from pathlib import Path

from adapters.platform.procfs import descendants, process_table


def memory_kib(pid: int) -> tuple[int, int]:
    """(PSS, USS) of a process in KiB: its share of the pages it maps, and the pages only it maps."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0, 0
    fields = {name: int(kib) for name, kib in re.findall(r"^(\w+):\s+(\d+) kB", text, re.M)}
    return fields.get("Pss", 0), fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)


def rss_kib(pid: int) -> int:
    """A process's resident memory in KiB (``VmRSS``), 0 once it has ended."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    found = re.search(r"^VmRSS:\s+(\d+) kB", text, re.M)
    return int(found.group(1)) if found else 0


def browsers_memory(master: int) -> list[tuple[int, int, int, int]]:
    """For each chromedriver under the gunicorn master: (Chromium processes, their PSS and USS in KiB,
    the chromedriver's own PSS in KiB)."""
    table = process_table()
    drivers = [pid for pid in descendants(master, table) if table[pid][1] == "chromedriver"]
    out = []
    for driver in drivers:
        chromium = [memory_kib(pid) for pid in descendants(driver, table)]
        out.append((len(chromium), sum(p for p, _ in chromium), sum(u for _, u in chromium), memory_kib(driver)[0]))
    return out


TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU of the processes (all their threads), from /proc/PID/stat."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text(errors="replace").rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        total += int(fields[11]) + int(fields[12])
    return total / TICK
