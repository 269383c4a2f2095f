"""`make install` puts on the box what the service needs, and nothing only the tests need: deployment.md has an
operator run it on the production box (`sudo make install`), where Debian's nginx and redis-server packages
would each start a daemon nobody asked for, and the virtualenv would hold the test tooling (the `dev` extra).
`make test-deps` (which `make test` runs) adds those."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from scripts.processes import ROOT

TEST_ONLY = ("redis-server", "nginx", "default-jre-headless", "systemd", "selenium-server", "'.[dev]'")


def planned(target: str) -> str:
    """What `make TARGET` would run from scratch (-B: as if nothing were made yet; -n: nothing is run)."""
    if shutil.which("make") is None:
        pytest.fail("make is missing: the README's commands need it")
    done = subprocess.run(["make", "-n", "-B", target], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_install_brings_only_what_the_service_needs() -> None:
    plan = planned("install")
    assert "chromium chromium-driver" in plan and "pip install" in plan
    assert [name for name in TEST_ONLY if name in plan] == []


def test_the_tests_bring_the_rest() -> None:
    plan = planned("test-deps")
    assert [name for name in TEST_ONLY if name not in plan] == []


def test_every_pip_install_takes_the_pinned_versions() -> None:
    # pip itself from build-constraints.txt; the project and its dependencies from constraints.txt, built by
    # the setuptools build-constraints.txt names (pip does not hold a build environment to `-c`).
    installs = [line.split() for line in planned("test-deps").splitlines() if "pip install" in line]
    assert len(installs) == 3
    for words in installs:
        if words[-2:] == ["-U", "pip"]:
            assert "-c build-constraints.txt" in " ".join(words)
        else:
            assert words[-2] == "-e"
            assert "-c constraints.txt --build-constraint build-constraints.txt" in " ".join(words)
