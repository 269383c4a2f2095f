"""Failed sign-ins are throttled so that a stranger can never lock the owner out (OWASP's device cookies).

- per (email, client address): 5 failures in 15 minutes, then 429 for that pair only;
- per address, over all emails: 20 in 15 minutes; per email, over all addresses: 100 in an hour, past
  which only a client holding the signed device cookie of an earlier successful sign-in to that email may
  still try (counted on its own device counter);
- an IPv6 address counts by its /64.
"""

from __future__ import annotations

import threading
from typing import Any

import attrs
import falcon.testing
import pytest

from adapters.settings import Settings
from adapters.wiring import app_for, bootstrap
from community_api import accounts
from community_api import sign_in_guard as guard
from community_api.errors import ServiceError
from tests.unit.world_support import PASSWORD, World, build_world

OWNER = "owner@example.com"
WRONG = "x" * 12


def attempt(
    world: World, address: str, password: str = WRONG, email: str = OWNER, device: str | None = None
) -> falcon.testing.Result:
    cookies = {"cda_device": device} if device else None
    return world.client.simulate_post(
        "/v1/session", json={"email": email, "password": password}, remote_addr=address, cookies=cookies
    )


def device_cookie(result: Any) -> str:
    return str(result.cookies["cda_device"].value)


def test_a_strangers_failures_hold_back_only_the_stranger(world: World) -> None:
    world.sign_up(OWNER)
    for _ in range(5):
        assert attempt(world, "203.0.113.9").status_code == 401
    held = attempt(world, "203.0.113.9", PASSWORD)  # even the right password, from that address
    assert held.status_code == 429 and int(held.headers["Retry-After"]) > 0
    # The owner, from their own address, without any cookie: not affected.
    assert attempt(world, "198.51.100.7", PASSWORD).status_code == 200
    world.clock.advance(minutes=16)
    assert attempt(world, "203.0.113.9", PASSWORD).status_code == 200


def test_past_the_per_email_bound_only_the_owners_device_may_try(world: World) -> None:
    world.sign_up(OWNER)
    device = device_cookie(attempt(world, "198.51.100.7", PASSWORD))
    for i in range(100):  # a guess from each of 100 addresses: no pair and no address reaches its bound
        assert attempt(world, f"10.0.{i // 250}.{i % 250 + 1}").status_code == 401
    assert attempt(world, "192.0.2.55", PASSWORD).status_code == 429  # a new address: held back
    assert attempt(world, "198.51.100.7", PASSWORD).status_code == 429  # the owner's address, no cookie
    signed = attempt(world, "198.51.100.7", PASSWORD, device=device)
    assert signed.status_code == 200  # the owner's browser, which signed in before
    assert attempt(world, "192.0.2.56", PASSWORD, device=device_cookie(signed)).status_code == 200  # anywhere


def test_a_device_cookie_of_another_email_or_forged_counts_for_nothing(world: World) -> None:
    world.sign_up(OWNER)
    world.add_account("other@example.com")
    others = device_cookie(attempt(world, "198.51.100.8", PASSWORD, email="other@example.com"))
    mine = device_cookie(attempt(world, "198.51.100.7", PASSWORD))
    for i in range(100):
        attempt(world, f"10.1.{i // 250}.{i % 250 + 1}")
    for cookie in (others, mine[:-2] + ("A" if mine[-2] != "A" else "B") + mine[-1], "garbage", "x" * 5000):
        assert attempt(world, "198.51.100.7", PASSWORD, device=cookie).status_code == 429
    assert attempt(world, "198.51.100.7", PASSWORD, device=mine).status_code == 200


def test_a_device_cookie_sent_twice_counts_as_its_first(world: World) -> None:
    world.sign_up(OWNER)
    mine = device_cookie(attempt(world, "198.51.100.7", PASSWORD))
    for i in range(100):
        attempt(world, f"10.2.{i // 250}.{i % 250 + 1}")

    def with_cookies(header: str) -> int:
        return world.client.simulate_post(
            "/v1/session",
            json={"email": OWNER, "password": PASSWORD},
            remote_addr="198.51.100.7",
            headers={"Cookie": header},
        ).status_code

    assert with_cookies(f"cda_device={mine}; cda_device=garbage") == 200


def test_the_owners_device_has_a_bound_of_its_own(world: World) -> None:
    world.sign_up(OWNER)
    device = device_cookie(attempt(world, "198.51.100.7", PASSWORD))
    for _ in range(5):
        assert attempt(world, "198.51.100.7", device=device).status_code == 401
    assert attempt(world, "198.51.100.7", PASSWORD, device=device).status_code == 429
    assert attempt(world, "198.51.100.9", PASSWORD).status_code == 200  # another client of the owner


def test_an_ipv6_address_counts_by_its_64(world: World) -> None:
    world.sign_up(OWNER)
    for host in range(1, 6):
        assert attempt(world, f"2001:db8:1:2::{host}").status_code == 401
    assert attempt(world, "2001:db8:1:2:ffff::9", PASSWORD).status_code == 429  # the same /64
    assert attempt(world, "2001:db8:1:3::1", PASSWORD).status_code == 200  # another /64


def test_an_ipv4_client_seen_through_a_dual_stack_socket_counts_as_its_ipv4_address(world: World) -> None:
    """A listener on ``::`` reports IPv4 clients as mapped addresses (``::ffff:a.b.c.d``). Counted by their
    /64 they would all share one bucket, ``::ffff:0:0/64``, and a stranger's five guesses would hold back
    every IPv4 client of the owner's email: each counts as the IPv4 address it is, in either form."""
    world.sign_up(OWNER)
    for _ in range(5):
        assert attempt(world, "::ffff:203.0.113.9").status_code == 401
    assert attempt(world, "203.0.113.9", PASSWORD).status_code == 429  # the same client, written plainly
    assert attempt(world, "::ffff:198.51.100.7", PASSWORD).status_code == 200  # the owner, elsewhere
    assert attempt(world, "198.51.100.7", PASSWORD).status_code == 200


@pytest.mark.parametrize("address", ["", "unix:/run/community-api.sock", "not an address"])
def test_a_client_address_that_is_no_ip_address_is_counted_as_written(world: World, address: str) -> None:
    """Behind a Unix socket the peer has no IP address (and no proxy header was trusted): such clients share
    one count, as they share the proxy in front; the owner's own address is not held back by them."""
    world.sign_up(OWNER)
    for _ in range(5):
        assert attempt(world, address).status_code == 401
    assert attempt(world, address, PASSWORD).status_code == 429
    assert attempt(world, "198.51.100.7", PASSWORD).status_code == 200


def test_the_address_bound_spans_emails(world: World) -> None:
    world.sign_up(OWNER)
    for i in range(20):
        attempt(world, "203.0.113.10", email=f"guess{i}@example.com")
    assert attempt(world, "203.0.113.10", PASSWORD).status_code == 429
    assert attempt(world, "203.0.113.11", PASSWORD).status_code == 200


def test_forty_guesses_at_once_are_checked_five_times(world: World) -> None:
    world.sign_up(OWNER)
    barrier = threading.Barrier(40)
    outcomes: list[str] = []

    def guess() -> None:
        barrier.wait(10)
        try:
            accounts.sign_in(
                world.store,
                world.clock,
                accounts.Credentials(OWNER, WRONG),
                "203.0.113.40",
                device_cookies=world.deps.device_cookies,
                hasher=world.deps.password_hasher,
            )
        except ServiceError as error:
            outcomes.append(error.code)

    threads = [threading.Thread(target=guess) for _ in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(outcomes) == ["rate_limited"] * 35 + ["unauthorized"] * 5


def test_a_device_cookie_lives_180_days(world: World) -> None:
    cookies = world.deps.device_cookies
    issued = cookies.issue(OWNER, world.clock.now())
    assert cookies.device(issued, OWNER, world.clock.now()) is not None
    assert cookies.device(issued, "someone@example.com", world.clock.now()) is None
    world.clock.advance(days=181)
    assert cookies.device(issued, OWNER, world.clock.now()) is None


def test_sign_ups_refused_as_taken_are_counted_per_address() -> None:
    """With sign-up open, "this email exists" tells whether someone has an account: ten such answers an hour
    per address, then 429 (and no password hashing for it)."""
    world = build_world(signup=True)
    world.sign_up(OWNER)

    def sign_up(address: str, email: str = OWNER) -> int:
        body = {"email": email, "password": PASSWORD}
        return int(world.client.simulate_post("/v1/accounts", json=body, remote_addr=address).status_code)

    assert [sign_up("203.0.113.50") for _ in range(10)] == [409] * 10
    held = world.client.simulate_post(
        "/v1/accounts", json={"email": OWNER, "password": PASSWORD}, remote_addr="203.0.113.50"
    )
    assert held.status_code == 429 and int(held.headers["Retry-After"]) == 3600
    assert held.json["error"]["message"] == "too many sign-ups refused from this address: try again in 60 minutes"
    assert held.json["error"]["details"]["bound"] == "signup-taken"  # not counted as accounts created
    assert sign_up("203.0.113.50", "fresh@example.com") == 429  # that address, for an hour
    assert sign_up("203.0.113.51") == 409  # another address is counted on its own
    assert sign_up("203.0.113.51", "fresh@example.com") == 201
    world.clock.advance(minutes=61)
    assert sign_up("203.0.113.50", "another@example.com") == 201


def test_accounts_created_are_counted_per_address_when_sign_up_is_open() -> None:
    """Open sign-up made accounts without limit from one address (a script could make thousands, each
    then linking platform accounts): ten an hour per address (an IPv6 client by its /64), then 429."""
    world = build_world(signup=True)

    def sign_up(address: str, email: str) -> falcon.testing.Result:
        return world.client.simulate_post(
            "/v1/accounts", json={"email": email, "password": PASSWORD}, remote_addr=address
        )

    assert [sign_up("2001:db8:1:2::7", f"p{n}@example.com").status_code for n in range(10)] == [201] * 10
    held = sign_up("2001:db8:1:2::8", "p10@example.com")  # the same /64
    assert held.status_code == 429 and held.headers["Retry-After"] == "3600"
    assert held.json["error"]["message"] == "too many accounts created from this address: try again in 60 minutes"
    assert held.json["error"]["details"]["bound"] == "signup-created"
    assert world.store.count_accounts() == 10
    assert sign_up("2001:db8:1:3::1", "p10@example.com").status_code == 201  # another /64
    world.clock.advance(hours=1)
    assert sign_up("2001:db8:1:2::7", "p11@example.com").status_code == 201


def test_failed_sign_ins_are_counted_for_a_day_and_never_kept_on_the_audit_trail(world: World) -> None:
    """Strangers send them: written to the append-only audit, each failure stayed three rows for good
    (a botnet or an IPv6 range could grow the database without end). Counted a day; the trail keeps
    one line per successful sign-in, naming the account."""
    world.sign_up(OWNER)
    for n in range(40):
        assert attempt(world, f"2001:db8:{n:x}::1", email=f"guess{n}@example.com").status_code == 401
    assert [e.event for e in world.store.audit_trail() if e.event.startswith("login.")] == ["login.succeeded"]
    for _ in range(5):
        assert attempt(world, "198.51.100.1").status_code == 401
    held = attempt(world, "198.51.100.1")
    assert held.status_code == 429  # still counted
    assert held.json["error"]["message"] == "too many failed sign-ins: try again in 15 minutes"
    world.clock.advance(days=1, seconds=1)
    assert attempt(world, "198.51.100.1", password=PASSWORD).status_code == 200
    trail = [e for e in world.store.audit_trail() if e.event.startswith("login.")]
    assert [(e.event, e.subject) for e in trail] == [("login.succeeded", None)] * 2
    assert all(e.account_id for e in trail)


def test_the_per_email_bound_holds_for_an_hour(world: World) -> None:
    world.sign_up(OWNER)
    for i in range(100):
        assert attempt(world, f"10.3.{i // 250}.{i % 250 + 1}").status_code == 401
    world.clock.advance(minutes=16)  # past the pair's and the address's windows, not the email's
    held = attempt(world, "192.0.2.57", PASSWORD)
    assert held.status_code == 429 and held.headers["Retry-After"] == "3600"
    assert held.json["error"]["message"] == "too many failed sign-ins: try again in 60 minutes"
    world.clock.advance(minutes=45)
    assert attempt(world, "192.0.2.57", PASSWORD).status_code == 200


# How the core counts a client, whatever the edge hands it (the HTTP edge already unmaps and trims).
CLIENT_KEYS = [
    ("203.0.113.9", "203.0.113.9"),
    (" 203.0.113.9 ", "203.0.113.9"),
    ("::ffff:203.0.113.9", "203.0.113.9"),
    ("2001:db8:1:2::1", "2001:db8:1:2::/64"),
    ("2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"),
    (" 2001:db8:1:3::1\t", "2001:db8:1:3::/64"),
    ("", "unknown"),
    ("   ", "unknown"),
    ("unix:/run/community-api.sock", "unix:/run/community-api.sock"),
    ("x" * 100, "x" * 64),
]


@pytest.mark.parametrize(("address", "counted_as"), CLIENT_KEYS)
def test_a_client_is_counted_by_its_ipv4_address_its_ipv6_64_or_its_name_cut_short(
    address: str, counted_as: str
) -> None:
    assert guard.client_key(address) == counted_as


def test_an_email_counts_the_same_however_its_domain_is_written(world: World) -> None:
    """A domain outside ASCII has two spellings (``bücher`` and its IDNA form ``xn--bcher-kva``): guesses
    spread over both are one email's guesses, and the owner's device cookie holds for either."""
    owner = "max@bücher.example"
    world.add_account(owner)
    device = device_cookie(attempt(world, "198.51.100.7", PASSWORD, email=owner))
    for n in range(5):
        spelled = owner if n % 2 else "max@xn--bcher-kva.example"
        assert attempt(world, "203.0.113.9", email=spelled).status_code == 401
    assert attempt(world, "203.0.113.9", PASSWORD, email=owner).status_code == 429
    assert attempt(world, "203.0.113.9", PASSWORD, email="MAX@XN--BCHER-KVA.EXAMPLE").status_code == 429
    for _ in range(5):
        attempt(world, "198.51.100.7", email=owner, device=device)
    assert attempt(world, "198.51.100.7", PASSWORD, email="max@xn--bcher-kva.example", device=device).status_code == 429


def test_a_device_keeps_its_count_across_its_own_sign_ins(world: World) -> None:
    """The cookie a sign-in renews names the same device: a right password between wrong ones counts one
    attempt less, it does not start the device afresh."""
    world.sign_up(OWNER)
    device = device_cookie(attempt(world, "198.51.100.7", PASSWORD))
    for _ in range(4):
        assert attempt(world, "198.51.100.7", device=device).status_code == 401
    renewed = device_cookie(attempt(world, "198.51.100.7", PASSWORD, device=device))
    assert renewed.split(".")[1] == device.split(".")[1]  # v1.<device>.<issued>.<tag>.<mac>
    assert attempt(world, "198.51.100.7", device=renewed).status_code == 401  # the fifth wrong one that counts
    assert attempt(world, "198.51.100.7", PASSWORD, device=renewed).status_code == 429  # the device is held


def _worker(world: World, settings: Settings) -> falcon.testing.TestClient:
    """Another gunicorn worker of the same service: its own app, over the same store and limits."""
    deps = bootstrap(
        key_store=world.store,
        gateway=world.gateway,
        throttle=world.throttle,
        pace=world.pace,
        clock=world.clock,
        settings=settings,
    )
    return falcon.testing.TestClient(app_for(deps, settings))


SERVICE = Settings(mode="test", usage_flush_seconds=0, allowed_hosts=("falconframework.org",), secret="s" * 32)


def test_a_device_cookie_one_worker_gave_is_honoured_by_every_other(world: World) -> None:
    """The cookie is signed with a key from the service's secret, which every worker shares: the owner's
    browser is let through past the per-email bound whichever worker its request reaches."""
    world.sign_up(OWNER)
    first, second = _worker(world, SERVICE), _worker(world, SERVICE)
    signed_in = first.simulate_post(
        "/v1/session", json={"email": OWNER, "password": PASSWORD}, remote_addr="198.51.100.7"
    )
    device = device_cookie(signed_in)
    for i in range(100):
        assert attempt(world, f"10.0.{i // 250}.{i % 250 + 1}").status_code == 401
    body = {"email": OWNER, "password": PASSWORD}
    assert second.simulate_post("/v1/session", json=body, remote_addr="198.51.100.7").status_code == 429  # no cookie
    again = second.simulate_post(
        "/v1/session",
        json={"email": OWNER, "password": PASSWORD},
        remote_addr="198.51.100.7",
        cookies={"cda_device": device},
    )
    assert again.status_code == 200, again.text


def test_behind_a_trusted_proxy_the_forwarded_client_is_counted(world: World) -> None:
    """Every client reaches the service from the proxy's address: counting that address would let one
    stranger's failures hold back every client behind it."""
    world.sign_up(OWNER)
    proxy = "10.0.0.5"
    behind = _worker(world, attrs.evolve(SERVICE, trusted_proxies=(proxy,)))

    def through_proxy(client: str, password: str) -> falcon.testing.Result:
        body = {"email": OWNER, "password": password}
        return behind.simulate_post("/v1/session", json=body, remote_addr=proxy, headers={"X-Forwarded-For": client})

    for _ in range(5):
        assert through_proxy("203.0.113.9", WRONG).status_code == 401
    assert through_proxy("203.0.113.9", PASSWORD).status_code == 429
    assert through_proxy("198.51.100.7", PASSWORD).status_code == 200
