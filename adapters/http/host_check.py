"""Absolute URLs never come from a Host header the service does not serve (as Django's ``ALLOWED_HOSTS``).

With ``COMMUNITY_API_PUBLIC_URL`` set, every absolute URL (the OAuth issuer and endpoints, the MCP
``WWW-Authenticate`` resource metadata) comes from it, and the Host header is never used for one. Without
it, the request's own host is used, so it must be one the service serves: a loopback name or address
(``localhost``, ``127.0.0.0/8``, ``::1``), or one of ``COMMUNITY_API_ALLOWED_HOSTS``. Any other Host answers
400 before any resource runs: ``Host: attacker.example`` can never name the issuer.
"""

from __future__ import annotations

import functools
import re
from urllib.parse import urlsplit

import falcon

from adapters.http.client_address import parsed_address
from adapters.http.errors import error_body
from adapters.http.health import HEALTH_PATHS

# A Host header's syntax (RFC 9110 §7.2, RFC 3986 §3.2.2): a name or IPv4 address without colons, or an IP
# literal in brackets; then an optional port of digits. The content of the brackets is left to is_loopback.
_HOST_SYNTAX = re.compile(r"(?:\[[0-9a-z:.]+\]|[^\[\]:]*)(?::[0-9]*)?")


def host_name(host: str) -> str:
    """The host name of a Host header value, without its port (``[::1]:8000`` → ``[::1]``)."""
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


@functools.lru_cache(maxsize=256)  # every request asks, and a client sends the same Host each time
def read_host(host: str) -> tuple[str, str]:
    """A Host header value (in lower case) as the check compares it: the host and its name without the port,
    a name written absolute (``localhost.``, RFC 1034 §3.1) without its final dot, as Django reads it; the
    name is empty for a text that is not a Host's syntax (``[::1``, ``::1``)."""
    if not _HOST_SYNTAX.fullmatch(host):
        return host, ""
    name = host_name(host)
    if name.endswith(".") and len(name) > 1:
        return name[:-1] + host[len(name) :], name[:-1]
    return host, name


@functools.lru_cache(maxsize=256)  # every request asks; parsing an address costs more than the rest of the check
def is_loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    address = parsed_address(host)  # ``[::ffff:127.0.0.1]`` read as 127.0.0.1
    return address is not None and address.is_loopback


class AllowedHosts:
    """Middleware; a no-op when the service has a public URL."""

    def __init__(self, public_url: str, allowed: tuple[str, ...]) -> None:
        self._active = not public_url
        # Each entry is a host name (any port) or host:port; compared case-insensitively.
        self._allowed = {entry.strip().lower() for entry in allowed if entry.strip()}

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        if not self._active or req.path in HEALTH_PATHS:
            return
        raw = req.env.get("RAW_URI")  # gunicorn's request target as sent
        if raw and raw[:1] not in "/*":
            # The absolute form (``GET http://host/path``, which proxies send): RFC 9112 §3.2.2 has the server
            # take the host from it and ignore the Host header, so the check, and every URL made from the
            # request's host (``req.prefix``), read that one.
            req.env["HTTP_HOST"] = urlsplit(raw).netloc
        sent = (req.get_header("Host") or "").strip()
        host, name = read_host(sent.lower())
        if is_loopback(name) or name in self._allowed or host in self._allowed:
            return
        resp.status = falcon.HTTP_400
        resp.content_type = falcon.MEDIA_JSON
        resp.text = error_body(
            "invalid_request",
            # (HTTP/1.0 clients may send none; HTTP/1.1 requires it, RFC 9112 §3.2.)
            "the request names no host: send a Host header"
            if not sent
            else "this service does not serve the host named in the request; its operator sets "
            "COMMUNITY_API_PUBLIC_URL or COMMUNITY_API_ALLOWED_HOSTS",
        )
        resp.complete = True
