"""Every request a key makes is counted in the database, whichever worker served it: within about a second
while the service runs, and all of them once it stops. Before, a worker's last counts waited for its next
request (so ``GET /v1/me``, served by the other worker, showed fewer) and were lost when it stopped."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
import requests

from adapters.store.sqlite_key_store import SqliteKeyStore
from scripts.processes import ROOT, free_port, serving

pytestmark = [pytest.mark.slow]
SECRET = "usage-test-secret-" + "u" * 40


def cli(*args: str, env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("COMMUNITY_API_")} | env
    return subprocess.run(
        [sys.executable, "-m", "adapters.cli", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=60,
        check=True,
    )


def counted(db: Path, key_id: str) -> int:
    store = SqliteKeyStore(str(db), SECRET)
    try:
        return store.key_usage(key_id, datetime.now(UTC).date().isoformat()).requests_total
    finally:
        store.close()


def test_requests_spread_over_workers_are_all_counted_while_serving_and_after_a_stop(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite3"
    env = {
        "COMMUNITY_API_DB": str(db),
        "COMMUNITY_API_SECRET": SECRET,
        "COMMUNITY_API_PLATFORM_URL": "http://127.0.0.1:9",
    }
    cli("accounts", "create", "ops@example.com", stdin="a strong password\n", env=env)
    minted = cli("keys", "mint", "--email", "ops@example.com", env=env)
    secret, key_id = minted.stdout.strip(), minted.stderr.split()[1]
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    args = ["-m", "adapters.cli", "serve", "--bind", f"127.0.0.1:{port}", "--workers", "2"]
    with serving([*args, "--worker-class", "sync"], url + "/healthz", env=env) as service:
        time.sleep(1.5)  # the workers' first write is due: what follows is buffered, as under load
        for _ in range(20):
            # No platform account is linked: 409, but the key was checked, so the request counts.
            assert requests.get(url + "/v1/whoami", headers={"Authorization": f"Bearer {secret}"}).status_code == 409
        deadline = time.monotonic() + 5
        while counted(db, key_id) < 20 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert counted(db, key_id) == 20  # no request came after them: each worker wrote its own
        for _ in range(6):
            requests.get(url + "/v1/whoami", headers={"Authorization": f"Bearer {secret}"})
        service.terminate()  # stopped at once, before the interval: the workers write what they hold
        service.wait(30)
    assert counted(db, key_id) == 26
