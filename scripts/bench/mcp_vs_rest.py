"""MCP tool call vs the same REST call, measured side by side in one run against one gunicorn (2 sync
workers, as api_overhead.py; the service app with the in-memory platform; a key with every scope).

Pairs: ``GET /v1/whoami`` vs ``tools/call whoami``, and ``GET /v1/groups/builders-club/posts?pages=3`` vs
``tools/call get_feed {group, pages: 3}``. Tool calls are raw JSON-RPC POSTs on both wires the endpoint
serves: the handshake era (``MCP-Protocol-Version: 2025-11-25``, as clients that ran ``initialize`` send)
and 2026-07-28 (per-request ``_meta``, ``Mcp-Method``/``Mcp-Name`` headers: the official client's default).
Beside whoami, a floor on each wire: an MCP request that runs no tool (``ping``, ``server/discover``).

Figures: latency of sequential calls from one client (median, p90; the kinds of call interleaved), then
under load with wrk: requests/s and worker CPU per request (read from /proc, so it stays meaningful when
other work shares the machine), then a few calls through the official ``mcp`` client for a sanity figure.
Ratios are of medians; the goal is a tool call at most 2x its REST call.

    .venv/bin/python scripts/bench/mcp_vs_rest.py [--calls 200] [--rounds 3] [--wrk-rounds 5] [--seconds 2]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import anyio  # noqa: E402
import attrs  # noqa: E402
import httpx2  # noqa: E402
import requests  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from community_api.scopes import ALL_SCOPES  # noqa: E402
from scripts.bench.apps import prepare_database  # noqa: E402
from scripts.bench.proc_stats import cpu_seconds  # noqa: E402
from scripts.processes import free_port, gunicorn_args, serving  # noqa: E402

SECRET = "bench-secret-" + "m" * 40
GROUP = "builders-club"
LEGACY = "2025-11-25"
MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
GOAL = 2.0
TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T[\d:.]+Z")


def prepare(db: Path) -> str:
    return prepare_database(db, SECRET, ALL_SCOPES)


# --- the requests compared -------------------------------------------------------------------------


@attrs.frozen
class Call:
    """One HTTP request, sent as is each time. ``kind``: a REST call, a tool call, or a floor (an MCP request
    that runs no tool: what the MCP machinery alone costs on that wire)."""

    label: str
    kind: str  # "rest", "tool" or "floor"
    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes | None = None

    def send(self, session: requests.Session, base: str) -> requests.Response:
        return session.request(self.method, base + self.path, headers=self.headers, data=self.body, timeout=30)

    def value(self, answer: requests.Response) -> Any:
        """The answer's payload (REST body, or a tool's structured content); stops the run on any failure."""
        if answer.status_code != 200:
            raise SystemExit(f"{self.label}: HTTP {answer.status_code}: {answer.text[:500]}")
        payload = answer.json()
        if self.kind == "rest":
            return payload
        if "result" not in payload:
            raise SystemExit(f"{self.label}: not a JSON-RPC result: {answer.text[:500]}")
        result = payload["result"]
        if self.kind == "tool" and result.get("isError") is not False:
            raise SystemExit(f"{self.label}: not a successful tool result: {answer.text[:500]}")
        return result.get("structuredContent")

    def wrk_script(self) -> str:
        lines = [f"wrk.method = {json.dumps(self.method)}"]
        lines += [f"wrk.headers[{json.dumps(name)}] = {json.dumps(value)}" for name, value in self.headers.items()]
        if self.body is not None:
            lines.append(f"wrk.body = {json.dumps(self.body.decode())}")
        return "\n".join(lines) + "\n"


def rest(label: str, path: str, key: str) -> Call:
    return Call(label, "rest", "GET", path, {"Authorization": f"Bearer {key}"})


def rpc(label: str, wire: str, method: str, params: dict[str, Any] | None, key: str, kind: str = "tool") -> Call:
    """A JSON-RPC POST as a client sends it on ``wire``: no session (the server is stateless), JSON answers."""
    headers = {
        "Authorization": f"Bearer {key}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": wire,
    }
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": method}
    if wire == MODERN:
        # 2026-07-28: each request carries its envelope, and its routing headers repeat the body's.
        headers["Mcp-Method"] = method
        if params and "name" in params:
            headers["Mcp-Name"] = params["name"]
        params = {**(params or {}), "_meta": META}
    if params is not None:
        message["params"] = params
    return Call(label, kind, "POST", "/v1/mcp", headers, json.dumps(message).encode())


def tool_call(label: str, wire: str, name: str, arguments: dict[str, Any], key: str) -> Call:
    return rpc(label, wire, "tools/call", {"name": name, "arguments": arguments}, key)


def pairs(key: str) -> list[tuple[Call, list[Call]]]:
    """Each REST call with the tool calls that do the same on both MCP wires (and, beside whoami, the
    floors: a request on each wire that runs no tool)."""
    feed = {"group": GROUP, "pages": 3}
    return [
        (
            rest("REST GET /v1/whoami", "/v1/whoami", key),
            [
                tool_call("MCP whoami (2025-11-25)", LEGACY, "whoami", {}, key),
                tool_call("MCP whoami (2026-07-28)", MODERN, "whoami", {}, key),
                rpc("MCP ping (2025-11-25), no tool", LEGACY, "ping", None, key, kind="floor"),
                rpc("MCP server/discover (2026-07-28), no tool", MODERN, "server/discover", None, key, kind="floor"),
            ],
        ),
        (
            rest("REST GET feed pages=3", f"/v1/groups/{GROUP}/posts?pages=3", key),
            [
                tool_call("MCP get_feed pages=3 (2025-11-25)", LEGACY, "get_feed", feed, key),
                tool_call("MCP get_feed pages=3 (2026-07-28)", MODERN, "get_feed", feed, key),
            ],
        ),
    ]


def timeless(value: Any) -> Any:
    """``value`` with its timestamps blanked: each worker's in-memory platform dates its posts from the
    moment the worker started, so two workers answer the same posts with slightly different times."""
    if isinstance(value, dict):
        return {name: timeless(item) for name, item in value.items()}
    if isinstance(value, list):
        return [timeless(item) for item in value]
    if isinstance(value, str) and TIMESTAMP.fullmatch(value):
        return "<time>"
    return value


# --- measuring -------------------------------------------------------------------------------------


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


def latencies(calls: list[Call], session: requests.Session, base: str, count: int) -> dict[str, list[float]]:
    """Milliseconds of ``count`` sequential calls of each, interleaved (A, B, C, A, B, C, ...) so that every
    kind of call sees the same machine; each answer is checked after its time is taken."""
    out: dict[str, list[float]] = {call.label: [] for call in calls}
    for _ in range(count):
        for call in calls:
            start = time.perf_counter()
            answer = call.send(session, base)
            out[call.label].append((time.perf_counter() - start) * 1000)
            call.value(answer)
    return out


def worker_cpu_seconds(master: int) -> float:
    """User and system CPU time used so far by the gunicorn workers (the children of ``master``)."""
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    return cpu_seconds([int(pid) for pid in children])  # a worker just replaced counts nothing


@attrs.frozen
class Load:
    rate: float  # requests per second (wall clock: shared with whatever else runs on the machine)
    cpu_ms: float  # worker CPU per request: what the service spends on one, whatever else runs


def wrk(call: Call, base: str, master: int, seconds: int, folder: Path) -> Load:
    script = folder / "call.lua"
    script.write_text(call.wrk_script())
    command = ["wrk", "-t2", "-c16", f"-d{seconds}s", "-s", str(script), base + call.path]
    cpu_before = worker_cpu_seconds(master)
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    cpu = worker_cpu_seconds(master) - cpu_before
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    if errors:
        raise SystemExit(f"{call.label} answered {errors.group(1)} errors under wrk:\n{output}")
    count = int(re.search(r"(\d+) requests in", output).group(1))  # type: ignore[union-attr]
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))  # type: ignore[union-attr]
    return Load(rate, cpu * 1000 / count)


def official_client(url: str, key: str, mode: str, count: int) -> dict[str, list[float]]:
    """Milliseconds per ``call_tool`` through ``mcp.Client`` (connected once; the first call is left out)."""

    async def run() -> dict[str, list[float]]:
        times: dict[str, list[float]] = {"whoami": [], "get_feed": []}
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30)
        async with http, Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            for name, arguments in (("whoami", {}), ("get_feed", {"group": GROUP, "pages": 3})):
                for index in range(count + 1):
                    start = time.perf_counter()
                    result = await client.call_tool(name, arguments)
                    elapsed = (time.perf_counter() - start) * 1000
                    if result.is_error:
                        raise SystemExit(f"official client, {name}: {result.content}")
                    if index:
                        times[name].append(elapsed)
        return times

    return anyio.run(run)


@contextlib.contextmanager
def service(workers: int, worker_class: str, db: Path) -> Iterator[tuple[str, int]]:
    """The service under gunicorn: its base URL and the master's process id."""
    env = {"COMMUNITY_API_MODE": "test", "COMMUNITY_API_DB": str(db), "COMMUNITY_API_SECRET": SECRET}
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    # One key reads thousands of times a second here, past any read pace; the pace costs both transports
    # the same and has its own bench (make bench): out of the way.
    args = gunicorn_args(
        "scripts.bench.apps:service_app(paced=False)",
        port,
        workers=workers,
        worker_class=worker_class,
        access_log=False,  # as `community-api serve` runs
    )
    with serving(args, base + "/v1/openapi.json", env=env) as process:
        yield base, process.pid


def report(label: str, values: list[float], unit: str = "ms") -> str:
    return f"{label:42s} median {statistics.median(values):7.2f} {unit}  p90 {p90(values):7.2f} {unit}"


def ratios(
    paired: list[tuple[Call, list[Call]]], figures: Mapping[str, list[float]], pick: Callable[[list[float]], float]
) -> list[str]:
    lines = []
    for base_call, tools in paired:
        for tool in tools:
            ratio = pick(figures[tool.label]) / pick(figures[base_call.label])
            if tool.kind == "floor":
                verdict = "no tool: what the MCP machinery alone costs"
            else:
                verdict = ("ok" if ratio <= GOAL else "over the goal") + f": goal at most {GOAL:.0f}x"
            lines.append(f"{tool.label:42s} / {base_call.label} = {ratio:5.2f}  ({verdict})")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="sequential calls of each request per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of sequential calls")
    parser.add_argument("--wrk-rounds", type=int, default=5, help="rounds of wrk runs (0: no wrk)")
    parser.add_argument("--seconds", type=int, default=2, help="duration of each wrk run")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--worker-class", default="sync", choices=["sync", "gthread"])
    parser.add_argument("--client-calls", type=int, default=50, help="official client calls per tool and mode")
    args = parser.parse_args()
    use_wrk = args.wrk_rounds > 0 and shutil.which("wrk") is not None
    if args.wrk_rounds > 0 and not use_wrk:
        print("wrk is not installed (`make bench` installs it): latency only")

    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "bench.sqlite3"
        key = prepare(db)
        paired = pairs(key)
        calls = [call for base_call, tools in paired for call in (base_call, *tools)]
        with service(args.workers, args.worker_class, db) as (base, master), requests.Session() as session:
            print(f"gunicorn, {args.workers} {args.worker_class} workers, service app, in-memory platform: {base}")
            # Same answers both ways (and everything warm in both workers).
            for base_call, tools in paired:
                expected = base_call.value(base_call.send(session, base))
                for tool in tools:
                    if tool.kind == "tool" and timeless(tool.value(tool.send(session, base))) != timeless(expected):
                        raise SystemExit(f"{tool.label} does not answer what {base_call.label} answers")
            latencies(calls, session, base, 20)

            latency: dict[str, list[float]] = {call.label: [] for call in calls}
            for round_ in range(args.rounds):
                print(f"\nround {round_ + 1}: {args.calls} sequential calls of each, interleaved")
                measured = latencies(calls, session, base, args.calls)
                for call in calls:
                    latency[call.label] += measured[call.label]
                    print("  " + report(call.label, measured[call.label]))

            rates: dict[str, list[float]] = {call.label: [] for call in calls}
            cpu: dict[str, list[float]] = {call.label: [] for call in calls}
            if use_wrk:
                print(f"\nwrk -t2 -c16 -d{args.seconds}s: requests/s | worker CPU ms per request (each round in")
                print("another order; columns as in the rounds above)")
                for round_ in range(args.wrk_rounds):
                    shift = round_ % len(calls)
                    for call in calls[shift:] + calls[:shift]:
                        load = wrk(call, base, master, args.seconds, Path(folder))
                        rates[call.label].append(load.rate)
                        cpu[call.label].append(load.cpu_ms)
                    print(
                        f"  round {round_ + 1}: "
                        + ", ".join(f"{rates[c.label][-1]:.0f}" for c in calls)
                        + " | "
                        + ", ".join(f"{cpu[c.label][-1]:.2f}" for c in calls)
                    )

            client: dict[str, dict[str, list[float]]] = {}
            if args.client_calls > 0:
                for mode in ("legacy", "auto"):
                    client[mode] = official_client(base + "/v1/mcp", key, mode, args.client_calls)

    print(f"\nlatency over all rounds ({args.rounds} x {args.calls} calls of each, one client, requests.Session)")
    for call in calls:
        print("  " + report(call.label, latency[call.label]))
    print("ratios of medians")
    for line in ratios(paired, latency, statistics.median):
        print("  " + line)
    if use_wrk:
        print(f"\nunder load: wrk -t2 -c16 -d{args.seconds}s, median of {args.wrk_rounds} rounds")
        for call in calls:
            print(
                f"  {call.label:42s} {statistics.median(rates[call.label]):7.0f} req/s"
                f"  {statistics.median(cpu[call.label]):6.2f} ms worker CPU per request"
            )
        print("ratios of medians, worker CPU per request (what a call costs the service)")
        for line in ratios(paired, cpu, statistics.median):
            print("  " + line)
        print("ratios of medians, time per request (REST req/s over MCP req/s; shared with the rest of the machine)")
        inverse = {label: [1 / value for value in values] for label, values in rates.items()}
        for line in ratios(paired, inverse, statistics.median):
            print("  " + line)
    for mode, times in client.items():
        print(f"\nofficial mcp client, mode={mode}, {args.client_calls} call_tool each after the first (sanity figure)")
        for name, values in times.items():
            print("  " + report(name, values))


if __name__ == "__main__":
    main()
