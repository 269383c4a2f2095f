"""A warm browser's memory under steady use, with the page loaded afresh as the gateway does
(``page_fetch.RELOAD_AFTER_BYTES`` / ``RELOAD_AFTER_SCRIPTS``) and without it, side by side in one run.

chromedriver keeps every script's result alive inside the page for as long as the page lives; the gateway
loads the page again once enough has come out of it. This bench reads alice's feed through the Selenium
gateway in this process (one browser, the stand-in platform over HTTPS): ``--reads`` reads, one in ten of
30 pages, the rest of one page. It prints, every ``--every`` reads and at the end, the browser's memory
(PSS and USS summed over its Chromium processes, from ``/proc/PID/smaps_rollup``) and the page's
JavaScript heap after a garbage collection, first with the reload (as shipped), then with it switched off,
each on a fresh browser.

    .venv/bin/python scripts/bench/browser_memory.py [--reads 4000] [--every 1000]   # or: make bench-memory
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from adapters.platform import page_fetch  # noqa: E402
from adapters.platform.procfs import descendants  # noqa: E402
from adapters.platform.selenium_platform_gateway import SeleniumPlatformGateway  # noqa: E402
from community_api.model import PlatformSession  # noqa: E402
from scripts.bench.feed_processes import StandIn, stand_in  # noqa: E402
from scripts.bench.proc_stats import memory_kib  # noqa: E402

GROUP = "builders-club"
MIB = 1024


def measure(gateway: SeleniumPlatformGateway, session: PlatformSession) -> str:
    pids = gateway.browser_pids(session.connection_id)
    family = set(pids)
    for pid in pids:
        family.update(descendants(pid))
    pss = sum(memory_kib(pid)[0] for pid in family)
    uss = sum(memory_kib(pid)[1] for pid in family)
    with gateway._client.pool.lease(session.connection_id) as lease:
        driver = lease.browser().driver
        driver.execute_cdp_cmd("HeapProfiler.collectGarbage", {})
        heap = int(driver.execute_cdp_cmd("Runtime.getHeapUsage", {})["usedSize"]) // 1024
    return f"PSS {pss // MIB:5d} MiB  USS {uss // MIB:5d} MiB  page heap after GC {heap // MIB:5d} MiB"


def run(platform: StandIn, reads: int, every: int, reload: bool) -> None:
    if not reload:
        page_fetch.RELOAD_AFTER_BYTES = page_fetch.RELOAD_AFTER_SCRIPTS = sys.maxsize
    gateway = SeleniumPlatformGateway(
        platform.url, platform.url + "/api2", pool_size=1, timeout=20, trusted_spki=(platform.spki,)
    )
    try:
        token = gateway.login("alice@sandbox.test", "sandbox").session_token
        session = PlatformSession(connection_id="bench-memory", token=token)
        label = "reload (as shipped)" if reload else "no reload"
        started = time.monotonic()
        for i in range(reads + 1):
            if i and i % every == 0:
                print(f"{label:20s} {i:6d} reads  {measure(gateway, session)}", flush=True)
            if i < reads:
                gateway.feed_pages(session, GROUP, "newest", list(range(1, 31)) if i % 10 == 0 else [1])
        print(f"{label:20s} {reads} reads in {time.monotonic() - started:.0f} s", flush=True)
    finally:
        gateway.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=4000)
    parser.add_argument("--every", type=int, default=1000)
    args = parser.parse_args()
    shipped = (page_fetch.RELOAD_AFTER_BYTES, page_fetch.RELOAD_AFTER_SCRIPTS)
    with tempfile.TemporaryDirectory() as folder, stand_in(Path(folder), threads=8) as platform:
        run(platform, args.reads, args.every, reload=True)
        run(platform, args.reads, args.every, reload=False)
    page_fetch.RELOAD_AFTER_BYTES, page_fetch.RELOAD_AFTER_SCRIPTS = shipped


if __name__ == "__main__":
    main()
