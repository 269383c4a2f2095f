"""Feed latency through the headless browser, measured side by side in one run.

The stand-in platform (``python -m scripts.sandbox``) and the service (gunicorn serving
``adapters.wiring:get_app()``, the Selenium gateway with a pool of two browsers; one gthread worker, so
every request meets the same warm browser: each worker process has a pool of its own) run as processes
of their own; alice, bob and carol are linked through the browser (three connections, a key each). Then:

1. cold: the first feed request of a connection, its browser not started yet (right after the service
   starts, and later after the pool closed that connection's browser to make room for another);
2. warm, in rounds, each round taking ``--samples`` of each, interleaved:
   - ``GET /v1/groups/builders-club/posts?pages=1`` and ``?pages=30`` (sort ``newest``) through the API;
   - the floor: the stand-in serving the same 30 page documents (``/_next/data/{buildId}/….json?p=N``)
     to a plain parallel HTTP client (30 threads, one keep-alive ``requests`` session each, signed in
     as alice, the build id read from a page and the firewall cookie got from the stand-in's challenge
     with a browser User-Agent, as the page's script gets it);
3. CPU per request (pages=1 and pages=30) of each part — the stand-in, Chromium with chromedriver, the
   service's Python, this client — from ``/proc``: on N cores a request cannot take less than its CPU / N;
4. memory of each warm browser: PSS and USS (``/proc/PID/smaps_rollup``) summed over its Chromium
   processes, found under the gunicorn master through the parent links in ``/proc/*/stat``. PSS splits
   shared pages among every process mapping them, so it is lower when other Chromiums run (the second
   browser of the pool, or any other on the machine); USS counts only a browser's own pages.

Prints each round, the medians and their ratios against the goals (30 pages at most 2x one page; at most
1.5x the floor plus 100 ms). About a minute.

    .venv/bin/python scripts/bench/feed.py [--rounds 5] [--samples 5] [--cold 4]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.processes import free_port, gunicorn_args, serving  # noqa: E402

SECRET = "bench-feed-secret-" + "f" * 40
GROUP = "builders-club"
SORT = "newest"  # the API's default sort; on the platform ``s=newest``
PAGES = 30
BROWSER_UA = ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 "
              "Safari/537.36")
READY = re.compile(r"sandbox listening on (http://\S+)")
NEXT_DATA = re.compile(r'<script id="__NEXT_DATA__" type="application/json">(.*?)</script>', re.S)


# --- processes -----------------------------------------------------------------------------------------
@contextmanager
def stand_in(folder: Path, threads: int) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """``python -m scripts.sandbox`` on a port the OS picks; ended by its PID afterwards."""
    log_path = folder / "sandbox.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "scripts.sandbox", "--bind", "127.0.0.1:0", "--threads", str(threads)],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not (found := READY.search(log_path.read_text(errors="replace"))):
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the stand-in did not start:\n{log_path.read_text()[-2000:]}")
            time.sleep(0.05)
        yield process, found.group(1)
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGTERM)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)
                process.wait(15)


def link_users(api: str, handles: list[str]) -> list[str]:
    """One service account; each platform user linked through the browser (a connection each, as a
    user links an account); answers a key per connection, in the order given."""
    web = requests.Session()
    email, password = "bench@example.com", "bench password 123"
    web.post(f"{api}/v1/accounts", json={"email": email, "password": password}, timeout=10)
    signed = web.post(f"{api}/v1/session", json={"email": email, "password": password}, timeout=10)
    signed.raise_for_status()
    web.headers["X-CSRF-Token"] = signed.json()["csrfToken"]
    keys = []
    for handle in handles:
        linked = web.post(f"{api}/v1/connections", json={"email": f"{handle}@sandbox.test", "password": "sandbox"},
                          timeout=120)
        if linked.status_code != 201:
            raise SystemExit(f"linking {handle} failed: {linked.status_code} {linked.text[:300]}")
        minted = web.post(f"{api}/v1/keys", json={"name": handle, "connectionId": linked.json()["id"]}, timeout=10)
        minted.raise_for_status()
        keys.append(str(minted.json()["secret"]))
    return keys


# --- the three things timed ----------------------------------------------------------------------------
class Api:
    def __init__(self, url: str, key: str) -> None:
        self.url = url
        self.http = requests.Session()
        self.http.headers["Authorization"] = f"Bearer {key}"

    def feed(self, pages: int) -> float:
        """Seconds for one feed request of ``pages`` pages; checks every page was fetched."""
        started = time.perf_counter()
        resp = self.http.get(f"{self.url}/v1/groups/{GROUP}/posts", params={"pages": str(pages), "sort": SORT},
                             timeout=120)
        elapsed = time.perf_counter() - started
        if resp.status_code != 200:
            raise SystemExit(f"the API answered {resp.status_code}: {resp.text[:300]}")
        body = resp.json()
        if body["pagesFetched"] != pages or len(body["posts"]) < 25 * pages:
            raise SystemExit(f"the API answered {body['pagesFetched']} pages, {len(body['posts'])} posts")
        return elapsed


class Floor:
    """A plain HTTP client reading the 30 page documents in parallel, as a browser on HTTP/2 could."""

    def __init__(self, platform: str) -> None:
        headers = {"User-Agent": BROWSER_UA, "Accept": "application/json", "x-nextjs-data": "1"}
        first = requests.Session()
        first.headers.update(headers)
        page = first.get(f"{platform}/login", timeout=10).text  # as a browser: the page names the build
        found = NEXT_DATA.search(page)
        build_id = json.loads(found.group(1))["buildId"] if found else ""
        challenge = first.get(f"{platform}/__fw/challenge", timeout=10)  # what the page's script does
        challenge.raise_for_status()
        first.cookies.set("aws-waf-token", challenge.json()["token"])
        login = first.post(f"{platform}/api2/auth/login",
                           json={"email": "alice@sandbox.test", "password": "sandbox"}, timeout=10)
        login.raise_for_status()
        self.urls = [f"{platform}/_next/data/{build_id}/{GROUP}.json?group={GROUP}&p={p}&s={SORT}"
                     for p in range(1, PAGES + 1)]
        self.sessions = []
        for _ in range(PAGES):
            session = requests.Session()
            session.headers.update(headers)
            session.cookies.update(first.cookies)
            self.sessions.append(session)
        self.pool = ThreadPoolExecutor(PAGES)

    def _get(self, i: int) -> int:
        resp = self.sessions[i].get(self.urls[i], timeout=60)
        if resp.status_code != 200 or b'"postTrees"' not in resp.content:
            raise SystemExit(f"the stand-in answered {resp.status_code}: {resp.text[:300]}")
        return len(resp.content)

    def fetch(self) -> float:
        """Seconds to have all 30 documents (bodies read in full)."""
        started = time.perf_counter()
        sizes = list(self.pool.map(self._get, range(PAGES)))
        elapsed = time.perf_counter() - started
        self.last_bytes = sum(sizes)
        return elapsed

    def close(self) -> None:
        self.pool.shutdown()
        for session in self.sessions:
            session.close()


# --- memory ----------------------------------------------------------------------------------------------
def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command name), from /proc."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text(errors="replace")
            except OSError:
                continue
            name = stat[stat.index("(") + 1:stat.rindex(")")]
            found[int(entry)] = (int(stat[stat.rindex(")") + 2:].split()[1]), name)
    return found


def _descendants(root: int, table: dict[int, tuple[int, str]]) -> list[int]:
    out, todo = [], [root]
    while todo:
        parent = todo.pop()
        kids = [pid for pid, (ppid, _) in table.items() if ppid == parent]
        out += kids
        todo += kids
    return out


def memory_kib(pid: int) -> tuple[int, int]:
    """(PSS, USS) of a process in KiB: its share of the pages it maps, and the pages only it maps."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0, 0
    fields = {name: int(kib) for name, kib in re.findall(r"^(\w+):\s+(\d+) kB", text, re.M)}
    return fields.get("Pss", 0), fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)


def browsers_memory(master: int) -> list[tuple[int, int, int, int]]:
    """For each chromedriver under the gunicorn master: (Chromium processes, their PSS and USS in KiB,
    the chromedriver's own PSS in KiB)."""
    table = _processes()
    drivers = [pid for pid in _descendants(master, table) if table[pid][1] == "chromedriver"]
    out = []
    for driver in drivers:
        chromium = [memory_kib(pid) for pid in _descendants(driver, table)]
        out.append((len(chromium), sum(p for p, _ in chromium), sum(u for _, u in chromium), memory_kib(driver)[0]))
    return out


# --- CPU ------------------------------------------------------------------------------------------------
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU of the processes (all their threads), from /proc/PID/stat."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text(errors="replace").rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        total += int(fields[11]) + int(fields[12])
    return total / TICK


def cpu_per_request(api: Api, pages: int, samples: int, stand_in_pid: int, service_pid: int) -> dict[str, float]:
    """Milliseconds of CPU one feed request costs each part (the stand-in, Chromium with chromedriver, the
    service's own Python, this client), from /proc before and after ``samples`` sequential requests."""
    table = _processes()
    drivers = [pid for pid in _descendants(service_pid, table) if table[pid][1] == "chromedriver"]
    browser = drivers + [pid for driver in drivers for pid in _descendants(driver, table)]
    parts = {
        "stand-in": [stand_in_pid, *_descendants(stand_in_pid, table)],
        "Chromium": browser,
        "service": [pid for pid in [service_pid, *_descendants(service_pid, table)] if pid not in browser],
    }
    before = {name: cpu_seconds(pids) for name, pids in parts.items()}
    client_before = sum(os.times()[:2])
    for _ in range(samples):
        api.feed(pages)
    used = {name: (cpu_seconds(pids) - before[name]) / samples * 1000 for name, pids in parts.items()}
    used["client"] = (sum(os.times()[:2]) - client_before) / samples * 1000
    return used


# --- the run ------------------------------------------------------------------------------------------
def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--samples", type=int, default=5, help="of each measure in each round")
    parser.add_argument("--cold", type=int, default=4, help="cold first requests after an eviction")
    parser.add_argument("--sandbox-threads", type=int, default=16)
    args = parser.parse_args()
    command = (f".venv/bin/python scripts/bench/feed.py --rounds {args.rounds} --samples {args.samples} "
               f"--cold {args.cold} --sandbox-threads {args.sandbox_threads}")
    print(f"reproduce: {command}")
    print(f"machine: {os.cpu_count()} CPUs; {shlex.quote(sys.version.split()[0])}; "
          f"{subprocess.run(['/usr/bin/chromium', '--version'], capture_output=True, text=True).stdout.strip()}",
          flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-feed-") as tmp:
        folder = Path(tmp)
        with stand_in(folder, args.sandbox_threads) as (sandbox, platform):
            port = free_port()
            api = f"http://127.0.0.1:{port}"
            env = {"COMMUNITY_API_MODE": "test", "COMMUNITY_API_DB": str(folder / "service.sqlite3"),
                   "COMMUNITY_API_SECRET": SECRET, "COMMUNITY_API_PLATFORM_URL": platform,
                   "COMMUNITY_API_PLATFORM_API_URL": platform + "/api2", "COMMUNITY_API_BROWSER_POOL_SIZE": "2"}
            service_args = gunicorn_args("adapters.wiring:get_app()", port, workers=1, worker_class="gthread")
            started = time.perf_counter()
            with serving([*service_args, "--access-logfile", "/dev/null"], api + "/v1/openapi.json", env=env,
                         log_path=folder / "service.log") as service:
                up = time.perf_counter() - started
                clients = [Api(api, key) for key in link_users(api, ["alice", "bob", "carol"])]
                alice = clients[0]
                first = alice.feed(1)
                print(f"service up in {up:.1f} s; alice, bob and carol linked (3 connections, a pool of 2 browsers)")
                print(f"cold: first feed request (pages=1) of a connection after the service started: "
                      f"{first * 1000:.0f} ms")

                floor = Floor(platform)
                for _ in range(2):  # warm everything: the browser's page, connections, the stand-in's memo
                    alice.feed(PAGES), alice.feed(1), floor.fetch()
                print(f"warm: {args.rounds} rounds of {args.samples} samples each (ms, medians of the round)")
                one: list[float] = []
                thirty: list[float] = []
                bare: list[float] = []
                for round_ in range(args.rounds):
                    a, b, c = [], [], []
                    for _ in range(args.samples):  # interleaved, so a load that comes and goes hits all three
                        a.append(alice.feed(1))
                        b.append(alice.feed(PAGES))
                        c.append(floor.fetch())
                    one += a
                    thirty += b
                    bare += c
                    print(f"  round {round_ + 1}: API pages=1 {median_ms(a):6.1f}   API pages=30 {median_ms(b):6.1f}"
                          f"   floor (30 documents, parallel plain client) {median_ms(c):6.1f}", flush=True)
                floor.close()
                m1, m30, mf = median_ms(one), median_ms(thirty), median_ms(bare)
                print(f"medians: API pages=1 {m1:.1f} ms; API pages=30 {m30:.1f} ms; floor {mf:.1f} ms "
                      f"({floor.last_bytes / 1024:.0f} KiB in 30 documents)")
                print(f"ratio pages=30 / pages=1 = {m30 / m1:.2f} (goal: at most 2)")
                print(f"ratio pages=30 / floor = {m30 / mf:.2f}; pages=30 - 1.5 x floor = {m30 - 1.5 * mf:.0f} ms "
                      f"(goal: at most 100 ms, i.e. pages=30 <= {1.5 * mf + 100:.0f} ms)")

                # Where the time goes: CPU per request of each part. On a machine of N cores a request can
                # take no less than its CPU divided by N, whatever the code does.
                cores = os.cpu_count() or 1
                for pages, wall in ((1, m1), (PAGES, m30)):
                    used = cpu_per_request(alice, pages, 10, sandbox.pid, service.pid)
                    total = sum(used.values())
                    print(f"CPU per request, pages={pages}: "
                          + ", ".join(f"{name} {ms:.1f}" for name, ms in used.items())
                          + f"; total {total:.1f} ms = {total / cores:.1f} ms on each of {cores} cores "
                          f"(median wall {wall:.1f} ms)", flush=True)
                    if pages == PAGES:
                        print(f"lower bound here: pages=30 >= {total / cores:.1f} ms = "
                              f"{total / cores / m1:.2f} x pages=1 (all {cores} cores busy for the whole request)")

                clients[1].feed(1)  # a second warm browser, so the pool is full
                for n, (count, pss, uss, driver) in enumerate(browsers_memory(service.pid), 1):
                    print(f"memory: warm browser {n}: {count} Chromium processes, PSS {pss / 1024:.0f} MiB, "
                          f"USS {uss / 1024:.0f} MiB (+ chromedriver PSS {driver / 1024:.0f} MiB)")

                cold: list[float] = []
                order = [2, 0, 1]  # each one's browser is the least recently used: every request is cold
                for i in range(args.cold):
                    cold.append(clients[order[i % 3]].feed(1))
                print(f"cold after an eviction (pool of 2, 3 connections in turn): "
                      f"{', '.join(f'{t * 1000:.0f}' for t in cold)} ms; median {median_ms(cold):.0f} ms")


if __name__ == "__main__":
    main()
