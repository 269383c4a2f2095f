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

5. with platform latency (``--latency-ms``, 150 by default, set through the control API's ``latency`` on
   page data): warm ``pages=1`` and ``pages=30`` over HTTP/2 and over HTTP/1.1 (a second stand-in, started
   with ``--http1``, and a service of its own), the two taking turns round by round. At the real platform's
   latency the parallel fetch is what counts: over HTTP/1.1 Chromium opens at most 6 connections to a host,
   so 30 documents wait in rounds of six.

The stand-in speaks HTTPS as the real hosts do; each service's browser trusts exactly its certificate's key.
Prints each round, the medians and their ratios against the goals (no latency: 30 pages at most 2x one
page, at most 1.5x the floor plus 100 ms; with latency, over HTTP/2: 30 pages at most 1.5x one page), with
the lines ``latency 150 ms, http2: pages=30 / pages=1 = R`` and ``latency 150 ms, http1.1: …``. About two
minutes.

    .venv/bin/python scripts/bench/feed.py [--rounds 5] [--samples 5] [--cold 4] [--latency-ms 150] [--grid]

``--grid`` runs the same with the browsers on a Selenium Grid (standalone on 127.0.0.1, the jar `make
test-deps` fetches): the services get ``SELENIUM_REMOTE_URL``, and the browsers' CPU and memory are found under the
Grid's Java process (whose own CPU is shown as "Grid").
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from adapters.platform.procfs import descendants, process_table  # noqa: E402
from scripts.bench.feed_processes import StandIn, link_users, service_for, set_latency, stand_in  # noqa: E402
from scripts.bench.proc_stats import browsers_memory, cpu_seconds  # noqa: E402
from scripts.grid import GRID_VERSION, running_grid  # noqa: E402

GROUP = "builders-club"
SORT = "newest"  # the API's default sort; on the platform ``s=newest``
PAGES = 30
BROWSER_UA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
NEXT_DATA = re.compile(r'<script id="__NEXT_DATA__" type="application/json">(.*?)</script>', re.S)


# --- the three things timed ----------------------------------------------------------------------------
class Api:
    def __init__(self, url: str, key: str) -> None:
        self.url = url
        self.http = requests.Session()
        self.http.headers["Authorization"] = f"Bearer {key}"

    def feed(self, pages: int) -> float:
        """Seconds for one feed request of ``pages`` pages; checks every page was fetched."""
        started = time.perf_counter()
        resp = self.http.get(
            f"{self.url}/v1/groups/{GROUP}/posts", params={"pages": str(pages), "sort": SORT}, timeout=120
        )
        elapsed = time.perf_counter() - started
        if resp.status_code != 200:
            raise SystemExit(f"the API answered {resp.status_code}: {resp.text[:300]}")
        body = resp.json()
        if body["pagesFetched"] != pages or len(body["posts"]) < 25 * pages:
            raise SystemExit(f"the API answered {body['pagesFetched']} pages, {len(body['posts'])} posts")
        return elapsed


class Floor:
    """A plain HTTPS client reading the 30 page documents in parallel (30 HTTP/1.1 connections), as a browser
    on HTTP/2 could over one."""

    def __init__(self, stand_in: StandIn) -> None:
        platform = stand_in.url
        headers = {"User-Agent": BROWSER_UA, "Accept": "application/json", "x-nextjs-data": "1"}
        first = requests.Session()
        first.trust_env = False  # else REQUESTS_CA_BUNDLE, when set, replaces the verify below
        first.verify = stand_in.cert
        first.headers.update(headers)
        page = first.get(f"{platform}/login", timeout=10).text  # as a browser: the page names the build
        found = NEXT_DATA.search(page)
        build_id = json.loads(found.group(1))["buildId"] if found else ""
        challenge = first.get(f"{platform}/__fw/challenge", timeout=10)  # what the page's script does
        challenge.raise_for_status()
        first.cookies.set("aws-waf-token", challenge.json()["token"])
        login = first.post(
            f"{platform}/api2/auth/login", json={"email": "alice@sandbox.test", "password": "sandbox"}, timeout=10
        )
        login.raise_for_status()
        self.urls = [
            f"{platform}/_next/data/{build_id}/{GROUP}.json?group={GROUP}&p={p}&s={SORT}" for p in range(1, PAGES + 1)
        ]
        self.sessions = []
        for _ in range(PAGES):
            session = requests.Session()
            session.trust_env, session.verify = False, stand_in.cert
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


def cpu_per_request(
    api: Api, pages: int, samples: int, stand_in_pid: int, service_pid: int, grid_pid: int | None = None
) -> dict[str, float]:
    """Milliseconds of CPU one feed request costs each part (the stand-in, Chromium with chromedriver, the
    service's own Python, the Grid's Java when there is one, this client), from /proc before and after
    ``samples`` sequential requests. With a Grid the browsers run under it, not under the service."""
    table = process_table()
    browsers_under = grid_pid if grid_pid is not None else service_pid
    drivers = [pid for pid in descendants(browsers_under, table) if table[pid][1] == "chromedriver"]
    browser = drivers + [pid for driver in drivers for pid in descendants(driver, table)]
    parts = {
        "stand-in": [stand_in_pid, *descendants(stand_in_pid, table)],
        "Chromium": browser,
        "service": [pid for pid in [service_pid, *descendants(service_pid, table)] if pid not in browser],
    }
    if grid_pid is not None:
        parts["Grid"] = [grid_pid]
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


def warm_ratio(api: Api, rounds: int, samples: int) -> tuple[float, float]:
    """Medians (ms) of warm ``pages=1`` and ``pages=30``, interleaved."""
    one: list[float] = []
    thirty: list[float] = []
    for _ in range(rounds):
        for _ in range(samples):
            one.append(api.feed(1))
            thirty.append(api.feed(PAGES))
    return median_ms(one), median_ms(thirty)


def with_latency(
    stacks: dict[str, Api], platforms: dict[str, StandIn], latency_ms: int, rounds: int, samples: int
) -> dict[str, tuple[float, float]]:
    """Warm ``pages=1`` and ``pages=30`` with ``latency_ms`` on every page document, for each protocol,
    the protocols taking turns round by round (so a load that comes and goes hits both)."""
    for platform in platforms.values():
        set_latency(platform, latency_ms)
    for api in stacks.values():  # warm: the browser's page, its connections to the stand-in
        api.feed(1), api.feed(PAGES)
    one: dict[str, list[float]] = {name: [] for name in stacks}
    thirty: dict[str, list[float]] = {name: [] for name in stacks}
    for round_ in range(rounds):
        for name, api in stacks.items():
            for _ in range(samples):
                one[name].append(api.feed(1))
                thirty[name].append(api.feed(PAGES))
        print(
            f"  round {round_ + 1}: "
            + "; ".join(
                f"{name} pages=1 {median_ms(one[name][-samples:]):.0f} ms, pages=30 "
                f"{median_ms(thirty[name][-samples:]):.0f} ms"
                for name in stacks
            ),
            flush=True,
        )
    for platform in platforms.values():
        set_latency(platform, 0)
    return {name: (median_ms(one[name]), median_ms(thirty[name])) for name in stacks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--samples", type=int, default=5, help="of each measure in each round")
    parser.add_argument("--cold", type=int, default=4, help="cold first requests after an eviction")
    parser.add_argument("--sandbox-threads", type=int, default=32)
    parser.add_argument(
        "--latency-ms",
        type=int,
        default=150,
        help="platform latency injected on every page document for the second part",
    )
    parser.add_argument("--latency-rounds", type=int, default=3)
    parser.add_argument(
        "--grid",
        action="store_true",
        help="the browsers on a Selenium Grid (standalone, on 127.0.0.1), as SELENIUM_REMOTE_URL",
    )
    args = parser.parse_args()
    command = (
        f".venv/bin/python scripts/bench/feed.py --rounds {args.rounds} --samples {args.samples} "
        f"--cold {args.cold} --sandbox-threads {args.sandbox_threads} --latency-ms {args.latency_ms} "
        f"--latency-rounds {args.latency_rounds}{' --grid' if args.grid else ''}"
    )
    print(f"reproduce: {command}")
    print(
        f"machine: {os.cpu_count()} CPUs; {shlex.quote(sys.version.split()[0])}; "
        f"{subprocess.run(['/usr/bin/chromium', '--version'], capture_output=True, text=True).stdout.strip()}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="bench-feed-") as tmp:
        folder = Path(tmp)
        with (
            stand_in(folder, args.sandbox_threads) as h2_platform,
            stand_in(folder, args.sandbox_threads, http1=True) as h1_platform,
            (
                running_grid("standalone", folder / "grid", max_sessions=6) if args.grid else contextlib.nullcontext()
            ) as grid,
        ):
            sandbox, platform = h2_platform.process, h2_platform
            grid_url, grid_pid = (grid.url, grid.pids()[0]) if grid else (None, None)
            if grid:
                print(f"browsers on a Selenium Grid {GRID_VERSION} (standalone, {grid.url}), Java PID {grid_pid}")
            started = time.perf_counter()
            with (
                service_for(folder, h2_platform, "service", grid_url) as (service, api),
                service_for(folder, h1_platform, "service-http1", grid_url) as (_, api_http1),
            ):
                up = time.perf_counter() - started
                clients = [Api(api, key) for key in link_users(api, ["alice", "bob", "carol"])]
                alice = clients[0]
                alice_http1 = Api(api_http1, link_users(api_http1, ["alice"])[0])
                first = alice.feed(1)
                print(
                    f"stand-in: HTTPS, HTTP/2 ({h2_platform.url}); a second one offering HTTP/1.1 only "
                    f"({h1_platform.url}), each with a service of its own"
                )
                print(f"services up in {up:.1f} s; alice, bob and carol linked (3 connections, a pool of 2 browsers)")
                print(
                    f"cold: first feed request (pages=1) of a connection after the service started: "
                    f"{first * 1000:.0f} ms"
                )

                floor = Floor(platform)
                for _ in range(2):  # warm everything: the browser's page, connections, the stand-in's memo
                    alice.feed(PAGES), alice.feed(1), floor.fetch()
                print(
                    f"warm, no latency, HTTP/2: {args.rounds} rounds of {args.samples} samples each "
                    f"(ms, medians of the round)"
                )
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
                    print(
                        f"  round {round_ + 1}: API pages=1 {median_ms(a):6.1f}   API pages=30 {median_ms(b):6.1f}"
                        f"   floor (30 documents, parallel plain client) {median_ms(c):6.1f}",
                        flush=True,
                    )
                floor.close()
                m1, m30, mf = median_ms(one), median_ms(thirty), median_ms(bare)
                print(
                    f"medians: API pages=1 {m1:.1f} ms; API pages=30 {m30:.1f} ms; floor {mf:.1f} ms "
                    f"({floor.last_bytes / 1024:.0f} KiB in 30 documents)"
                )
                print(f"ratio pages=30 / pages=1 = {m30 / m1:.2f} (goal: at most 2)")
                print(
                    f"ratio pages=30 / floor = {m30 / mf:.2f}; pages=30 - 1.5 x floor = {m30 - 1.5 * mf:.0f} ms "
                    f"(goal: at most 100 ms, i.e. pages=30 <= {1.5 * mf + 100:.0f} ms)"
                )
                h1_one, h1_thirty = warm_ratio(alice_http1, 1, args.samples)
                print(
                    f"the same without latency over HTTP/1.1 (1 round): pages=1 {h1_one:.1f} ms, "
                    f"pages=30 {h1_thirty:.1f} ms, ratio {h1_thirty / h1_one:.2f}"
                )

                print(
                    f"warm, {args.latency_ms} ms of platform latency on every page document: "
                    f"{args.latency_rounds} rounds of {args.samples} samples of each protocol"
                )
                latency = with_latency(
                    {"http2": alice, "http1.1": alice_http1},
                    {"http2": h2_platform, "http1.1": h1_platform},
                    args.latency_ms,
                    args.latency_rounds,
                    args.samples,
                )
                for name, (l1, l30) in latency.items():
                    print(f"latency {args.latency_ms} ms, {name}: pages=1 {l1:.0f} ms, pages=30 {l30:.0f} ms")
                for name, (l1, l30) in latency.items():
                    print(f"latency {args.latency_ms} ms, {name}: pages=30 / pages=1 = {l30 / l1:.2f}")
                print("goal: over http2, at most 1.5", flush=True)

                # Where the time goes: CPU per request of each part. On a machine of N cores a request can
                # take no less than its CPU divided by N, whatever the code does.
                cores = os.cpu_count() or 1
                for pages, wall in ((1, m1), (PAGES, m30)):
                    used = cpu_per_request(alice, pages, 10, sandbox.pid, service.pid, grid_pid)
                    total = sum(used.values())
                    print(
                        f"CPU per request, pages={pages}: "
                        + ", ".join(f"{name} {ms:.1f}" for name, ms in used.items())
                        + f"; total {total:.1f} ms = {total / cores:.1f} ms on each of {cores} cores "
                        f"(median wall {wall:.1f} ms)",
                        flush=True,
                    )
                    if pages == PAGES:
                        print(
                            f"lower bound here: pages=30 >= {total / cores:.1f} ms = "
                            f"{total / cores / m1:.2f} x pages=1 (all {cores} cores busy for the whole request)"
                        )

                clients[1].feed(1)  # a second warm browser, so the pool is full
                # With a Grid, every browser runs under its Java (both services' here).
                for n, (count, pss, uss, driver) in enumerate(browsers_memory(grid_pid or service.pid), 1):
                    print(
                        f"memory: warm browser {n}: {count} Chromium processes, PSS {pss / 1024:.0f} MiB, "
                        f"USS {uss / 1024:.0f} MiB (+ chromedriver PSS {driver / 1024:.0f} MiB)"
                    )

                cold: list[float] = []
                order = [2, 0, 1]  # each one's browser is the least recently used: every request is cold
                for i in range(args.cold):
                    cold.append(clients[order[i % 3]].feed(1))
                print(
                    f"cold after an eviction (pool of 2, 3 connections in turn): "
                    f"{', '.join(f'{t * 1000:.0f}' for t in cold)} ms; median {median_ms(cold):.0f} ms"
                )


if __name__ == "__main__":
    main()
