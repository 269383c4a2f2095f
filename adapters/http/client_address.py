"""Who the client is, for counting: the socket's peer, or, behind a trusted reverse proxy, the address the
proxy says it forwarded for.

``X-Forwarded-For`` is read only when the request comes from a proxy named in
``COMMUNITY_API_TRUSTED_PROXIES`` (addresses or networks): anyone else could write any address into it and
escape the sign-in bounds. The header is read from the right (the proxy nearest to us appends last), past
every trusted proxy, to the first address that is not one: that is the client. An address may carry the
port a proxy added (``198.51.100.1:4321``, ``[2001:db8::1]:4321``); anything else that is not an address
makes the proxy itself the client (no guess is trusted).

A proxy that reaches gunicorn over a unix socket (``--bind unix:PATH``) has no address to name in
``COMMUNITY_API_TRUSTED_PROXIES``: such a peer is always trusted, as gunicorn trusts it (only a process
allowed to open the socket file connects), and the client is read from its ``X-Forwarded-For``.

A socket bound to ``::`` (``--bind [::]:8000``) takes IPv4 connections too and reports their peers as
IPv4-mapped IPv6 addresses (``::ffff:127.0.0.1``): every address here is read as the IPv4 address it maps,
so a proxy named ``127.0.0.1`` is trusted, a loopback scrape of ``/metrics`` is loopback, and one client
counts once whichever way its socket wrote it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

import falcon

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")  # IPv4-mapped addresses (RFC 4291 §2.5.5.2)


def trusted_networks(values: Iterable[str]) -> tuple[Network, ...]:
    """``COMMUNITY_API_TRUSTED_PROXIES`` as networks (a bare address is a network of one; one written
    IPv4-mapped is the IPv4 network it maps). ``ValueError`` for a value that is neither."""
    return tuple(_unmapped(ipaddress.ip_network(value.strip(), strict=False)) for value in values if value.strip())


def forwarded_allow_ips(values: Iterable[str]) -> str:
    """gunicorn's ``--forwarded-allow-ips`` for these trusted proxies: each one, and each IPv4 one also as
    the IPv4-mapped network, since gunicorn compares the peer as its socket wrote it (``::ffff:127.0.0.1``
    on a socket bound to ``::``), and would otherwise not believe that proxy's ``X-Forwarded-Proto``."""
    forms: list[str] = []
    for network in trusted_networks(values):
        forms.append(str(network))
        if isinstance(network, ipaddress.IPv4Network):
            forms.append(f"::ffff:{network.network_address}/{network.prefixlen + 96}")
    return ",".join(forms)


def _unmapped(network: Network) -> Network:
    if isinstance(network, ipaddress.IPv6Network) and network.subnet_of(_MAPPED):
        mapped = network.network_address.ipv4_mapped
        assert mapped is not None  # every address of _MAPPED maps one
        return ipaddress.IPv4Network((mapped, network.prefixlen - 96))
    return network


def parsed_address(value: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """``value`` as an IP address (brackets allowed), an IPv4-mapped one as the IPv4 address it maps (Python
    3.11 calls ``::ffff:127.0.0.1`` neither loopback nor IPv4); None for anything else."""
    try:
        address = ipaddress.ip_address(value.strip().strip("[]"))
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _hop_address(value: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """An address of ``X-Forwarded-For``, with the port some proxies add (``198.51.100.1:4321``,
    ``[2001:db8::1]:4321``; Azure's gateways do) left out: the client is the address, and counting the
    proxy instead would let one stranger's failures hold back every client behind it."""
    value = value.strip()
    if value.startswith("[") and "]:" in value:
        value, _, port = value.partition("]:")
    elif value.count(":") == 1:
        value, _, port = value.partition(":")
    else:
        return parsed_address(value)
    return parsed_address(value) if port.isascii() and port.isdigit() and len(port) <= 5 else None


def _in(address: ipaddress.IPv4Address | ipaddress.IPv6Address, networks: tuple[Network, ...]) -> bool:
    return any(address in network for network in networks)


def client_address(req: falcon.Request, networks: tuple[Network, ...]) -> str:
    peer = req.remote_addr or "unknown"
    peer_address = parsed_address(peer)
    if peer_address is not None:
        peer = str(peer_address)  # the IPv4 address of a mapped peer; any other as written
        if not networks or not _in(peer_address, networks):
            return peer
    # Else a peer with no address: a unix socket's (``--bind unix:PATH``; gunicorn gives it as ""), which
    # only a process allowed to open the socket file reaches, the proxy in front; gunicorn trusts its
    # forwarded headers too, whatever forwarded_allow_ips says. No TRUSTED_PROXIES can name it: counted as
    # itself, every client behind the proxy was one, and strangers' failed sign-ins held back everyone.
    forwarded = [part.strip() for part in (req.get_header("X-Forwarded-For") or "").split(",") if part.strip()]
    for hop in reversed(forwarded):
        address = _hop_address(hop)
        if address is None:
            return peer  # a malformed header: count the proxy itself rather than trust a guess
        if not _in(address, networks):
            return str(address)
    return peer
