"""Middleware: every answer says ``X-Content-Type-Options: nosniff``.

The service answers JSON (the dashboard's HTML pages set the header themselves too), and some answers repeat
a bit of the request: an unknown field's name, a path that has no route (bounded, printable). With the
header a browser never reads such an answer as anything but its declared type. OWASP's REST Security Cheat
Sheet lists it among an API's answer headers, and scanners (ZAP's baseline) report its absence.
"""

from __future__ import annotations

import falcon


class Nosniff:
    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        # Set before routing, so that refusals (401, 404, 413…) carry it as well.
        resp.set_header("X-Content-Type-Options", "nosniff")
