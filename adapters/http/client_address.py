"""Who the client is, for counting: the socket's peer, or, behind a trusted reverse proxy, the address the
proxy says it forwarded for.

``X-Forwarded-For`` is read only when the request comes from a proxy named in
``COMMUNITY_API_TRUSTED_PROXIES`` (addresses or networks): anyone else could write any address into it and
escape the sign-in bounds. The header is read from the right (the proxy nearest to us appends last), past
every trusted proxy, to the first address that is not one: that is the client.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

import falcon

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def trusted_networks(values: Iterable[str]) -> tuple[Network, ...]:
    """``COMMUNITY_API_TRUSTED_PROXIES`` as networks (a bare address is a network of one). ``ValueError``
    for a value that is neither."""
    return tuple(ipaddress.ip_network(value.strip(), strict=False) for value in values if value.strip())


def _address(value: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(value.strip().strip("[]"))
    except ValueError:
        return None


def _trusted(value: str, networks: tuple[Network, ...]) -> bool:
    address = _address(value)
    return address is not None and any(address in network for network in networks)


def client_address(req: falcon.Request, networks: tuple[Network, ...]) -> str:
    peer = req.remote_addr or "unknown"
    if not networks or not _trusted(peer, networks):
        return peer
    forwarded = [part.strip() for part in (req.get_header("X-Forwarded-For") or "").split(",") if part.strip()]
    for hop in reversed(forwarded):
        if _address(hop) is None:
            return peer  # a malformed header: count the proxy itself rather than trust a guess
        if not _trusted(hop, networks):
            return str(_address(hop))
    return peer
