"""The code base's layering, as issue 15 asks and DESIGN draws it: what may import what."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def imported_packages(folder: str) -> dict[str, set[str]]:
    """Each Python file under ``folder`` and the top-level packages it imports."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / folder).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(ROOT))] = names
    return found


@pytest.mark.parametrize(
    ("folder", "never"),
    [
        ("scripts", {"tests"}),  # the benches use fakes/, not the tests
        ("fakes", {"tests", "adapters", "scripts"}),  # honest fakes of the ports, on the core alone
        ("community_api", {"tests", "adapters", "scripts", "fakes", "falcon", "selenium", "sqlite_utils"}),
        ("adapters", {"tests", "fakes"}),  # the service never wires a fake
    ],
)
def test_a_layer_imports_nothing_it_must_not(folder: str, never: set[str]) -> None:
    offending = {path: sorted(names & never) for path, names in imported_packages(folder).items() if names & never}
    assert offending == {}
