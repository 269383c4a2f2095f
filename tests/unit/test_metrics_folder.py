"""An operator's ``PROMETHEUS_MULTIPROC_DIR``: only prometheus_client's own files are emptied at start; a
folder that holds other ``.db`` files is refused by ``serve`` (before, every ``*.db`` in it was deleted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.metrics_folder import foreign_files_problem, stale_metrics_files

LIBRARY = ["counter_12.db", "histogram_7.db", "summary_3.db", "gauge_livesum_41.db", "gauge_all_5.db"]
OTHERS = ["community.db", "counter.db", "counter_12a.db", "photos_1.DB", "gauge_12.db"]


def test_the_librarys_files_are_told_from_others(tmp_path: Path) -> None:
    for name in [*LIBRARY, *OTHERS, "db.sqlite3"]:
        (tmp_path / name).write_text("x")
    assert sorted(path.name for path in stale_metrics_files(tmp_path)) == sorted(LIBRARY)
    problem = foreign_files_problem(tmp_path)
    assert problem == (
        f"PROMETHEUS_MULTIPROC_DIR={tmp_path} holds files that are not prometheus_client's (community.db,"
        " counter.db, counter_12a.db, gauge_12.db): give the metrics a folder of their own, or leave the"
        " variable unset (serve makes one)"
    )


@pytest.mark.parametrize("names", [[], LIBRARY, ["db.sqlite3", "notes.txt"]])
def test_a_folder_of_the_librarys_files_or_none_can_hold_the_metrics(tmp_path: Path, names: list[str]) -> None:
    for name in names:
        (tmp_path / name).write_text("x")
    assert foreign_files_problem(tmp_path) is None
