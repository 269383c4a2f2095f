"""API overhead: an authenticated GET /v1/whoami (SQLite key store, usage accounting on, in-memory
platform) against a bare Falcon route, both under the same gunicorn settings, measured side by side in
one run with wrk. Prints requests per second of each round and the ratio of the medians.

    make bench            # or: .venv/bin/python scripts/bench/api_overhead.py [--seconds 5] [--rounds 3]
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts.bench.apps import prepare_database  # noqa: E402
from tests.processes import free_port, gunicorn_args, serving  # noqa: E402

SECRET = "bench-secret-" + "b" * 40


def prepare(db: Path) -> str:
    return prepare_database(db, SECRET, None)


def wrk(url: str, key: str | None, seconds: int) -> float:
    command = ["wrk", "-t2", "-c16", f"-d{seconds}s", url]
    if key:
        command[1:1] = ["-H", f"Authorization: Bearer {key}"]
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    if errors:
        raise SystemExit(f"{url} answered {errors.group(1)} errors:\n{output}")
    return float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))  # type: ignore[union-attr]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--worker-class", default="sync", choices=("sync", "gthread"))
    parser.add_argument("--reads-per-minute", type=int, default=1_000_000,
                        help="the platform read pace of the service (its check is part of every read; the "
                        "default lets wrk's rate through, so every answer is a 200)")
    args = parser.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed: `make bench` installs it (Debian package wrk)")
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "bench.sqlite3"
        key = prepare(db)
        env = {"COMMUNITY_API_MODE": "test", "COMMUNITY_API_DB": str(db), "COMMUNITY_API_SECRET": SECRET,
               "COMMUNITY_API_PLATFORM_READS_PER_MINUTE": str(args.reads_per_minute)}
        bare_port, service_port = free_port(), free_port()
        bare_url = f"http://127.0.0.1:{bare_port}/v1/whoami"
        service_url = f"http://127.0.0.1:{service_port}/v1/whoami"
        quiet = ["--access-logfile", "/dev/null"]
        bare_args = gunicorn_args("scripts.bench.apps:bare_app()", bare_port, args.workers, args.worker_class)
        service_args = gunicorn_args("scripts.bench.apps:service_app()", service_port, args.workers, args.worker_class)
        with (
            serving(bare_args + quiet, bare_url, env=env),
            serving(service_args + quiet, service_url.replace("whoami", "openapi.json"), env=env),
        ):
            wrk(service_url, key, 1)  # warm both
            wrk(bare_url, None, 1)
            bare, ours = [], []
            for round_ in range(args.rounds):
                bare.append(wrk(bare_url, None, args.seconds))
                ours.append(wrk(service_url, key, args.seconds))
                print(f"round {round_ + 1}: bare {bare[-1]:.0f} req/s, authenticated whoami {ours[-1]:.0f} req/s")
    ratio = statistics.median(ours) / statistics.median(bare)
    print(f"median: bare {statistics.median(bare):.0f} req/s, ours {statistics.median(ours):.0f} req/s")
    print(f"ratio ours/bare = {ratio:.2f} (goal: at least 0.80)")


if __name__ == "__main__":
    main()
