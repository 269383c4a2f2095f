"""HEAD answered on every GET route, as HTTP asks of a general-purpose server (RFC 9110 §9.1, §9.3.2).

Falcon routes HEAD only to a resource's ``on_head``; without one, a HEAD is 405. Uptime monitors and load
balancers check a service with HEAD (``/healthz``, the dashboard's ``/``), and saw it "down". This router
maps HEAD to ``on_get`` wherever a resource has no ``on_head`` of its own, through Falcon's documented
extension point (``CompiledRouter.map_http_methods``). The GET runs in full (a HEAD of a data route reads
the platform, as a GET would: HEAD is GET without the body); Falcon then sends the headers, the
Content-Length of the body it would have sent, and no body.
"""

from __future__ import annotations

from typing import Any

from falcon.routing import CompiledRouter


class HeadAsGetRouter(CompiledRouter):
    def map_http_methods(self, resource: object, **kwargs: Any) -> Any:  # (Falcon's type is private)
        method_map: dict[str, Any] = super().map_http_methods(resource, **kwargs)
        if "GET" in method_map and "HEAD" not in method_map:
            method_map["HEAD"] = method_map["GET"]
        return method_map
