"""Changing the service secret as docs/deployment.md says, against gunicorn with two workers and the real
SQLite store: the new secret in ``COMMUNITY_API_SECRET`` and the old one in ``PREVIOUS_SECRET``, then
``community-api reseal`` while the service serves, then the old secret dropped. Keys keep working and the
linked platform account keeps answering throughout; no connection is linked again.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import requests

from scripts.processes import free_port, gunicorn_args, serving
from tests.e2e.test_backup import SECRET, Owner, cli, service_env

pytestmark = pytest.mark.slow
NEW_SECRET = "the-secret-after-the-change-" + "n" * 40


def groups(url: str, key: str) -> requests.Response:
    return requests.get(url + "/v1/groups", headers={"Authorization": f"Bearer {key}"}, timeout=10)


def statuses(owner: Owner, url: str) -> list[str]:
    """The owner's connections as the dashboard's JSON lists them (the web session outlives the restarts)."""
    listed = owner.session.get(url + "/v1/connections", timeout=10)
    assert listed.status_code == 200, listed.text
    return [connection["status"] for connection in listed.json()["connections"]]


def test_the_secret_changes_without_linking_any_connection_again(tmp_path: Path) -> None:
    db = tmp_path / "service.sqlite3"
    app = "tests.e2e.app_factory:get_app()"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with serving(gunicorn_args(app, port, workers=2), url + "/healthz", service_env(db), tmp_path / "1.log"):
        owner = Owner(url)
        owner.post("/v1/connections", {"email": "alice@sandbox.test", "password": "sandbox"})
        key = owner.post("/v1/keys", {"name": "script", "scopes": ["groups:read"]})["secret"]
        assert groups(url, key).status_code == 200

    # Without the old secret, the stored session does not open: the connection would need linking again.
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    new_only = service_env(db, NEW_SECRET)
    with serving(gunicorn_args(app, port, workers=2), url + "/healthz", new_only, tmp_path / "2.log"):
        refused = groups(url, key)
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "connection_expired"
        assert statuses(owner, url) == ["expired"]  # as the dashboard shows it: link it again

    changing = {**new_only, "COMMUNITY_API_PREVIOUS_SECRET": SECRET}
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with serving(gunicorn_args(app, port, workers=2), url + "/healthz", changing, tmp_path / "3.log"):
        assert groups(url, key).status_code == 200  # opened under the previous secret, by either worker
        assert statuses(owner, url) == ["active"]  # read, never written: nothing to mend
        resealed = cli("reseal", env=changing)  # while the service serves
        assert resealed.returncode == 0, resealed.stderr
        assert resealed.stdout.startswith("1 platform session sealed anew under COMMUNITY_API_SECRET, 0 already")
        assert [groups(url, key).status_code for _ in range(4)] == [200] * 4

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with serving(gunicorn_args(app, port, workers=2), url + "/healthz", new_only, tmp_path / "4.log"):
        assert groups(url, key).status_code == 200  # the old secret gone, nothing linked again
