"""constraints.txt holds the exact versions the suite passes with, and `make install` installs them.

pyproject.toml states ranges (what the code supports); without exact pins a fresh machine installs
whatever the registry published since the suite last ran, and the service a user installs (or CI's
clean clone) is not the one that was tested. These tests keep the pins complete, within the ranges,
and in force in the virtualenv the suite runs in. build-constraints.txt does the same for the two tools that
install and build: pip, and the setuptools of the project's build environment.
"""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

from limits.storage import SCHEMES
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import adapters.throttle.mmap_limits_storage  # noqa: F401 - registers mmap://
import adapters.throttle.sqlite_limits_storage  # noqa: F401 - registers sqlite://

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "community-data-api"
# Installed by the virtualenv itself (`python -m venv`, `pip install -U pip`), not from the pins.
TOOLING = {"pip", "setuptools", "wheel"}


def pins(file: str = "constraints.txt") -> dict[str, str]:
    found: dict[str, str] = {}
    for number, raw in enumerate((ROOT / file).read_text().splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        requirement = Requirement(line)
        specifiers = list(requirement.specifier)
        assert len(specifiers) == 1 and specifiers[0].operator == "==", (
            f"{file} line {number} is not an exact pin: {raw}"
        )
        name = canonicalize_name(requirement.name)
        assert name not in found, f"{requirement.name} is pinned twice"
        found[name] = specifiers[0].version
    return found


def declared() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        lines.extend(extra)
    return [Requirement(line) for line in lines]


def installed() -> dict[str, str]:
    return {canonicalize_name(d.metadata["Name"]): d.version for d in importlib.metadata.distributions()}


def test_every_declared_dependency_is_pinned_within_its_range() -> None:
    pinned = pins()
    for requirement in declared():
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{requirement.name} is declared in pyproject.toml but not pinned: run `make lock`"
        assert requirement.specifier.contains(pinned[name], prereleases=True), (
            f"{requirement.name}=={pinned[name]} is outside pyproject.toml's {requirement.specifier}: run `make lock`"
        )


def test_the_project_and_the_virtualenvs_own_tools_are_not_pinned() -> None:
    assert not (set(pins()) & ({PROJECT} | TOOLING))


def test_what_runs_the_suite_is_exactly_what_is_pinned() -> None:
    # Fails after a hand-made `pip install -U …` in the virtualenv, or a new dependency in pyproject.toml
    # that `make lock` has not pinned yet: the suite would pass on versions a fresh install does not get.
    pinned = pins()
    present = installed()
    unpinned = sorted(name for name in set(present) - set(pinned) - {PROJECT} - TOOLING)
    assert not unpinned, (
        f"installed but not pinned in constraints.txt: {unpinned} (a new dependency of pyproject.toml: run `make lock`;"
        " a tool installed by hand: uninstall it, or use a virtualenv of its own)"
    )
    other = {name: (present[name], version) for name, version in pinned.items() if present.get(name) != version}
    assert not other, f"installed and pinned versions differ (run `make install`): {other}"


def test_the_tools_that_install_and_build_are_pinned_too() -> None:
    # `pip install -U pip` and a build environment's `setuptools>=77` took whatever the registry published
    # last: a new pip or setuptools could have changed a fresh install (or CI's clean clone) overnight.
    build_pins = pins("build-constraints.txt")
    assert set(build_pins) == {"pip", "setuptools"}
    build_system = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    [setuptools] = [
        Requirement(line) for line in build_system if canonicalize_name(Requirement(line).name) == "setuptools"
    ]
    assert setuptools.specifier.contains(build_pins["setuptools"]), (
        f"setuptools=={build_pins['setuptools']} is outside pyproject.toml's build-system {setuptools.specifier}"
    )
    assert importlib.metadata.version("pip") == build_pins["pip"], (
        "the virtualenv's pip is not the pinned one: run `make install`"
    )


def test_every_throttle_storage_the_readme_offers_works_with_the_services_own_dependencies() -> None:
    """A plain `pip install .` (the README's "Running it for real") once lacked redis-py, a development
    dependency then: `THROTTLE_STORAGE=redis://…` stopped every worker at start with "The minimum version of
    3.0 for 'redis' could not be found"."""
    readme = (ROOT / "README.md").read_text()
    [row] = [line for line in readme.splitlines() if line.startswith("| `THROTTLE_STORAGE` |")]
    schemes = set(re.findall(r"`([a-z]+)://", row))
    assert schemes == {"mmap", "sqlite", "redis"}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = {canonicalize_name(Requirement(line).name) for line in project["dependencies"]}
    for scheme in sorted(schemes):
        needs = {canonicalize_name(name) for name in getattr(SCHEMES[scheme], "DEPENDENCIES", [])}
        assert not needs or needs & runtime, f"{scheme}:// needs one of {sorted(needs)}, not a runtime dependency"
