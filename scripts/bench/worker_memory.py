"""A worker's memory under a long mixed load: does anything a client sends make it grow?

The real service (SQLite key store, usage, the read pace, metrics, the JSON request log) with the in-memory
platform, under gunicorn with two sync workers, is sent requests from several threads for ``--seconds``:
authenticated reads (whoami, the feed of 1 to 30 pages, the inbox, an MCP tool call) and what a client
makes up without end (unknown post ids, unknown paths, forged keys, request ids and Idempotency-Keys of
its own). Every ``--every`` seconds it prints each worker's resident memory (``VmRSS``), then the growth
from the first reading after warming up to the last. Things kept per distinct value a client sends (a
cache, a metric label, a dict keyed by a header) would show as growth that goes on; bounded ones level off.

    make bench-workers     # or: .venv/bin/python scripts/bench/worker_memory.py [--seconds 240] [--threads 4]
"""

from __future__ import annotations

import argparse
import random
import secrets
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from adapters.platform.procfs import children  # noqa: E402
from scripts.bench.apps import prepare_keys  # noqa: E402
from scripts.bench.proc_stats import rss_kib  # noqa: E402
from scripts.processes import free_port, gunicorn_args, serving  # noqa: E402

SECRET = "bench-secret-" + "m" * 40
MCP_CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "whoami", "arguments": {}}}


def load(base: str, keys: list[str], group: str, until: float, sent: list[int]) -> None:
    """Requests of every kind, each drawn at random, until ``until``."""
    session = requests.Session()
    rng = random.Random()
    while time.monotonic() < until:
        key = rng.choice(keys)
        auth = {"Authorization": f"Bearer {key}"}
        kind = rng.randrange(9)
        if kind == 0:
            session.get(base + "/v1/whoami", headers={**auth, "X-Request-Id": secrets.token_hex(16)})
        elif kind == 1:
            pages = rng.randint(1, 30)
            session.get(f"{base}/v1/groups/{group}/posts", params={"pages": pages}, headers=auth)
        elif kind == 2:
            session.get(base + "/v1/dms", headers=auth)
        elif kind == 3:
            accept = {"Accept": "application/json, text/event-stream"}
            session.post(base + "/v1/mcp", json=MCP_CALL, headers={**auth, **accept})
        elif kind == 4:
            session.get(f"{base}/v1/posts/{secrets.token_hex(16)}", headers=auth)
        elif kind == 5:
            session.get(f"{base}/{secrets.token_urlsafe(24)}")
        elif kind == 6:
            forged = {"Authorization": "Bearer cda_" + secrets.token_urlsafe(37)}
            session.get(base + "/v1/whoami", headers=forged)
        elif kind == 7:
            session.get(f"{base}/v1/groups/{secrets.token_hex(8)}", headers=auth)
        else:
            # A creating request refused before it acts (no title), under a key of its own each time.
            idempotency = {"Idempotency-Key": secrets.token_urlsafe(24)}
            session.post(f"{base}/v1/groups/{group}/posts", json={}, headers={**auth, **idempotency})
        sent[0] += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=240)
    parser.add_argument("--every", type=int, default=30)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--warm-up", type=int, default=20, help="seconds of load before the first reading")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "bench.sqlite3"
        keys = prepare_keys(db, SECRET, ["groups:read", "posts:read", "posts:write", "dms:read"], 8)
        env = {
            "COMMUNITY_API_MODE": "test",
            "COMMUNITY_API_DB": str(db),
            "COMMUNITY_API_SECRET": SECRET,
            "COMMUNITY_API_PLATFORM_READS_PER_MINUTE": "65536",
            "COMMUNITY_API_PLATFORM_WRITES_PER_MINUTE": "65536",
        }
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        service_args = gunicorn_args("scripts.bench.apps:service_app()", port, 2, "sync", access_log=False)
        with serving(service_args, base + "/v1/openapi.json", env=env, log_path=Path(folder) / "service.log") as master:
            groups = requests.get(base + "/v1/groups", headers={"Authorization": f"Bearer {keys[0]}"}, timeout=30)
            group = groups.json()["groups"][0]["slug"]
            workers = children(master.pid)  # gunicorn's workers
            sent = [0]
            until = time.monotonic() + args.warm_up + args.seconds
            threads = [
                threading.Thread(target=load, args=(base, keys, group, until, sent), daemon=True)
                for _ in range(args.threads)
            ]
            for thread in threads:
                thread.start()
            time.sleep(args.warm_up)
            first = {pid: rss_kib(pid) / 1024 for pid in workers}
            print(f"after {args.warm_up} s of warm-up ({sent[0]} requests): " + _said(first), flush=True)
            last = first
            for elapsed in range(args.every, args.seconds + 1, args.every):
                time.sleep(args.every)
                last = {pid: rss_kib(pid) / 1024 for pid in workers}
                print(f"+{elapsed} s ({sent[0]} requests): " + _said(last), flush=True)
            for thread in threads:
                thread.join()
    growth = max(last[pid] - first[pid] for pid in workers)
    print(f"{sent[0]} requests in all; the most a worker grew after warming up: {growth:.1f} MiB")


def _said(readings: dict[int, float]) -> str:
    return ", ".join(f"worker {pid} {mib:.1f} MiB" for pid, mib in readings.items())


if __name__ == "__main__":
    main()
