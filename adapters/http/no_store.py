"""Middleware: the answers of routes that serve one caller's own data carry ``Cache-Control: no-store``,
errors included.

Two kinds of route do: the management API (a key's secret, shown once; a session's CSRF token; the
account) and the data API (the connected account's feed, posts and DM inbox, read with a key). A cache
between the service and its clients must keep none of them. RFC 9111 §3.5 already forbids a shared cache
to store an answer to a request that carried ``Authorization``, but not every cache follows it: nginx's
``proxy_cache``, turned on with ``proxy_cache_valid``, keys its entries on the URL alone, so without this
header the second key to ask for ``/v1/dms`` is served the first key's inbox (checked with Debian's nginx,
and by ``tests/e2e/test_behind_nginx.py``). A browser's private cache would otherwise keep them on disk.
"""

from __future__ import annotations

import falcon


class NoStore:
    """Sets ``Cache-Control: no-store`` on every answer of a route whose resource is one of ``private``."""

    def __init__(self, *private: type) -> None:
        self.private = private

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, req_succeeded: bool
    ) -> None:
        if isinstance(resource, self.private):
            resp.set_header("Cache-Control", "no-store")
