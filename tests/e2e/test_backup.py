"""``community-api backup PATH`` while gunicorn serves and writes, then a restore into a fresh service.

The service runs ``tests.e2e.app_factory`` (the real SQLite store, the in-memory platform whose sessions
are signed with a key of its own). Writers mint keys and spend usage while three backups are taken; each
copy is checked, and the last one is restored as docs/deployment.md says: into a new folder, with the
same secret, where a key minted before the backup still works and the sealed platform session opens.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import threading
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import requests

from adapters.store.sqlite_key_store import SqliteKeyStore
from community_api.model import Account
from scripts.processes import ROOT, free_port, gunicorn_args, serving
from tests.small_filesystem import UNSHARE, require_namespaces

pytestmark = pytest.mark.slow
SECRET = "backup-test-secret-" + "b" * 40
PASSWORD = "a long enough password"


def service_env(db: Path, secret: str = SECRET) -> dict[str, str]:
    return {
        "COMMUNITY_API_MODE": "test",
        "COMMUNITY_API_DB": str(db),
        "COMMUNITY_API_SECRET": secret,
        "COMMUNITY_API_USAGE_FLUSH_SECONDS": "0",  # every request writes its usage at once
        "COMMUNITY_API_PLATFORM_READS_PER_MINUTE": "60000",
        "COMMUNITY_API_PLATFORM_WRITES_PER_MINUTE": "20000",  # and the write pace
    }


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("COMMUNITY_API_")}
    return subprocess.run(
        [sys.executable, "-m", "adapters.cli", *args],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


class Owner:
    def __init__(self, url: str) -> None:
        self.url = url
        self.session = requests.Session()
        self.session.trust_env = False
        assert (
            self.session.post(
                url + "/v1/accounts", json={"email": "ops@example.com", "password": PASSWORD}, timeout=10
            ).status_code
            == 201
        )
        signed = self.session.post(
            url + "/v1/session", json={"email": "ops@example.com", "password": PASSWORD}, timeout=10
        )
        self.csrf = signed.json()["csrfToken"]

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = self.session.post(self.url + path, json=body, headers={"X-CSRF-Token": self.csrf}, timeout=10)
        assert answer.status_code == 201, answer.text
        return dict(answer.json())

    def delete(self, path: str) -> None:
        answer = self.session.delete(self.url + path, headers={"X-CSRF-Token": self.csrf}, timeout=10)
        assert answer.status_code == 204, answer.text


def whoami(url: str, key: str) -> requests.Response:
    return requests.get(url + "/v1/whoami", headers={"Authorization": f"Bearer {key}"}, timeout=10)


def test_backup_under_write_load_then_restore_into_a_fresh_service(tmp_path: Path) -> None:
    live, restored_folder = tmp_path / "live", tmp_path / "restored"
    live.mkdir()
    restored_folder.mkdir()
    db = live / "service.sqlite3"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    args = gunicorn_args("tests.e2e.app_factory:get_app()", port, workers=2, worker_class="gthread")
    with serving(args, url + "/healthz", env=service_env(db), log_path=live / "gunicorn.log"):
        owner = Owner(url)
        alice = owner.post("/v1/connections", {"email": "alice@sandbox.test", "password": "sandbox"})
        before = owner.post("/v1/keys", {"name": "minted before the backup", "scopes": ["groups:read"]})
        assert whoami(url, before["secret"]).json()["handle"] == "alice"

        stop, failures, minted = threading.Event(), [], []

        def write_load() -> None:
            while not stop.is_set():
                try:
                    key_id = owner.post("/v1/keys", {"name": "load"})["id"]
                    minted.append(key_id)
                    assert whoami(url, before["secret"]).status_code == 200  # usage counted: a write
                    owner.delete(f"/v1/keys/{key_id}")  # revoked, kept: an account holds 100 live keys at most
                except Exception as error:  # noqa: BLE001 - reported after the join
                    failures.append(repr(error))

        writers = [threading.Thread(target=write_load) for _ in range(3)]
        for writer in writers:
            writer.start()
        copies = []
        try:
            for number in range(3):
                while len(minted) < 20 * (number + 1):  # writes land before, during and after each copy
                    threading.Event().wait(0.02)
                target = tmp_path / f"backup-{number}.sqlite3"
                made = cli("backup", str(target), env=service_env(db))
                assert made.returncode == 0, made.stderr
                assert "backed up" in made.stdout and "COMMUNITY_API_SECRET" in made.stdout
                copies.append((target, len(minted)))
        finally:
            stop.set()
            for writer in writers:
                writer.join()
        assert failures == []
        total = len(minted)

    for target, minted_when_done in copies:
        assert stat.S_IMODE(target.stat().st_mode) == 0o600
        assert not Path(f"{target}-wal").exists()
        with sqlite3.connect(target) as copy:
            assert copy.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            assert copy.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
            keys = copy.execute("SELECT count(*) FROM keys").fetchone()[0]
            # One consistent state: the key minted first, then however many load keys were committed.
            assert 1 + 20 <= keys <= 1 + minted_when_done + 3
            usage = copy.execute("SELECT coalesce(sum(count), 0) FROM usage").fetchone()[0]
            assert usage > 0
    first_keys = sqlite3.connect(copies[0][0]).execute("SELECT count(*) FROM keys").fetchone()[0]
    last_keys = sqlite3.connect(copies[-1][0]).execute("SELECT count(*) FROM keys").fetchone()[0]
    assert first_keys < last_keys < 1 + total + 1

    # The restore of docs/deployment.md: the copy becomes the new service's database, same secret.
    restored = restored_folder / "service.sqlite3"
    shutil.copy2(copies[-1][0], restored)
    with closing(SqliteKeyStore(restored, SECRET)) as store:
        assert store.get_platform_session(alice["id"]) is not None
    with closing(SqliteKeyStore(restored, "another-secret-" + "x" * 40)) as store:
        assert store.get_platform_session(alice["id"]) is None  # the secret is part of the backup
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    args = gunicorn_args("tests.e2e.app_factory:get_app()", port, workers=2)
    with serving(args, url + "/healthz", env=service_env(restored), log_path=restored_folder / "gunicorn.log"):
        answer = whoami(url, before["secret"])
        assert answer.status_code == 200 and answer.json()["handle"] == "alice"
        assert requests.get(url + "/readyz", timeout=10).status_code == 200


@pytest.mark.parametrize("case", ["no database", "target exists", "no folder", "not ours", "same file"])
def test_backup_refusals_are_one_line(tmp_path: Path, case: str) -> None:
    db = tmp_path / "service.sqlite3"
    if case != "no database":
        made = cli("keys", "mint", "--email", "nobody@example.com", env=service_env(db))  # creates the schema
        assert made.returncode == 2
    target = {
        "target exists": db,
        "no folder": tmp_path / "missing" / "copy.sqlite3",
        "same file": tmp_path / "." / "service.sqlite3",
    }.get(case, tmp_path / "copy.sqlite3")
    if case == "target exists":
        target = tmp_path / "copy.sqlite3"
        target.write_text("an earlier backup")
    if case == "not ours":
        db = tmp_path / "other.sqlite3"
        sqlite3.connect(db).execute("CREATE TABLE t (x)").connection.commit()
    result = cli("backup", str(target), env=service_env(db))
    assert result.returncode == 2, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr
    if case == "target exists":
        assert target.read_text() == "an earlier backup"
    assert not list(tmp_path.glob(".*partial*"))


def test_a_backup_onto_a_full_disk_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    """The folder of the backups on a file system too small for the copy (a 64 KiB tmpfs, in a mount
    namespace of its own): before, a traceback and exit status 1."""
    require_namespaces()
    db = tmp_path / "service.sqlite3"
    with closing(SqliteKeyStore.open(db, SECRET)) as store:
        store.add_account(Account(id="acc_big", email="big@example.com", created_at=datetime.now(UTC)), "x" * 200_000)
    small = tmp_path / "backups"
    small.mkdir()
    script = (
        f'mount -t tmpfs -o size=64k none "{small}" && "$0" -m adapters.cli backup "{small}/copy.sqlite3"; '
        f'status=$?; ls -A "{small}"; exit $status'
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("COMMUNITY_API_")}
    result = subprocess.run(
        [*UNSHARE, "sh", "-c", script, sys.executable],
        cwd=ROOT,
        env={**clean, **service_env(db)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"community-api: the backup failed (the disk is full); nothing was left at {small}/copy.sqlite3"
    ]
    assert result.stdout.strip() == ""  # `ls -A` of the small file system: no copy, no partial file
