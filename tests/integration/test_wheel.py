"""The service as a built package (a wheel, `pip install .` without `-e`) holds everything it runs with.

Every other test imports the code from the checkout (`make install` installs it editable), so a template,
a stylesheet or a module that the package leaves out would pass the whole suite and fail only where
someone installed the service as a package: the dashboard's pages are files read at run time, listed in
`pyproject.toml`'s package data by pattern. This builds the wheel as pip would, from the files git tracks,
and serves the dashboard from it.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from scripts.processes import ROOT, free_port, serving

PACKAGES = ("community_api", "adapters", "scripts", "fakes")
# Read only from a checkout, by `make bench` (wrk's script): not part of what the service runs with.
CHECKOUT_ONLY = {"scripts/bench/keys.lua"}
SECRET = "wheel-test-secret-" + "s" * 40


@functools.cache  # both tests ask
def tracked_files() -> list[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.fail("this test builds the wheel from the files git tracks: run it in a git checkout")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=30)
    return [name for name in listed.stdout.decode().split("\0") if name]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[zipfile.ZipFile, Path]]:
    """The wheel pip builds from a copy of the tracked files (built there, so the checkout gets no `build/`),
    with the setuptools of build-constraints.txt, and the folder it is unpacked in."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "source"
    for name in tracked_files():
        if (ROOT / name).is_file():  # a file deleted but not yet committed is still listed
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    out = base / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "--disable-pip-version-check"]
        + ["--build-constraint", str(source / "build-constraints.txt"), "-w", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    [path] = out.glob("community_data_api-*.whl")
    site = base / "site"
    with zipfile.ZipFile(path) as archive:
        archive.extractall(site)
        yield archive, site


def test_the_wheel_holds_every_file_of_the_packages(wheel: tuple[zipfile.ZipFile, Path]) -> None:
    archive, _ = wheel
    held = set(archive.namelist())
    wanted = {name for name in tracked_files() if name.split("/")[0] in PACKAGES} - CHECKOUT_ONLY
    assert any(name.startswith("adapters/web/templates/") for name in wanted)
    assert sorted(wanted - held) == []
    [entry_points] = [name for name in held if name.endswith(".dist-info/entry_points.txt")]
    assert "community-api = adapters.cli:main" in archive.read(entry_points).decode()


def test_the_service_runs_from_the_wheel_alone(wheel: tuple[zipfile.ZipFile, Path], tmp_path: Path) -> None:
    _, site = wheel
    # The wheel's code first on the path, and a working folder outside the checkout: nothing is read from it.
    # (``serving`` adds these to the test's own environment, as every service the tests start gets.)
    env = {
        "PYTHONPATH": str(site),
        "COMMUNITY_API_DB": str(tmp_path / "db.sqlite3"),
        "COMMUNITY_API_SECRET": SECRET,
        "COMMUNITY_API_PLATFORM_URL": "http://127.0.0.1:9",  # nothing there: nothing is linked
    }
    where = subprocess.run(
        [sys.executable, "-c", "import adapters, community_api; print(adapters.__file__, community_api.__file__)"],
        cwd=tmp_path,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert where.returncode == 0, where.stderr
    assert all(Path(name).is_relative_to(site) for name in where.stdout.split()), where.stdout

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with serving(
        ["-m", "adapters.cli", "serve", "--bind", f"127.0.0.1:{port}", "--workers", "1"],
        url + "/v1/openapi.json",
        env=env,
        cwd=tmp_path,
        log_path=tmp_path / "service.log",
    ):
        login = requests.get(url + "/login", timeout=10)
        assert login.status_code == 200 and 'action="/login"' in login.text, (tmp_path / "service.log").read_text()
        sheet = requests.get(url + "/static/dashboard.css", timeout=10)
        assert sheet.status_code == 200 and sheet.headers["content-type"].startswith("text/css")
        assert sheet.content == (ROOT / "adapters/web/static/dashboard.css").read_bytes()
        assert requests.get(url + "/v1/openapi.json", timeout=10).json()["openapi"].startswith("3.")
