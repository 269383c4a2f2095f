"""A temporary folder of a test's own, as short a path as ``/tmp``: a service or browser given it as ``TMPDIR``
puts its files where the test sees them (and no other test's), and Chromium's socket path still fits a Unix
socket address (``adapters/platform/browser.py``), which pytest's long ``tmp_path`` would not."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def short_temp_folder() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="t", dir="/tmp"))  # noqa: S108 - a path as short as the usual one
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
