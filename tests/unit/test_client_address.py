"""The client's address: the socket's peer, unless the peer is a trusted proxy; then the nearest address in
X-Forwarded-For that is not one of ours. A client can never choose its own address by writing the header."""

from __future__ import annotations

import ipaddress

import falcon.testing
import pytest

from adapters.http.client_address import Network, client_address, trusted_networks
from adapters.settings import SettingsError, load_settings

PROXIES = trusted_networks(["10.0.0.5", "fd00::/8"])


@pytest.mark.parametrize(
    ("peer", "forwarded", "expected"),
    [
        ("203.0.113.7", None, "203.0.113.7"),  # no proxy in front
        ("203.0.113.7", "198.51.100.1", "203.0.113.7"),  # the header of an untrusted peer is ignored
        ("10.0.0.5", "198.51.100.1", "198.51.100.1"),  # the trusted proxy says who
        ("10.0.0.5", "1.2.3.4, 198.51.100.1", "198.51.100.1"),  # the client wrote 1.2.3.4 itself: ignored
        ("10.0.0.5", "198.51.100.1, fd00::9", "198.51.100.1"),  # past a second trusted proxy
        ("10.0.0.5", "2001:db8::1", "2001:db8::1"),
        ("10.0.0.5", "not-an-address", "10.0.0.5"),  # malformed: count the proxy, trust no guess
        ("10.0.0.5", "198.51.100.1, bogus", "10.0.0.5"),
        ("10.0.0.5", "", "10.0.0.5"),
        ("10.0.0.5", "10.0.0.5", "10.0.0.5"),  # only proxies: the proxy itself
        # A socket bound to ``::`` reports IPv4 peers IPv4-mapped: each is the IPv4 address it maps.
        ("::ffff:203.0.113.7", None, "203.0.113.7"),
        ("::ffff:203.0.113.7", "198.51.100.1", "203.0.113.7"),  # still untrusted, still ignored
        ("::ffff:10.0.0.5", "198.51.100.1", "198.51.100.1"),  # the trusted proxy, through such a socket
        ("::FFFF:10.0.0.5", "198.51.100.1", "198.51.100.1"),
        ("10.0.0.5", "::ffff:198.51.100.1", "198.51.100.1"),
        ("10.0.0.5", "198.51.100.1, ::ffff:10.0.0.5", "198.51.100.1"),  # past the proxy written mapped
        ("::ffff:10.0.0.6", "198.51.100.1", "10.0.0.6"),  # not the proxy: no header is believed
        # Some proxies add the client's port (Azure's gateways): the client is the address.
        ("10.0.0.5", "198.51.100.1:4321", "198.51.100.1"),
        ("10.0.0.5", "[2001:db8::1]:4321", "2001:db8::1"),
        ("10.0.0.5", "[2001:db8::1]", "2001:db8::1"),
        ("10.0.0.5", "198.51.100.1:4321, 10.0.0.5:80", "198.51.100.1"),  # past the proxy, port and all
        ("10.0.0.5", "198.51.100.1:", "10.0.0.5"),  # malformed: the proxy
        ("10.0.0.5", "198.51.100.1:http", "10.0.0.5"),
        ("10.0.0.5", "[2001:db8::1]:x", "10.0.0.5"),
        ("10.0.0.5", "198.51.100.1:123456", "10.0.0.5"),
        ("10.0.0.5", "198.51.100.1:65535", "198.51.100.1"),  # five digits: a port
        ("10.0.0.5", "198.51.100.1:\u0661\u0662", "10.0.0.5"),  # digits of another script are no port
        # An empty element of a list is no element (RFC 9110 §5.6.1): no hop, and nothing malformed.
        ("10.0.0.5", "198.51.100.1, , 10.0.0.5,", "198.51.100.1"),
        ("10.0.0.5", "2001:db8::1:4321", "2001:db8::1:4321"),  # no brackets: all of it is the address
    ],
)
def test_the_client_address(peer: str, forwarded: str | None, expected: str) -> None:
    headers = {"X-Forwarded-For": forwarded} if forwarded is not None else {}
    req = falcon.testing.create_req(remote_addr=peer, headers=headers)
    assert client_address(req, PROXIES) == expected


@pytest.mark.parametrize("proxies", [(), PROXIES])
@pytest.mark.parametrize(
    ("forwarded", "expected"),
    [
        ("198.51.100.1", "198.51.100.1"),  # what nginx saw
        ("1.2.3.4, 198.51.100.1", "198.51.100.1"),  # the client wrote 1.2.3.4 itself: read from the right
        ("198.51.100.1:4321", "198.51.100.1"),
        (None, "unknown"),  # a local program with no proxy: the socket, as before
        ("", "unknown"),
        ("bogus", "unknown"),  # malformed: no guess is trusted
    ],
)
def test_a_unix_socket_peer_is_the_proxy_and_its_header_names_the_client(
    proxies: tuple[Network, ...], forwarded: str | None, expected: str
) -> None:
    """A proxy in front over a unix socket (``--bind unix:PATH``) has no address for TRUSTED_PROXIES to name;
    gunicorn gives its peer as "". Read as the client itself, every client behind it was one."""
    environ = falcon.testing.create_environ(headers={"X-Forwarded-For": forwarded} if forwarded is not None else {})
    environ["REMOTE_ADDR"] = ""  # as gunicorn sets it for a unix socket's connection
    assert client_address(falcon.Request(environ), proxies) == expected


def test_without_trusted_proxies_the_header_is_never_read() -> None:
    req = falcon.testing.create_req(remote_addr="10.0.0.5", headers={"X-Forwarded-For": "198.51.100.1"})
    assert client_address(req, ()) == "10.0.0.5"


def test_the_setting_lists_addresses_or_networks() -> None:
    base = {"COMMUNITY_API_MODE": "test"}
    assert load_settings({**base, "COMMUNITY_API_TRUSTED_PROXIES": "127.0.0.1, 10.0.0.0/8"}).trusted_proxies == (
        "127.0.0.1",
        "10.0.0.0/8",
    )
    with pytest.raises(SettingsError):
        load_settings({**base, "COMMUNITY_API_TRUSTED_PROXIES": "proxy.example"})
    # Blank entries (a trailing comma, a value of spaces) name nothing, rather than failing the start.
    assert trusted_networks(["127.0.0.1", " ", ""]) == (ipaddress.IPv4Network("127.0.0.1/32"),)


def test_a_trusted_proxy_written_ipv4_mapped_is_the_ipv4_network_it_maps() -> None:
    assert trusted_networks(["::ffff:10.0.0.0/104", "::ffff:127.0.0.1"]) == (
        ipaddress.IPv4Network("10.0.0.0/8"),
        ipaddress.IPv4Network("127.0.0.1/32"),
    )
    req = falcon.testing.create_req(remote_addr="10.1.2.3", headers={"X-Forwarded-For": "198.51.100.1"})
    assert client_address(req, trusted_networks(["::ffff:10.0.0.0/104"])) == "198.51.100.1"
    assert trusted_networks(["::/0"]) == (ipaddress.IPv6Network("::/0"),)  # wider than the mapped range: kept
