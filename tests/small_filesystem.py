"""A small file system for the tests that fill a disk: a tmpfs mounted in a mount namespace of the test's
own (``unshare``), inside a user namespace, so that no privilege is needed and nothing outside sees it."""

from __future__ import annotations

import subprocess

import pytest

# The command that runs what follows it in such namespaces; the tmpfs is mounted by the command run.
UNSHARE = ["unshare", "--map-root-user", "--mount", "--propagation", "private"]


def require_namespaces() -> None:
    """Skip the test where this system allows no such namespace (it cannot make a small file system)."""
    if subprocess.run([*UNSHARE[:3], "true"], capture_output=True).returncode != 0:
        pytest.skip("no user and mount namespace here (unshare): a small file system cannot be made")
