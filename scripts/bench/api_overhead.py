"""API overhead: an authenticated GET /v1/whoami (SQLite key store, usage accounting on, the read pace
checked and counted on the shared throttle storage, metrics counted, one JSON log line written per
request, in-memory platform) against a bare Falcon route, both under the same gunicorn settings (gunicorn's
access log off, as ``community-api serve`` runs), measured side by side in one run with wrk. Prints
requests per second of each round and the ratio of the medians.

Every read passes the platform read pace, which admits a connection's reads up to a limit a minute. So
that every answer is a 200, wrk spreads its requests over ``--connections`` keys, each bound to a
connection of its own (``keys.lua``: each wrk thread takes its share in turn), and the pace is set high
enough for the rate each then reads at; the bare route is sent the same headers.

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

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts.bench.apps import prepare_keys  # noqa: E402
from scripts.processes import free_port, gunicorn_args, serving  # noqa: E402

SECRET = "bench-secret-" + "b" * 40


LUA = Path(__file__).with_name("keys.lua")
WRK_THREADS = 2


def wrk(url: str, keys_file: Path, seconds: int) -> float:
    command = [
        "wrk",
        f"-t{WRK_THREADS}",
        "-c16",
        f"-d{seconds}s",
        "-s",
        str(LUA),
        url,
        "--",
        str(keys_file),
        str(WRK_THREADS),
    ]
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
    parser.add_argument(
        "--connections", type=int, default=20, help="keys, each with a connection of its own, that wrk takes in turn"
    )
    parser.add_argument(
        "--reads-per-minute",
        type=int,
        default=16_384,
        help="the platform read pace of each connection (its check and count are part of every "
        "read; with the default connections it lets wrk's rate through, so every answer is a 200)",
    )
    parser.add_argument(
        "--access-log",
        action="store_true",
        help="give both routes gunicorn's access log (to /dev/null), as this bench did until session 24; "
        "`community-api serve` leaves it off, and so does the bench by default",
    )
    args = parser.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed: `make bench` installs it (Debian package wrk)")
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "bench.sqlite3"
        keys_file = Path(folder) / "keys.txt"
        keys_file.write_text("\n".join(prepare_keys(db, SECRET, None, args.connections)) + "\n")
        env = {
            "COMMUNITY_API_MODE": "test",
            "COMMUNITY_API_DB": str(db),
            "COMMUNITY_API_SECRET": SECRET,
            "COMMUNITY_API_PLATFORM_READS_PER_MINUTE": str(args.reads_per_minute),
        }
        bare_port, service_port = free_port(), free_port()
        bare_url = f"http://127.0.0.1:{bare_port}/v1/whoami"
        service_url = f"http://127.0.0.1:{service_port}/v1/whoami"
        access_log_args = ["--access-logfile", "/dev/null"] if args.access_log else []
        bare_args = gunicorn_args(
            "scripts.bench.apps:bare_app()", bare_port, args.workers, args.worker_class, access_log=False
        )
        service_args = gunicorn_args(
            "scripts.bench.apps:service_app()", service_port, args.workers, args.worker_class, access_log=False
        )
        with (
            serving(bare_args + access_log_args, bare_url, env=env),
            # The JSON request log goes to a file, as an operator's would.
            serving(
                service_args + access_log_args,
                service_url.replace("whoami", "openapi.json"),
                env=env,
                log_path=Path(folder) / "service.log",
            ),
        ):
            wrk(service_url, keys_file, 1)  # warm both
            wrk(bare_url, keys_file, 1)
            bare, ours = [], []
            for round_ in range(args.rounds):
                bare.append(wrk(bare_url, keys_file, args.seconds))
                ours.append(wrk(service_url, keys_file, args.seconds))
                print(f"round {round_ + 1}: bare {bare[-1]:.0f} req/s, authenticated whoami {ours[-1]:.0f} req/s")
            logged = sum(1 for line in (Path(folder) / "service.log").open() if '"route":"/v1/whoami"' in line)
            metrics = requests.get(service_url.replace("/v1/whoami", "/metrics"), timeout=10).text
    counted = sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("community_api_requests_total{") and 'route="/v1/whoami"' in line
    )
    print(f"the service logged {logged} JSON request lines and counted {counted:.0f} requests in /metrics")
    ratio = statistics.median(ours) / statistics.median(bare)
    print(f"median: bare {statistics.median(bare):.0f} req/s, ours {statistics.median(ours):.0f} req/s")
    print(f"ratio ours/bare = {ratio:.2f} (goal: at least 0.9)")


if __name__ == "__main__":
    main()
