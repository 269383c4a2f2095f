"""Prometheus metrics (``prometheus_client``), counted in every gunicorn worker and summed at ``/metrics``.

Multiprocess mode: ``community-api serve`` runs gunicorn with ``adapters/gunicorn_conf.py``, which points
``PROMETHEUS_MULTIPROC_DIR`` at a fresh folder before any worker imports this module, and tells the
library when a worker ends. Without it (tests in one process) the metrics are the process's own.

What is counted, and where:
- requests by route template, method and status, with their latency (``RequestLog``);
- platform calls by kind (the gateway's method) and outcome (``ok`` or the error code), with their
  latency (``MeteredGateway``, wrapped around the gateway at start-up);
- the browser pool: browsers live, started, evicted, closed when idle, crashed (``browser_pool.py``);
- refusals of the DM throttle and of the read pace (``MeteredThrottle``, ``MeteredPace``);
- MCP tool calls by tool and outcome (``adapters/mcp/server.py``);
- linked platform accounts at each scrape, by whether they need linking again (``ConnectionsCollector``:
  read from the database, the same in every worker).
Labels never hold an id, a key or anything a client typed: routes are templates, tools are known names.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from community_api.connections import count_to_link_again
from community_api.errors import RateLimited, ServiceError
from community_api.model import DmQuota, ReadPace, WritePace
from community_api.ports import Clock, PlatformGateway, PlatformPace, Throttle
from community_api.store_ports import ConnectionRecords

log = logging.getLogger(__name__)

T = TypeVar("T")
_LATENCY = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 60.0)

REQUESTS = Counter(
    "community_api_requests_total",
    "HTTP requests answered, by route template, method, status",
    ["route", "method", "status"],
)
REQUEST_SECONDS = Histogram(
    "community_api_request_duration_seconds", "Time to answer a request", ["route", "method"], buckets=_LATENCY
)
PLATFORM_CALLS = Counter(
    "community_api_platform_calls_total", "Calls of the platform gateway, by kind and outcome", ["kind", "outcome"]
)
# Requests sent to the platform itself (a gateway call sends one or many: a list of groups one per group),
# the figure the platform's own limits count; refused by the pace, a request is not sent and not counted.
PLATFORM_REQUESTS = Counter(
    "community_api_platform_requests_total", "Requests sent to the platform, reads (GET) and writes", ["kind"]
)
PLATFORM_SECONDS = Histogram(
    "community_api_platform_call_duration_seconds", "Time of a platform gateway call", ["kind"], buckets=_LATENCY
)
BROWSERS_LIVE = Gauge("community_api_browsers_live", "Browsers running or starting", multiprocess_mode="livesum")
BROWSER_STARTS = Counter("community_api_browser_starts_total", "Browsers started")
BROWSER_EVICTIONS = Counter(
    "community_api_browser_evictions_total", "Browsers closed to make room for another connection's"
)
BROWSER_CRASHES = Counter("community_api_browser_crashes_total", "Browsers discarded after a crash or a hang")
BROWSER_IDLE_CLOSES = Counter("community_api_browser_idle_closes_total", "Browsers closed after going unused a while")
BROWSER_MEMORY_SHORT = Counter(
    "community_api_browser_memory_short_total",
    "Browser starts that found the machine or its cgroup short of memory, starts in flight counted (an idle "
    "browser closed, or a wait)",
)
REFUSALS = Counter(
    "community_api_rate_limit_refusals_total",
    "Calls refused by a limit: dm_throttle, read_pace, write_pace, platform_hold, busy",
    ["limit"],
)
MCP_TOOL_CALLS = Counter(
    "community_api_mcp_tool_calls_total", "MCP tool calls, by tool and outcome", ["tool", "outcome"]
)


class ConnectionsCollector(Collector):
    """``community_api_connections{state}``: the linked platform accounts of every account at scrape time,
    ``to_link_again`` when the platform said the session expired or its token says it ends within a month
    (``connections.needs_linking_again``, as ``accounts list`` counts them), else ``ok``. An operator can
    alert on it before the keys acting through those accounts stop. One query a scrape; when the database
    cannot be read the gauge is left out and the counters are still served."""

    def __init__(self, store: ConnectionRecords, clock: Clock) -> None:
        self._store = store
        self._clock = clock

    def collect(self) -> Iterator[Metric]:
        try:
            linked = self._store.all_connections()
        except sqlite3.Error as error:
            log.warning("the connections gauge was left out of /metrics: %s", error)
            return
        again = count_to_link_again(linked, self._clock.now())
        family = GaugeMetricFamily(
            "community_api_connections",
            "Linked platform accounts; to_link_again: the platform session expired, or ends within a month",
            labels=["state"],
        )
        family.add_metric(["ok"], len(linked) - again)
        family.add_metric(["to_link_again"], again)
        yield family


def exposition(*collectors: Collector) -> tuple[bytes, str]:
    """The metrics text and its content type: every worker's, summed, in multiprocess mode; then what
    ``collectors`` read at this scrape."""
    at_scrape = CollectorRegistry()
    for collector in collectors:
        at_scrape.register(collector)
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry) + generate_latest(at_scrape), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY) + generate_latest(at_scrape), CONTENT_TYPE_LATEST


def outcome(error: BaseException | None) -> str:
    if error is None:
        return "ok"
    return error.code if isinstance(error, ServiceError) else "internal_error"


class MeteredGateway:
    """A ``PlatformGateway`` that counts and times each call of the one it wraps (everything else, such as
    ``browser_pids`` or ``close``, passes through)."""

    def __init__(self, inner: PlatformGateway) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if name not in GATEWAY_CALLS:
            return attribute
        metered = _metered(name, attribute)
        setattr(self, name, metered)  # made once: later look-ups find it on the instance
        return metered


GATEWAY_CALLS = frozenset(
    {
        "login",
        "adopt_session",
        "whoami",
        "list_groups",
        "get_group",
        "feed_pages",
        "post_detail",
        "create_post",
        "delete_post",
        "create_comment",
        "delete_comment",
        "list_conversations",
        "get_messages",
        "open_conversation",
        "send_message",
    }
)


def _metered(kind: str, call: Callable[..., T]) -> Callable[..., T]:
    seconds, succeeded = PLATFORM_SECONDS.labels(kind), PLATFORM_CALLS.labels(kind, "ok")

    def timed(*args: Any, **kwargs: Any) -> T:
        started = time.perf_counter()
        try:
            result = call(*args, **kwargs)
        except BaseException as error:
            seconds.observe(time.perf_counter() - started)
            PLATFORM_CALLS.labels(kind, outcome(error)).inc()
            raise
        seconds.observe(time.perf_counter() - started)
        succeeded.inc()
        return result

    return timed


class MeteredThrottle:
    """The DM throttle, its refusals counted."""

    def __init__(self, inner: Throttle) -> None:
        self._inner = inner

    def reserve(self, platform_user_id: str) -> object:
        try:
            return self._inner.reserve(platform_user_id)
        except RateLimited:
            REFUSALS.labels("dm_throttle").inc()
            raise

    def commit(self, reservation: object) -> None:
        self._inner.commit(reservation)

    def cancel(self, reservation: object) -> None:
        self._inner.cancel(reservation)

    def quota(self, platform_user_id: str) -> DmQuota:
        return self._inner.quota(platform_user_id)

    def ready(self) -> str | None:
        return self._inner.ready()


class MeteredPace:
    """The platform pace, its refusals counted by reason (``read_pace``, ``write_pace`` or ``platform_hold``)."""

    def __init__(self, inner: PlatformPace) -> None:
        self._inner = inner

    def admit(self, platform_user_id: str, reads: int, writes: int = 0, *, counted: int = 0) -> None:
        try:
            self._inner.admit(platform_user_id, reads, writes, counted=counted)
        except RateLimited as refused:
            REFUSALS.labels(str(refused.details.get("reason", "read_pace"))).inc()
            raise

    def hold(self, platform_user_id: str, seconds: int) -> None:
        self._inner.hold(platform_user_id, seconds)

    def status(self, platform_user_id: str) -> ReadPace:
        return self._inner.status(platform_user_id)

    def write_status(self, platform_user_id: str) -> WritePace:
        return self._inner.write_status(platform_user_id)

    def ready(self) -> str | None:
        return self._inner.ready()
