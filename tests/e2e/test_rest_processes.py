"""The REST API under gunicorn with three workers on a temporary SQLite database, driven with requests."""

from __future__ import annotations

import json
import multiprocessing
import re
import socket
import sqlite3
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path
from typing import Any

import attrs
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from community_api.keys import KEY_PREFIX, new_secret
from fakes.platform_seed import platform_id
from scripts.processes import free_port, gunicorn_args, serving

pytestmark = pytest.mark.slow
PASSWORD = "a long enough password"
SECRET = "e2e-secret-" + "x" * 40


@attrs.define
class Service:
    url: str
    db: Path
    log: Path
    session: requests.Session
    csrf: str

    def manage(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        return self.session.request(method, self.url + path, headers={"X-CSRF-Token": self.csrf}, timeout=10, **kwargs)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    folder = tmp_path_factory.mktemp("e2e")
    db = folder / "service.sqlite3"
    log = folder / "gunicorn.log"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        "COMMUNITY_API_MODE": "test",
        "COMMUNITY_API_PLATFORM_READS_PER_MINUTE": "20000",  # the read pace has tests of its own
        "COMMUNITY_API_PLATFORM_WRITES_PER_MINUTE": "20000",  # and the write pace
        "COMMUNITY_API_DB": str(db),
        "COMMUNITY_API_SECRET": SECRET,
        "COMMUNITY_API_USAGE_FLUSH_SECONDS": "0",
        # A folder the test can look into (gunicorn_conf.py otherwise makes one of its own).
        "PROMETHEUS_MULTIPROC_DIR": str(folder / "metrics"),
    }
    args = gunicorn_args("tests.e2e.app_factory:get_app()", port, workers=3)
    args[-1:-1] = ["--access-logformat", "pid=%(p)s %(r)s %(s)s"]
    with serving(args, url + "/v1/openapi.json", env=env, log_path=log):
        session = requests.Session()
        assert (
            session.post(url + "/v1/accounts", json={"email": "e2e@example.com", "password": PASSWORD}).status_code
            == 201
        )
        signed = session.post(url + "/v1/session", json={"email": "e2e@example.com", "password": PASSWORD})
        yield Service(url, db, log, session, signed.json()["csrfToken"])


def mint(service: Service, **body: Any) -> dict[str, Any]:
    result = service.manage("POST", "/v1/keys", json=body)
    assert result.status_code == 201, result.text
    return dict(result.json())


def whoami(service: Service, key: str) -> requests.Response:
    # A fresh connection each time, so that requests spread over the workers.
    return requests.get(
        service.url + "/v1/whoami", headers={"Authorization": f"Bearer {key}", "Connection": "close"}, timeout=10
    )


@pytest.fixture(scope="module")
def alice(service: Service) -> dict[str, Any]:
    result = service.manage("POST", "/v1/connections", json={"email": "alice@sandbox.test", "password": "sandbox"})
    assert result.status_code == 201, result.text
    return dict(result.json())


def test_mint_use_revoke_is_seen_by_every_worker(service: Service, alice: dict[str, Any]) -> None:
    key = mint(service, name="revoke me")
    for _ in range(10):
        assert whoami(service, key["secret"]).json()["handle"] == "alice"
    assert service.manage("DELETE", f"/v1/keys/{key['id']}").status_code == 204
    # Rounds of 20 concurrent requests (sync workers take one at a time each) until the answers came
    # from several workers: every one of them must refuse the key.
    pids: set[str] = set()
    for _ in range(10):
        before = service.log.read_text().count("\n")
        with ThreadPoolExecutor(max_workers=20) as pool:
            statuses = list(pool.map(lambda _: whoami(service, key["secret"]).status_code, range(20)))
        assert statuses == [401] * 20
        lines = service.log.read_text().splitlines()[before:]
        pids |= {m.group(1) for line in lines if "/v1/whoami" in line and (m := re.search(r"pid=<(\d+)>", line))}
        if len(pids) >= 2:
            break
    assert len(pids) >= 2, "the requests should have landed on several workers"


def requests_counted(service: Service, route: str, status: str) -> float:
    answer = requests.get(service.url + "/metrics", timeout=10)
    assert answer.status_code == 200
    return sum(
        sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
        if sample.name == "community_api_requests_total"
        and sample.labels.get("route") == route
        and sample.labels.get("status") == status
    )


def test_metrics_sum_every_workers_counts(service: Service, alice: dict[str, Any]) -> None:
    """prometheus_client's multiprocess mode through gunicorn_conf.py: 60 requests spread over three
    workers are all counted, whichever worker answers the scrape."""
    key = mint(service, name="metrics")["secret"]
    before = requests_counted(service, "/v1/whoami", "200")
    with ThreadPoolExecutor(max_workers=12) as pool:
        statuses = list(pool.map(lambda _: whoami(service, key).status_code, range(60)))
    assert statuses == [200] * 60
    for _ in range(3):  # each scrape may land on another worker: every one sums them all
        assert requests_counted(service, "/v1/whoami", "200") - before == 60
    writers = {path.stem.rsplit("_", 1)[1] for path in (service.db.parent / "metrics").glob("counter_*.db")}
    assert len(writers) >= 2, "the counts should come from several workers"
    # The connections gauge is read from the database at each scrape: once, whichever worker answers.
    for _ in range(3):
        text = requests.get(service.url + "/metrics", timeout=10).text
        gauge = [
            s for f in text_string_to_metric_families(text) for s in f.samples if s.name == "community_api_connections"
        ]
        linked = service.manage("GET", "/v1/connections").json()["connections"]
        assert {s.labels["state"]: s.value for s in gauge} == {"ok": len(linked), "to_link_again": 0}


def _send_dm(url: str, key: str, to: str, start: Any, results: Any) -> None:
    start.wait()
    result = requests.post(
        url + "/v1/dms",
        json={"to": to, "content": "hello from a racer"},
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )
    results.put((result.status_code, result.headers.get("Retry-After")))


def test_eight_processes_sending_dms_at_once_get_exactly_the_allowed_number(
    service: Service, alice: dict[str, Any]
) -> None:
    key = mint(service, scopes=["dms:write", "dms:read"], connectionId=alice["id"])
    context = multiprocessing.get_context("spawn")
    start = context.Event()
    results = context.Queue()
    bob = platform_id("usr-bob")
    racers = [
        context.Process(target=_send_dm, args=(service.url, key["secret"], bob, start, results)) for _ in range(8)
    ]
    for racer in racers:
        racer.start()
    start.set()
    outcomes = [results.get(timeout=60) for _ in racers]
    for racer in racers:
        racer.join(30)
    statuses = sorted(status for status, _ in outcomes)
    assert statuses == [201] + [429] * 7
    # A racer that arrives a moment after the winner is told the rest of the drawn gap (at most 45 s).
    assert all(1 <= int(retry) <= 45 for status, retry in outcomes if status == 429), outcomes
    me = service.manage("GET", "/v1/me").json()
    assert me["usage"]["dms"]["sentLastHour"] == 1


def test_the_secret_appears_neither_in_output_nor_in_the_database(service: Service, alice: dict[str, Any]) -> None:
    key = mint(service, name="secret check")
    secret = key["secret"]
    assert whoami(service, secret).status_code == 200
    assert whoami(service, secret[:-1] + ("A" if secret[-1] != "A" else "B")).status_code == 401
    rotated = service.manage("POST", f"/v1/keys/{key['id']}/rotate").json()
    assert whoami(service, rotated["secret"]).status_code == 200
    for value in (secret, rotated["secret"], 'sandbox"', PASSWORD):
        needle = value.encode()
        assert needle not in service.log.read_bytes()
        for path in service.db.parent.glob(service.db.name + "*"):
            assert needle not in path.read_bytes(), f"found in {path.name}"


def _unknown_refusals(service: Service) -> int:
    with closing(sqlite3.connect(service.db)) as db:
        return int(
            db.execute("SELECT count(*) FROM audit WHERE event = 'key.refused' AND key_id IS NULL").fetchone()[0]
        )


def test_a_flood_of_forged_keys_writes_at_most_a_line_a_minute_per_worker(service: Service) -> None:
    """A key's checksum is a CRC-32 anyone can compute: forged well-formed keys cost a sender nothing.
    Each was one audit row (3,164 a second from one client: about 3 GB an hour)."""
    before = _unknown_refusals(service)
    forged = [new_secret(KEY_PREFIX) for _ in range(300)]
    with ThreadPoolExecutor(6) as pool:
        statuses = list(pool.map(lambda value: whoami(service, value).status_code, forged))
    assert set(statuses) == {401}
    assert 1 <= _unknown_refusals(service) - before <= 3  # three workers


def _racing(service: Service, calls: list[tuple[str, str]]) -> list[requests.Response]:
    """Send the management calls at once, each on a connection of its own (so the workers share them)."""
    cookies = service.session.cookies.get_dict()

    def send(call: tuple[str, str]) -> requests.Response:
        method, path = call
        headers = {"X-CSRF-Token": service.csrf, "Connection": "close"}
        return requests.request(method, service.url + path, headers=headers, cookies=cookies, timeout=30)

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(send, calls))


def test_rotations_and_a_revocation_racing_over_http(service: Service, alice: dict[str, Any]) -> None:
    """Issue 14 through gunicorn's workers: six rotations of one key at once let one through, the rest
    answer 409, and at most two secrets of the lineage work; a revocation racing a rotation is never
    undone, and a secret shown in a 201 answer works."""
    for _ in range(4):
        key = mint(service)
        answers = _racing(service, [("POST", f"/v1/keys/{key['id']}/rotate")] * 6)
        assert sorted(a.status_code for a in answers) == [201] + [409] * 5, [a.text for a in answers]
        (rotated,) = [a.json()["secret"] for a in answers if a.status_code == 201]
        assert whoami(service, rotated).status_code == 200
        assert whoami(service, key["secret"]).status_code == 200  # the old one, in its grace window
    for _ in range(4):
        key = mint(service)
        rotation, revocation = _racing(
            service, [("POST", f"/v1/keys/{key['id']}/rotate"), ("DELETE", f"/v1/keys/{key['id']}")]
        )
        assert revocation.status_code == 204, revocation.text
        assert all(whoami(service, key["secret"]).status_code == 401 for _ in range(3))  # every worker
        if rotation.status_code == 201:
            assert whoami(service, rotation.json()["secret"]).status_code == 200
        else:
            assert rotation.status_code == 409, rotation.text


class _FromAddress(requests.adapters.HTTPAdapter):
    """Connections from another loopback source address (a stranger elsewhere on the network)."""

    def __init__(self, source: str) -> None:
        self.source = source
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["source_address"] = (self.source, 0)
        super().init_poolmanager(*args, **kwargs)


def _sign_in_from(service: Service, source: str, email: str, password: str) -> int:
    session = requests.Session()
    session.mount("http://", _FromAddress(source))
    with session:
        answer = session.post(
            service.url + "/v1/session",
            json={"email": email, "password": password},
            headers={"Connection": "close"},
            timeout=30,
        )
    return answer.status_code


def test_guesses_sent_at_once_are_counted_and_never_lock_the_owner_out(service: Service) -> None:
    """Forty wrong passwords for one email at once from a stranger's address, over the workers: at most five
    are checked (the rest 429), and the owner, from another address, still signs in."""
    email = "e2e@example.com"  # the module's account
    with ThreadPoolExecutor(40) as pool:
        statuses = list(pool.map(lambda _: _sign_in_from(service, "127.0.0.2", email, "wrong " * 3), range(40)))
    assert statuses.count(401) <= 5 and set(statuses) <= {401, 429}, sorted(statuses)
    assert _sign_in_from(service, "127.0.0.2", email, PASSWORD) == 429  # the stranger's address is held back
    assert _sign_in_from(service, "127.0.0.1", email, PASSWORD) == 200  # the owner is not


def test_password_guesses_to_link_a_platform_account_sent_at_once_reach_it_five_times(service: Service) -> None:
    """Linking logs in to the platform from this server: refused attempts for one platform email are
    bounded (5 in 15 minutes), counted in one step with the check, so guesses sent at once through
    several workers cannot pass the bound. Before, every guess reached the platform."""

    def guess(n: int) -> int:
        body = {"email": "dave@sandbox.test", "password": f"guess {n}"}
        headers = {"X-CSRF-Token": service.csrf, "Connection": "close"}
        cookies = service.session.cookies  # one session per request: requests' sessions are not thread-safe
        answer = requests.post(service.url + "/v1/connections", json=body, headers=headers, cookies=cookies, timeout=60)
        return answer.status_code

    with ThreadPoolExecutor(12) as pool:
        statuses = sorted(pool.map(guess, range(12)))
    assert statuses == [400] * 5 + [429] * 7


def test_deleting_an_account_over_http_stops_its_keys_in_every_worker_rest_and_mcp(service: Service) -> None:
    from adapters.store.sqlite_key_store import SqliteKeyStore
    from community_api.accounts import create_account_unchecked
    from community_api.clock import SystemClock

    # A second account, made as the operator's CLI makes one, in the database the workers share.
    create_account_unchecked(SqliteKeyStore(service.db, SECRET), SystemClock(), "leaving@example.com", PASSWORD)
    browser = requests.Session()
    signed = browser.post(service.url + "/v1/session", json={"email": "leaving@example.com", "password": PASSWORD})
    browser.headers["X-CSRF-Token"] = signed.json()["csrfToken"]
    key = browser.post(service.url + "/v1/keys", json={}).json()["secret"]
    assert whoami(service, key).status_code != 401
    assert browser.delete(service.url + "/v1/me", json={"password": "not the password"}).status_code == 403
    assert browser.delete(service.url + "/v1/me", json={"password": PASSWORD}).status_code == 204
    with ThreadPoolExecutor(12) as pool:
        statuses = list(pool.map(lambda _: whoami(service, key).status_code, range(12)))
    assert statuses == [401] * 12
    mcp = requests.post(
        service.url + "/v1/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Authorization": f"Bearer {key}", "Accept": "application/json, text/event-stream"},
        timeout=10,
    )
    assert mcp.status_code == 401
    assert browser.get(service.url + "/v1/me").status_code == 401


def test_password_guesses_through_a_stolen_session_sent_at_once_are_checked_five_times(service: Service) -> None:
    """A session cookie taken from a browser guesses the password that would let it change the password
    (signing the owner out): twelve guesses at once, over both workers, are checked five times; the right
    password is then held back too, while the owner's own session changes the password."""
    from adapters.store.sqlite_key_store import SqliteKeyStore
    from community_api.accounts import create_account_unchecked
    from community_api.clock import SystemClock

    create_account_unchecked(SqliteKeyStore(service.db, SECRET), SystemClock(), "guessed@example.com", PASSWORD)

    def signed_in() -> tuple[dict[str, str], dict[str, str]]:
        answer = requests.post(
            service.url + "/v1/session", json={"email": "guessed@example.com", "password": PASSWORD}, timeout=10
        )
        return {"X-CSRF-Token": answer.json()["csrfToken"], "Connection": "close"}, dict(answer.cookies)

    stolen_headers, stolen_cookies = signed_in()
    owner_headers, owner_cookies = signed_in()
    new_password = "the owner's new passphrase"

    renewed: dict[str, str] = {}

    def change(current: str, headers: dict[str, str], cookies: dict[str, str]) -> int:
        body = {"currentPassword": current, "newPassword": new_password}
        url = service.url + "/v1/me/password"
        answer = requests.post(url, json=body, headers=headers, cookies=cookies, timeout=60)
        renewed.update(answer.cookies)
        return answer.status_code

    with ThreadPoolExecutor(12) as pool:
        statuses = sorted(pool.map(lambda n: change(f"guess {n}", stolen_headers, stolen_cookies), range(12)))
    assert statuses == [403] * 5 + [429] * 7
    assert change(PASSWORD, stolen_headers, stolen_cookies) == 429
    assert change(PASSWORD, owner_headers, owner_cookies) == 204
    assert requests.get(service.url + "/v1/me", cookies=stolen_cookies, timeout=10).status_code == 401
    # The owner's browser goes on under the new cookie the change set; its old one is signed out too.
    assert requests.get(service.url + "/v1/me", cookies=owner_cookies, timeout=10).status_code == 401
    assert requests.get(service.url + "/v1/me", cookies=renewed, timeout=10).status_code == 200


def chunked(body: bytes) -> Iterator[bytes]:
    """A body requests sends with ``Transfer-Encoding: chunked`` (no Content-Length), in small pieces."""
    for start in range(0, len(body), 7):
        yield body[start : start + 7]


def test_a_chunked_body_is_read_whole(service: Service, alice: dict[str, Any]) -> None:
    """HTTP/1.1 lets a client send a body in chunks without a Content-Length (a streamed upload; nginx with
    request buffering off). gunicorn decodes them; the service read such bodies as empty ("a JSON object
    is required"), and the MCP endpoint answered a parse error."""
    key = mint(service, name="chunks", scopes=["groups:read", "posts:read", "posts:write"])["secret"]
    auth = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    group = requests.get(service.url + "/v1/groups", headers=auth, timeout=10).json()["groups"][0]["id"]
    sent = requests.post(
        f"{service.url}/v1/groups/{group}/posts",
        data=chunked(b'{"title": "Sent in chunks", "content": "seven bytes at a time"}'),
        headers=auth,
        timeout=30,
    )
    assert sent.request.headers.get("Transfer-Encoding") == "chunked" and "Content-Length" not in sent.request.headers
    assert sent.status_code == 201, sent.text
    assert sent.json()["title"] == "Sent in chunks"
    ping = requests.post(
        service.url + "/v1/mcp",
        data=chunked(b'{"jsonrpc": "2.0", "id": 7, "method": "ping"}'),
        headers={**auth, "Accept": "application/json, text/event-stream"},
        timeout=30,
    )
    assert ping.status_code == 200 and ping.json() == {"jsonrpc": "2.0", "id": 7, "result": {}}
    too_big = requests.post(
        f"{service.url}/v1/groups/{group}/posts",
        data=chunked(b'{"title": "x", "content": "' + b"y" * 300_000 + b'"}'),  # past the 256 KiB of a data body
        headers=auth,
        timeout=30,
    )
    assert too_big.status_code == 413 and too_big.json()["error"]["code"] == "payload_too_large"
    minted = service.session.post(
        service.url + "/v1/keys",
        data=chunked(b'{"name": "minted in chunks"}'),
        headers={"X-CSRF-Token": service.csrf, "Content-Type": "application/json"},
        timeout=10,
    )
    assert minted.status_code == 201 and minted.json()["name"] == "minted in chunks"
    # A route that takes no body reads a chunked one too, and refuses it (session 44: it was never read).
    feed = requests.get(
        f"{service.url}/v1/groups/{group}/posts", data=chunked(b'{"pages": 3}'), headers=auth, timeout=30
    )
    assert feed.status_code == 400 and feed.json()["error"]["details"] == {"unknown": ["pages"], "allowed": []}
    rotation = service.manage("POST", f"/v1/keys/{minted.json()['id']}/rotate", data=chunked(b'{"grace": "0"}'))
    assert rotation.status_code == 400 and "grace is a query parameter" in rotation.json()["error"]["message"]


def test_an_id_holding_an_encoded_slash_is_no_route_through_gunicorn(service: Service, alice: dict[str, Any]) -> None:
    """gunicorn decodes ``%2F`` in PATH_INFO, so ``/v1/groups/{gid}%2Fposts`` was the feed; it keeps the path
    as sent in RAW_URI, which the router reads (session 44)."""
    key = mint(service, name="slashes", scopes=["groups:read", "posts:read"])["secret"]
    auth = {"Authorization": f"Bearer {key}"}
    group = requests.get(service.url + "/v1/groups", headers=auth, timeout=10).json()["groups"][0]["id"]
    rerouted = requests.get(f"{service.url}/v1/groups/{group}%2Fposts", headers=auth, timeout=10)
    assert rerouted.status_code == 404 and "encoded slash" in rerouted.json()["error"]["message"]
    assert requests.get(f"{service.url}/v1/groups/{group}", headers=auth, timeout=10).status_code == 200
    # In the query it is data like any other byte: a feed's group named in a query is not a path.
    assert requests.get(f"{service.url}/v1/groups/{group}?x=%2F", headers=auth, timeout=10).status_code == 400


def exchange(service: Service, raw: bytes) -> bytes:
    """Send ``raw`` bytes as a request on a connection of their own and read the whole answer. Nothing more
    is sent after them (the socket's write side is shut): a body shorter than it said meets its end."""
    port = int(service.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(raw)
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_a_request_target_in_absolute_form_names_the_host_through_gunicorn(service: Service) -> None:
    """``GET http://host/path`` (as a proxy sends it): gunicorn keeps the Host header and the target in
    RAW_URI; the service answered for a host nobody had checked, its URLs made from the Host header."""
    metadata = "/.well-known/oauth-authorization-server"
    port = service.url.rsplit(":", 1)[1]
    other = exchange(
        service, f"GET http://attacker.example{metadata} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    )
    assert other.startswith(b"HTTP/1.1 400 ") and b"does not serve the host" in other
    served = exchange(
        service, f"GET http://localhost:{port}{metadata} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    )
    assert served.startswith(b"HTTP/1.1 200 ") and f'"issuer": "http://localhost:{port}"'.encode() in served


@pytest.mark.parametrize("case", ["shorter than its Content-Length", "chunk size not hexadecimal"])
def test_a_body_that_does_not_arrive_whole_is_refused_and_does_nothing(
    service: Service, alice: dict[str, Any], case: str
) -> None:
    """gunicorn's reader ends a body at the connection's end without a word: a post whose body stopped
    short of its Content-Length was created from what came (whole JSON), though its client, having seen no
    answer, would send it again. A chunk size that is not hexadecimal answered 500."""
    key = mint(service, name="cut short", scopes=["groups:read", "posts:read", "posts:write"])["secret"]
    auth = {"Authorization": f"Bearer {key}"}
    group = requests.get(service.url + "/v1/groups", headers=auth, timeout=10).json()["groups"][0]["id"]
    title = f"Cut short: {case}"
    body = json.dumps({"title": title, "content": "never whole"}).encode()
    head = (
        f"POST /v1/groups/{group}/posts HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
        "Content-Type: application/json\r\nConnection: close\r\n"
    ).encode()
    if case == "shorter than its Content-Length":
        raw = head + b"Content-Length: %d\r\n\r\n" % (len(body) + 40) + body
    else:
        raw = head + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n" + body + b"\r\n0\r\n\r\n"
    answer = exchange(service, raw)
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    error = json.loads(answer.partition(b"\r\n\r\n")[2])["error"]
    assert error["code"] == "invalid_request" and "did not arrive whole" in error["message"]
    feed = requests.get(f"{service.url}/v1/groups/{group}/posts", headers=auth, timeout=10)
    assert feed.status_code == 200 and title not in [post["title"] for post in feed.json()["posts"]]


def test_an_idempotency_key_sent_twice_is_refused_and_does_nothing(service: Service, alice: dict[str, Any]) -> None:
    """gunicorn hands the application a header sent twice as one value, joined by a comma: a post sent with
    keys "a" and "b" was held to the key "a,b", and its retry sent with "a" alone posted it a second time."""
    key = mint(service, name="two keys", scopes=["groups:read", "posts:read", "posts:write"])["secret"]
    auth = {"Authorization": f"Bearer {key}"}
    group = requests.get(service.url + "/v1/groups", headers=auth, timeout=10).json()["groups"][0]["id"]
    body = json.dumps({"title": "Sent with two keys"}).encode()
    raw = (
        f"POST /v1/groups/{group}/posts HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
        "Content-Type: application/json\r\nIdempotency-Key: two-keys-a\r\nIdempotency-Key: two-keys-b\r\n"
        f"Connection: close\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    answer = exchange(service, raw)
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    error = json.loads(answer.partition(b"\r\n\r\n")[2])["error"]
    assert error["code"] == "invalid_request" and "sent twice" in error["message"]
    feed = requests.get(f"{service.url}/v1/groups/{group}/posts", headers=auth, timeout=10)
    assert "Sent with two keys" not in [post["title"] for post in feed.json()["posts"]]
    # The retry with one of the keys is the first request to act, and acts once.
    retry = {**auth, "Idempotency-Key": "two-keys-a", "Content-Type": "application/json"}
    first = requests.post(f"{service.url}/v1/groups/{group}/posts", data=body, headers=retry, timeout=10)
    again = requests.post(f"{service.url}/v1/groups/{group}/posts", data=body, headers=retry, timeout=10)
    assert first.status_code == again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"
    assert first.json()["id"] == again.json()["id"]


def test_an_authorization_header_sent_twice_is_400_saying_so(service: Service, alice: dict[str, Any]) -> None:
    """The same joining: ``Authorization`` sent twice was refused as an invalid key (401), with no hint why."""
    key = mint(service, name="twice", scopes=["groups:read"])["secret"]
    head = f"Host: 127.0.0.1\r\nAuthorization: Bearer {key}\r\nAuthorization: Bearer {key}\r\nConnection: close\r\n"
    for request in (
        f"GET /v1/whoami HTTP/1.1\r\n{head}\r\n",
        f"POST /v1/mcp HTTP/1.1\r\n{head}Content-Length: 0\r\n\r\n",
    ):
        answer = exchange(service, request.encode())
        assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
        assert b'error="invalid_request"' in answer.partition(b"\r\n\r\n")[0]
        assert b"was it sent twice" in answer and key.encode() not in answer


POST_DMS = b"POST /v1/dms HTTP/1.1\r\nHost: 127.0.0.1\r\n"


@pytest.mark.parametrize(
    ("raw", "status", "code"),
    [
        (b"GET /v1/whoami?" + b"q" * 5000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 414, "uri_too_long"),
        (b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"h" * 9000 + b"\r\n\r\n", 431, "headers_too_large"),
        (b"<script>alert(1)</script>\r\n\r\n", 400, "invalid_request"),
        (POST_DMS + b"Transfer-Encoding: chunked, chunked\r\n\r\n", 400, "invalid_request"),
        (POST_DMS + b"Transfer-Encoding: zstd\r\n\r\n", 501, "not_implemented"),
    ],
    ids=["request line too long", "headers too large", "not HTTP", "stacked codings", "unknown coding"],
)
def test_requests_gunicorn_cannot_read_are_answered_in_the_services_json(
    service: Service, raw: bytes, status: int, code: str
) -> None:
    """gunicorn answers these itself, before the application runs; it wrote a small HTML page, and a JSON
    client could not read why (DESIGN: never HTML). What the client sent is never echoed back."""
    answer = exchange(service, raw)
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin1").split("\r\n")
    assert lines[0].startswith(f"HTTP/1.1 {status} ")
    headers = {name.lower(): value for name, value in (line.split(": ", 1) for line in lines[1:])}
    assert headers["content-type"] == "application/json" and int(headers["content-length"]) == len(body)
    error = json.loads(body)["error"]
    assert error["code"] == code and error["message"] and error["details"] == {}
    assert b"<" not in body and b"qqqq" not in body and b"hhhh" not in body
