"""A DM whose worker gunicorn stops mid-send is never sent twice under its Idempotency-Key.

gunicorn restarts a sync worker that is silent past ``--timeout`` with SIGABRT, whose handler raises
``SystemExit`` in the request: here while the stand-in platform, slowed down, is still taking the DM
that Chromium posted. The platform then keeps the message. The client, answered 500, retries with the
same key: before, the worker's exit had released the claim, so the retry acted again (here our own DM
pace refused it with 429; a client that retries after the pace's gap sent the DM a second time).

The worker, killed a second after the abort while it closed its browser, left that browser's profile
(the platform session in its cookies) in the temporary folder: the master now removes it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from adapters.platform.orphans import PROFILE_PREFIX
from scripts.processes import free_port, gunicorn_args, serving
from tests.sandbox_support import SandboxProcess, running_sandbox
from tests.short_temp import short_temp_folder

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SECRET = "interrupted-send-secret-" + "i" * 40
PASSWORD = "a long enough password"
WORKER_TIMEOUT = 10  # gunicorn's --timeout: the send below outlasts it
SEND_LATENCY_MS = 16_000  # the platform's delay on the DM (shorter than the gateway's own 20 s time-out)


@pytest.fixture
def temp() -> Iterator[Path]:
    """The service's ``TMPDIR``: its browser profiles, apart from other tests'."""
    with short_temp_folder() as folder:
        yield folder


def messages(sandbox: SandboxProcess) -> int:
    return int(sandbox.control("state")["counts"]["sent"])


def test_a_dm_whose_worker_is_stopped_mid_send_is_not_sent_again(tmp_path: Path, temp: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with running_sandbox() as sandbox:
        env = {
            "COMMUNITY_API_MODE": "test",
            "COMMUNITY_API_DB": str(tmp_path / "service.sqlite3"),
            "COMMUNITY_API_SECRET": SECRET,
            "COMMUNITY_API_PLATFORM_URL": sandbox.url,
            "COMMUNITY_API_PLATFORM_API_URL": sandbox.api_url,
            "COMMUNITY_API_BROWSER_TRUSTED_SPKI": ",".join(sandbox.trusted_spki),
            "COMMUNITY_API_BROWSER_POOL_SIZE": "1",
            "TMPDIR": str(temp),  # the service's browser profiles, apart from other tests' (run at the same time)
        }
        args = gunicorn_args("adapters.wiring:get_app()", port, workers=1, worker_class="sync")
        args[args.index("--timeout") + 1] = str(WORKER_TIMEOUT)
        with serving(args, url + "/v1/openapi.json", env=env, log_path=tmp_path / "service.log"):
            owner = requests.Session()
            assert owner.post(url + "/v1/accounts", json={"email": "o@example.com", "password": PASSWORD}).ok
            csrf = owner.post(url + "/v1/session", json={"email": "o@example.com", "password": PASSWORD}).json()
            headers = {"X-CSRF-Token": csrf["csrfToken"]}
            linked = owner.post(
                url + "/v1/connections",
                json={"email": "alice@sandbox.test", "password": "sandbox"},
                headers=headers,
                timeout=60,
            )
            assert linked.status_code == 201, linked.text
            key = owner.post(
                url + "/v1/keys", json={"name": "agent", "scopes": ["dms:write", "dms:read"]}, headers=headers
            ).json()["secret"]
            inbox = requests.get(url + "/v1/dms", headers={"Authorization": f"Bearer {key}"}, timeout=60)
            assert inbox.status_code == 200, inbox.text
            assert list(temp.glob(PROFILE_PREFIX + "*")), "the worker's browser keeps its profile in TMPDIR"
            before = messages(sandbox)
            sandbox.control("latency", {"route": "^/api2/channels/[^/]+/messages$", "ms": SEND_LATENCY_MS})

            def send() -> requests.Response:
                return requests.post(
                    url + "/v1/dms",
                    json={"to": sandbox.user_id("bob"), "content": "sent once, whatever happens"},
                    headers={"Authorization": f"Bearer {key}", "Idempotency-Key": "dm-once"},
                    timeout=60,
                )

            # The worker is stopped mid-send; gunicorn answers 500 for the request as the worker exits.
            assert send().status_code == 500
            deadline = time.monotonic() + 30
            while messages(sandbox) == before and time.monotonic() < deadline:
                time.sleep(0.5)
            assert messages(sandbox) == before + 1  # the platform took it all the same
            retry = send()
            assert retry.status_code == 500, retry.text
            assert retry.headers.get("Idempotent-Replayed") == "true"
            assert "look before sending it again under a new Idempotency-Key" in retry.json()["error"]["message"]
            assert messages(sandbox) == before + 1  # a second send would have been made within the retry
    assert list(temp.glob(PROFILE_PREFIX + "*")) == []  # the killed worker's profile did not stay behind
