"""The folder of ``prometheus_client``'s multiprocess files, when the operator names it
(``PROMETHEUS_MULTIPROC_DIR``): which of its files are the library's, so that only those are emptied at start.

``prometheus_client`` names each file ``{kind}_{pid}.db`` (``counter``, ``histogram``, ``summary``, or
``gauge_`` and its multiprocess mode) and, to answer ``/metrics``, reads every ``*.db`` file of the folder.
A folder that holds other ``.db`` files (the service's state folder, named by mistake) would have them
deleted by a cleaning that went by the suffix alone; ``serve`` refuses such a folder instead, naming them
(the library could not read them as metrics either).
"""

from __future__ import annotations

import re
from pathlib import Path

# values.py: '{}_{}.db'.format(file_prefix, pid), file_prefix being the kind, or 'gauge_' + the mode.
METRICS_FILE = re.compile(r"(counter|histogram|summary|gauge_[a-z]+)_\d+\.db")


def stale_metrics_files(folder: str | Path) -> list[Path]:
    """The library's files in ``folder``: an earlier run's counts, which would add to this run's."""
    return [path for path in Path(folder).glob("*.db") if METRICS_FILE.fullmatch(path.name)]


def foreign_files_problem(folder: str | Path) -> str | None:
    """Why ``folder`` cannot hold the metrics: ``.db`` files that are not the library's; None when it can."""
    foreign = sorted(path.name for path in Path(folder).glob("*.db") if not METRICS_FILE.fullmatch(path.name))
    if not foreign:
        return None
    shown = ", ".join(foreign[:5]) + (", …" if len(foreign) > 5 else "")
    return (
        f"PROMETHEUS_MULTIPROC_DIR={folder} holds files that are not prometheus_client's ({shown}): give the"
        " metrics a folder of their own, or leave the variable unset (serve makes one)"
    )
