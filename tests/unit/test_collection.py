"""`make test` runs the suite in two processes (pytest-xdist), and each collects it: the two must name the
same tests, or the run stops before any test ("Different tests were collected between gw0 and gw1"). A test
id made from something that changes between processes or seconds — a gzip header's time (a fresh-clone run
once stopped on one), a set's order under another hash seed, a random value — breaks it."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from scripts.processes import ROOT


def collected(hash_seed: str) -> list[str]:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only", "tests"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_two_processes_collect_the_same_tests() -> None:
    first = collected("1")
    time.sleep(1.1)  # a second later, as the second process may start
    second = collected("2")
    assert len(first) > 2000
    assert first == second
