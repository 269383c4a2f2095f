"""The platform pace across gunicorn workers: reads and writes of one platform account are counted in the
shared mapped file, so three workers together admit no more than the limit, and the refusal comes from
whichever worker takes the next call. (The exact windows and waits have contract tests on every storage.)"""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from scripts.processes import free_port, gunicorn_args, serving

pytestmark = pytest.mark.slow
PASSWORD = "a long enough password"
SECRET = "pace-secret-" + "x" * 40
READS, WRITES = 7, 5
GROUP = "builders-club"


@pytest.fixture(scope="module")
def paced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path]]:
    """A service of three workers with small paces; alice linked; a key with every scope; its log."""
    folder = tmp_path_factory.mktemp("pace")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        "COMMUNITY_API_MODE": "test",
        "COMMUNITY_API_PLATFORM_READS_PER_MINUTE": str(READS),
        "COMMUNITY_API_PLATFORM_WRITES_PER_MINUTE": str(WRITES),
        "COMMUNITY_API_DB": str(folder / "service.sqlite3"),
        "COMMUNITY_API_SECRET": SECRET,
        "PROMETHEUS_MULTIPROC_DIR": str(folder / "metrics"),
    }
    log = folder / "gunicorn.log"
    args = gunicorn_args("tests.e2e.app_factory:get_app()", port, workers=3)
    args[-1:-1] = ["--access-logformat", "pid=%(p)s %(r)s %(s)s"]
    with serving(args, url + "/v1/openapi.json", env=env, log_path=log):
        web = requests.Session()
        assert web.post(url + "/v1/accounts", json={"email": "p@example.com", "password": PASSWORD}).ok
        signed = web.post(url + "/v1/session", json={"email": "p@example.com", "password": PASSWORD})
        web.headers["X-CSRF-Token"] = signed.json()["csrfToken"]
        linked = web.post(url + "/v1/connections", json={"email": "alice@sandbox.test", "password": "sandbox"})
        assert linked.status_code == 201, linked.text
        every = ["groups:read", "posts:read", "posts:write", "comments:read", "comments:write"]
        key = web.post(url + "/v1/keys", json={"scopes": every}).json()["secret"]
        yield url, key, log


def call(url: str, key: str, method: str, path: str, body: object = None) -> requests.Response:
    # A fresh connection each time, so that the calls spread over the workers.
    headers = {"Authorization": f"Bearer {key}", "Connection": "close"}
    return requests.request(method, url + path, headers=headers, json=body, timeout=30)


def answers(log: Path, method: str, path: str) -> list[tuple[str, str]]:
    """(worker pid, status) of each answer to ``method path`` in the access log, in order."""
    found = re.findall(rf"^pid=<(\d+)> {method} {re.escape(path)} HTTP/1.1 (\d+)$", log.read_text(), re.M)
    return [(pid, status) for pid, status in found]


def refused_by_a_worker_under_the_limit(
    url: str, key: str, log: Path, method: str, path: str, body: object, ok: str, limit: int
) -> None:
    """The budget is spent: go on calling (all at once, in rounds, so that calls land on several workers)
    until a worker that itself admitted fewer than ``limit`` calls has refused one, which a count of its
    own would have admitted. Every call must be refused."""
    for _ in range(20):
        with ThreadPoolExecutor(max_workers=9) as pool:
            statuses = list(pool.map(lambda _: call(url, key, method, path, body).status_code, range(9)))
        assert statuses == [429] * 9
        seen = answers(log, method, path)
        refused_by = {pid for pid, status in seen if status == "429"}
        if any(sum(1 for p, status in seen if p == pid and status == ok) < limit for pid in refused_by):
            return
    raise AssertionError(f"no refusal came from a worker under the limit: {seen}")


def test_every_worker_shares_one_count_of_reads_and_of_writes(paced: tuple[str, str, Path]) -> None:
    url, key, log = paced
    with ThreadPoolExecutor(max_workers=READS + 3) as pool:  # at once: the workers take them in turn
        reads = list(pool.map(lambda _: call(url, key, "GET", "/v1/whoami").status_code, range(READS + 3)))
    assert sorted(reads) == [200] * READS + [429] * 3
    refused = call(url, key, "GET", "/v1/groups")
    assert refused.status_code == 429 and refused.json()["error"]["details"]["reason"] == "read_pace"
    assert 40 <= int(refused.headers["retry-after"]) <= 60  # the first call of the window is seconds old
    refused_by_a_worker_under_the_limit(url, key, log, "GET", "/v1/whoami", None, "200", READS)

    path = f"/v1/groups/{GROUP}/posts"
    with ThreadPoolExecutor(max_workers=WRITES + 3) as pool:
        writes = list(
            pool.map(lambda n: call(url, key, "POST", path, {"title": f"post {n}"}).status_code, range(WRITES + 3))
        )
    assert sorted(writes) == [201] * WRITES + [429] * 3  # a budget of their own: the reads spent nothing
    refused = call(url, key, "POST", path, {"title": "one more"})
    assert refused.status_code == 429 and refused.json()["error"]["details"]["reason"] == "write_pace"
    assert 40 <= int(refused.headers["retry-after"]) <= 60  # the first call of the window is seconds old
    refused_by_a_worker_under_the_limit(url, key, log, "POST", path, {"title": "again"}, "201", WRITES)
