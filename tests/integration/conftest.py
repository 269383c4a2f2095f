"""Shared fixtures of the integration tests: ``sandbox``, the stand-in platform for the whole test session
(``tests/sandbox_support.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.sandbox_support import SandboxProcess, running_sandbox


@pytest.fixture(scope="session")
def sandbox() -> Iterator[SandboxProcess]:
    """The stand-in platform, one process for the test session (see the module docstring)."""
    with running_sandbox() as running:
        yield running
