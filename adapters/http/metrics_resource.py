"""``GET /metrics``: the Prometheus text, for loopback clients or those presenting the metrics token.

Loopback is the client as resolved through the trusted proxies (``client_address.py``): behind a reverse
proxy on the same machine every connection comes from 127.0.0.1, but the client is the one the proxy
names, so the world does not get the metrics through the proxy. Elsewhere, a scraper sends
``Authorization: Bearer <COMMUNITY_API_METRICS_TOKEN>``; with no token set, only loopback is served.
"""

from __future__ import annotations

import hmac
import ipaddress

import falcon
from prometheus_client.registry import Collector

from adapters.http.auth import bearer_credentials
from adapters.http.client_address import Network, client_address
from adapters.metrics import exposition
from community_api.errors import Forbidden


class MetricsResource:
    def __init__(self, token: str, trusted_proxies: tuple[Network, ...], *collectors: Collector) -> None:
        """``collectors`` are read at each scrape, after the counters (``ConnectionsCollector``)."""
        self.token = token
        self.trusted_proxies = trusted_proxies
        self.collectors = collectors

    def _allowed(self, req: falcon.Request) -> bool:
        presented = bearer_credentials(req.get_header("Authorization"))
        if self.token and presented is not None and hmac.compare_digest(presented.encode(), self.token.encode()):
            return True
        try:
            return ipaddress.ip_address(client_address(req, self.trusted_proxies)).is_loopback
        except ValueError:
            return False

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        if not self._allowed(req):
            raise Forbidden(
                "the metrics are served to loopback, or with the metrics token (COMMUNITY_API_METRICS_TOKEN)"
            )
        body, content_type = exposition(*self.collectors)
        resp.content_type = content_type
        resp.data = body
        resp.set_header("Cache-Control", "no-store")
