"""``GET /metrics``: the Prometheus text, parsed with ``prometheus_client``'s own parser, its counters
growing with what the service does; served to loopback or with the metrics token, refused otherwise.

The metrics live for the whole test process (like a worker's), so each test compares before and after."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import falcon.testing
import pytest
from prometheus_client.parser import text_string_to_metric_families

from adapters.metrics import GATEWAY_CALLS
from adapters.settings import Settings, SettingsError, load_settings
from adapters.wiring import app_for
from community_api.errors import PlatformUnavailable
from community_api.ports import PlatformGateway
from tests.unit.test_mcp_world import McpWorld
from tests.unit.world_support import DM_GAP, Ready, World

TOKEN = "m" * 40
FEED = "/v1/groups/builders-club/posts"


def scrape(client: falcon.testing.TestClient, **kwargs: Any) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    answer = client.simulate_get("/metrics", **kwargs)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain; version=")
    return samples_of(answer.text)


def samples_of(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Each sample of a Prometheus text, by its name and labels."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(v for (n, have), v in samples.items() if n == name and wanted <= have)


def test_the_text_parses_and_names_every_family(world: World) -> None:
    answer = world.client.simulate_get("/metrics")
    assert answer.status_code == 200 and answer.headers["cache-control"] == "no-store"
    families = {family.name: family for family in text_string_to_metric_families(answer.text)}
    counters = {
        "community_api_requests",
        "community_api_platform_calls",
        "community_api_browser_starts",
        "community_api_browser_evictions",
        "community_api_browser_crashes",
        "community_api_browser_memory_short",
        "community_api_rate_limit_refusals",
        "community_api_mcp_tool_calls",
    }
    for name in counters:
        assert families[name].type == "counter"  # exposed as <name>_total
    assert families["community_api_request_duration_seconds"].type == "histogram"
    assert families["community_api_platform_call_duration_seconds"].type == "histogram"
    assert families["community_api_browsers_live"].type == "gauge"
    assert families["community_api_connections"].type == "gauge"
    assert "request" in "community_api_requests_total"


def test_request_counters_grow_by_route_template_method_and_status(ready: Ready) -> None:
    world = ready.world
    before = scrape(world.client)
    for _ in range(3):
        assert world.get(FEED, ready.key).status_code == 200
    assert world.get("/v1/posts/999999999", ready.key).status_code == 404
    assert world.get(FEED, "cda_live_nonsense").status_code == 401
    after = scrape(world.client)
    route = "/v1/groups/{gid}/posts"
    grown = value(after, "community_api_requests_total", route=route, method="GET", status="200") - value(
        before, "community_api_requests_total", route=route, method="GET", status="200"
    )
    assert grown == 3
    assert (
        value(after, "community_api_requests_total", route=route, status="401")
        - value(before, "community_api_requests_total", route=route, status="401")
        == 1
    )
    assert (
        value(after, "community_api_request_duration_seconds_count", route=route)
        - value(before, "community_api_request_duration_seconds_count", route=route)
        == 4
    )
    # An id never becomes a label: the post's route is its template.
    assert value(after, "community_api_requests_total", route="/v1/posts/{post_id}", status="404") >= 1
    assert not any("999999999" in str(labels) for _, labels in after)


@pytest.mark.filterwarnings("ignore:Unknown REQUEST_METHOD")
def test_unknown_paths_and_methods_keep_the_labels_bounded(world: World) -> None:
    world.client.simulate_get("/no/such/page/abc123")
    world.client.simulate_request("BREW", "/healthz")
    samples = scrape(world.client)
    assert value(samples, "community_api_requests_total", route="unmatched", method="GET", status="404") >= 1
    labels = {dict(have).get("route") for (name, have) in samples if name == "community_api_requests_total"}
    assert not any(route and "abc123" in route for route in labels)
    methods = {dict(have).get("method") for (name, have) in samples if name == "community_api_requests_total"}
    assert "BREW" not in methods


def test_platform_calls_by_kind_and_outcome(ready: Ready) -> None:
    world = ready.world
    before = scrape(world.client)
    world.get(FEED, ready.key)
    world.gateway.fail_next("feed_pages", PlatformUnavailable("the platform timed out"))
    assert world.get(FEED, ready.key).status_code == 503
    after = scrape(world.client)

    def grew(**labels: str) -> float:
        return value(after, "community_api_platform_calls_total", **labels) - value(
            before, "community_api_platform_calls_total", **labels
        )

    assert grew(kind="feed_pages", outcome="ok") == 1
    assert grew(kind="feed_pages", outcome="platform_unavailable") == 1
    assert (
        value(after, "community_api_platform_call_duration_seconds_count", kind="feed_pages")
        - value(before, "community_api_platform_call_duration_seconds_count", kind="feed_pages")
        == 2
    )
    world.gateway.fail_next("feed_pages", KeyError("a bug"))  # a fault of ours, not the platform's
    assert world.get(FEED, ready.key).status_code == 500
    after = scrape(world.client)
    assert grew(kind="feed_pages", outcome="internal_error") == 1


def test_dm_throttle_and_read_pace_refusals_are_counted(ready: Ready) -> None:
    world = ready.world
    bob = next(c["with"] for c in world.get("/v1/dms", ready.key).json["conversations"] if c["with"]["handle"] == "bob")
    before = scrape(world.client)
    assert world.post("/v1/dms", ready.key, {"to": bob["id"], "content": "one"}).status_code == 201
    assert world.post("/v1/dms", ready.key, {"to": bob["id"], "content": "two"}).status_code == 429
    world.clock.advance(seconds=DM_GAP)
    world.pace.reads_per_minute = 0  # every read refused from now
    assert world.get("/v1/whoami", ready.key).status_code == 429
    after = scrape(world.client)

    def grew(limit: str) -> float:
        return value(after, "community_api_rate_limit_refusals_total", limit=limit) - value(
            before, "community_api_rate_limit_refusals_total", limit=limit
        )

    assert grew("dm_throttle") == 1
    assert grew("read_pace") == 1
    world.pace.writes_per_minute = 0  # every write refused from now: counted by its own reason
    assert world.post(FEED, ready.key, {"title": "Refused"}).status_code == 429
    after = scrape(world.client)
    assert grew("write_pace") == 1 and grew("read_pace") == 1


def test_every_call_of_the_gateway_port_is_counted_and_nothing_else() -> None:
    """A call the port adds is timed and counted like the others (``login`` when an account is linked,
    ``send_message`` for a DM); ``ready`` (the readiness check) and what is not a call pass through uncounted."""
    calls = {name for name, member in vars(PlatformGateway).items() if callable(member) and not name.startswith("_")}
    assert calls - {"ready"} == GATEWAY_CALLS


def test_readiness_and_scrapes_are_not_platform_calls(ready: Ready) -> None:
    world = ready.world
    for path in ("/healthz", "/readyz", "/metrics"):
        world.client.simulate_get(path)
    kinds = {
        dict(labels)["kind"] for name, labels in scrape(world.client) if name == "community_api_platform_calls_total"
    }
    assert kinds <= GATEWAY_CALLS


def test_in_multiprocess_mode_every_workers_figures_are_summed(tmp_path: Path) -> None:
    """As under gunicorn (``gunicorn_conf.py`` sets the folder): two workers count requests and live
    browsers; a scrape answers their sums, live browsers as one figure, then what the scrape's own collectors
    read (the connections gauge)."""
    worker = (
        "import sys\n"
        "from adapters import metrics\n"
        "metrics.BROWSERS_LIVE.inc(int(sys.argv[1]))\n"
        "metrics.REQUESTS.labels('/v1/whoami', 'GET', '200').inc(int(sys.argv[1]))\n"
    )
    scraper = (
        "from prometheus_client.core import GaugeMetricFamily\n"
        "from adapters import metrics\n"
        "class AtScrape:\n"
        "    def collect(self):\n"
        "        family = GaugeMetricFamily('community_api_read_at_scrape', 'read when scraped')\n"
        "        family.add_metric([], 7)\n"
        "        yield family\n"
        "print(metrics.exposition(AtScrape())[0].decode())\n"
    )
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    root = Path(__file__).resolve().parents[2]  # where ``adapters`` is imported from
    for count in ("2", "3"):
        subprocess.run([sys.executable, "-c", worker, count], env=env, cwd=root, check=True, timeout=60)
    text = subprocess.run(
        [sys.executable, "-c", scraper], env=env, cwd=root, check=True, timeout=60, capture_output=True, text=True
    ).stdout
    samples = samples_of(text)
    assert samples[("community_api_browsers_live", frozenset())] == 5
    assert value(samples, "community_api_requests_total", route="/v1/whoami", method="GET", status="200") == 5
    assert samples[("community_api_read_at_scrape", frozenset())] == 7


def test_mcp_tool_calls_by_tool_and_outcome() -> None:
    world = McpWorld.build()
    try:
        before = scrape(world.client)
        world.ok("whoami", {})
        world.call("get_post", {"postId": "not an id"})
        world.call("no_such_tool_xyz", {})
        # A write's failure is answered from its kept record (the idempotency unit of work), not raised:
        # it is counted under its code all the same, and again when a retry is answered from that record.
        world.gateway.fail_next("create_post", PlatformUnavailable("the platform did not answer in time"))
        post = {"group": "builders-club", "title": "Counted", "idempotencyKey": "counted-1"}
        for _ in range(2):
            world.fail("create_post", post)
        world.gateway.fail_next("list_groups", KeyError("a bug"))  # a fault of ours
        world.fail("list_groups", {})
        after = scrape(world.client)
    finally:
        world.close()

    def grew(**labels: str) -> float:
        return value(after, "community_api_mcp_tool_calls_total", **labels) - value(
            before, "community_api_mcp_tool_calls_total", **labels
        )

    assert grew(tool="whoami", outcome="ok") == 1
    assert grew(tool="get_post", outcome="invalid_request") == 1
    assert grew(tool="unknown", outcome="not_found") == 1
    assert grew(tool="create_post", outcome="platform_unavailable") == 2
    assert grew(tool="list_groups", outcome="internal_error") == 1
    assert not any("no_such_tool_xyz" in str(labels) for _, labels in after)


# --- who may read them -----------------------------------------------------------------------------


def with_token(world: World, token: str = TOKEN, proxies: tuple[str, ...] = ()) -> falcon.testing.TestClient:
    settings = Settings(
        mode="test", allowed_hosts=("falconframework.org",), metrics_token=token, trusted_proxies=proxies
    )
    return falcon.testing.TestClient(app_for(world.deps, settings))


# ``::ffff:127.0.0.1``: a local scrape of a service bound to ``[::]`` (the socket takes IPv4 too).
@pytest.mark.parametrize("peer", ["127.0.0.1", "::1", "127.0.0.53", "::ffff:127.0.0.1"])
def test_loopback_is_served_without_a_token(world: World, peer: str) -> None:
    assert world.client.simulate_get("/metrics", remote_addr=peer).status_code == 200


@pytest.mark.parametrize("peer", ["203.0.113.9", "::ffff:203.0.113.9", "2001:db8::1", "::ffff:0:7f00:1"])
def test_elsewhere_is_not_loopback(world: World, peer: str) -> None:
    assert with_token(world).simulate_get("/metrics", remote_addr=peer).status_code == 403


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        f"Bearer {TOKEN[:-1]}",
        f"Bearer {TOKEN}x",
        f"Basic {TOKEN}",
        TOKEN,
        "Bearer ",
        f"Bearer\t{TOKEN}",
    ],
)
def test_elsewhere_without_the_right_token_is_403(world: World, authorization: str | None) -> None:
    client = with_token(world)
    headers = {"Authorization": authorization} if authorization is not None else {}
    answer = client.simulate_get("/metrics", remote_addr="203.0.113.9", headers=headers)
    assert answer.status_code == 403 and answer.json["error"]["code"] == "forbidden"
    assert "community_api_" not in answer.text


def test_elsewhere_with_the_token_is_served(world: World) -> None:
    client = with_token(world)
    answer = client.simulate_get("/metrics", remote_addr="203.0.113.9", headers={"Authorization": f"Bearer {TOKEN}"})
    assert answer.status_code == 200 and "community_api_requests_total" in answer.text


def test_no_token_set_means_no_bearer_is_enough(world: World) -> None:
    client = with_token(world, token="")
    answer = client.simulate_get("/metrics", remote_addr="203.0.113.9", headers={"Authorization": "Bearer "})
    assert answer.status_code == 403


def test_through_a_local_proxy_the_forwarded_client_decides(world: World) -> None:
    """Behind nginx on the same box every peer is 127.0.0.1: the client it names is the one checked."""
    client = with_token(world, proxies=("127.0.0.1/32",))
    outside = client.simulate_get("/metrics", remote_addr="127.0.0.1", headers={"X-Forwarded-For": "198.51.100.7"})
    assert outside.status_code == 403
    local = client.simulate_get("/metrics", remote_addr="127.0.0.1", headers={"X-Forwarded-For": "127.0.0.1"})
    assert local.status_code == 200


def test_behind_a_unix_socket_only_a_forwarded_loopback_client_is_served(world: World) -> None:
    """``--bind unix:PATH``: the peer has no address (gunicorn gives ""), the proxy in front names the client.
    A request that names none is not taken for loopback: the proxy may forward the world without saying so."""
    unix_peer = {"REMOTE_ADDR": ""}  # (falcon's ``remote_addr=""`` would be read as its default, 127.0.0.1)
    assert world.client.simulate_get("/metrics", extras=unix_peer).status_code == 403
    world_client = {"X-Forwarded-For": "198.51.100.7"}
    assert world.client.simulate_get("/metrics", extras=unix_peer, headers=world_client).status_code == 403
    local = {"X-Forwarded-For": "127.0.0.1"}
    assert world.client.simulate_get("/metrics", extras=unix_peer, headers=local).status_code == 200


def test_an_untrusted_peer_cannot_claim_loopback(world: World) -> None:
    answer = world.client.simulate_get("/metrics", remote_addr="203.0.113.9", headers={"X-Forwarded-For": "127.0.0.1"})
    assert answer.status_code == 403


@pytest.mark.parametrize("token", ["short", "x" * 31, "has space" + "x" * 30, "é" * 40, "bell\x07" + "x" * 30])
def test_a_weak_or_odd_metrics_token_refuses_to_start(token: str) -> None:
    with pytest.raises(SettingsError, match="METRICS_TOKEN"):
        load_settings({"COMMUNITY_API_METRICS_TOKEN": token, "COMMUNITY_API_MODE": "test"})


def test_a_metrics_token_of_32_characters_is_taken() -> None:
    settings = load_settings({"COMMUNITY_API_METRICS_TOKEN": "x" * 32, "COMMUNITY_API_MODE": "test"})
    assert settings.metrics_token == "x" * 32


def test_metrics_are_not_usage(ready: Ready) -> None:
    world = ready.world
    usage = dict(world.store._usage)
    scrape(world.client)
    assert world.store._usage == usage


def test_the_connections_gauge_counts_those_to_link_again_at_each_scrape(world: World) -> None:
    """Read from the store at each scrape (the same in every worker): expired by the platform, or ending
    within a month by the token's own date, is ``to_link_again``."""
    assert value(scrape(world.client), "community_api_connections", state="ok") == 0
    browser = world.sign_up()
    world.link(browser)  # alice: a year
    token = world.gateway.token_for("bob", timedelta(days=45))
    assert (
        world.client.simulate_post(
            "/v1/connections", json={"sessionToken": token}, headers=browser.headers()
        ).status_code
        == 201
    )
    samples = scrape(world.client)
    assert value(samples, "community_api_connections", state="ok") == 2
    assert value(samples, "community_api_connections", state="to_link_again") == 0
    world.clock.advance(days=15, seconds=1)  # bob's session now ends within a month
    samples = scrape(world.client)
    assert value(samples, "community_api_connections", state="ok") == 1
    assert value(samples, "community_api_connections", state="to_link_again") == 1


def test_a_database_that_cannot_be_read_leaves_the_gauge_out_and_the_counters_in(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken() -> list[object]:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(world.store, "all_connections", broken)
    samples = scrape(world.client)
    assert not [name for name, _ in samples if name == "community_api_connections"]
    assert any(name == "community_api_requests_total" for name, _ in samples)
