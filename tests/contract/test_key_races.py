"""Key rotation, revocation and sign-up when calls race: the same rounds on the fake (threads on one store)
and on one SQLite file (processes, each with its own store, as gunicorn workers are), released together.

What must hold (issue 14, DESIGN §2, spec §3):
- N rotations of one key at once: exactly one answers with a new secret, the others 409; at most two
  secrets of the lineage work afterwards, and every secret that was shown works; one ``key.rotated``
  audit line per successful rotation;
- a rotation and a revocation at once: the end is what one of the two orders gives, and the revoked key
  never works again;
- N sign-ups of one email at once: one account;
- OAuth client registrations, and sign-ups, from one address at once: never more than the address's
  hourly bound.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
from argon2 import PasswordHasher
from argon2.profiles import CHEAPEST

from adapters.store.sqlite_key_store import SqliteKeyStore
from community_api import accounts, keys, oauth, oauth_clients
from community_api.clock import SystemClock
from community_api.errors import Conflict, Forbidden, RateLimited, ServiceError, Unauthorized
from community_api.model import Account
from community_api.ports import KeyStore
from community_api.refusal_audit import RefusalAudit
from fakes.key_store import FakeKeyStore

SECRET = "race-secret-" + "r" * 40
ROUNDS = 12
RACERS = 6
ACCOUNT = "acc_race"
# The race is in the unit of work after the hash: a hash of the cheapest cost lines the racers up more
# tightly there than the real one (about 0.1 s each, six at once on two cores), and costs the suite no time.
HASHER = PasswordHasher.from_parameters(CHEAPEST)


# --- what each racer does (top level, so spawned processes can run them) ---------------------------------


def rotate(store: KeyStore, key_id: str) -> tuple[str, str | None]:
    try:
        issued = keys.rotate_key(store, SystemClock(), account_id=ACCOUNT, key_id=key_id)
    except Conflict:
        return "conflict", None
    return "rotated", issued.secret


def revoke(store: KeyStore, key_id: str) -> tuple[str, str | None]:
    keys.revoke_key(store, SystemClock(), account_id=ACCOUNT, key_id=key_id)
    return "revoked", None


def sign_up(store: KeyStore, email: str) -> tuple[str, str | None]:
    body = accounts.NewAccount(email, "a long enough password")
    try:
        account = accounts.create_account(store, SystemClock(), body, signup_enabled=True, hasher=HASHER)
    except Conflict:
        return "conflict", None
    return "created", account.id


def register(store: KeyStore, address: str) -> tuple[str, str | None]:
    metadata = oauth_clients.ClientMetadata(redirect_uris=["https://agent.example/cb"], client_name="Racer")
    try:
        client = oauth_clients.register_client(store, SystemClock(), metadata, address)
    except oauth_clients.RegistrationThrottled:
        return "throttled", None
    return "registered", client.id


def sign_up_from(store: KeyStore, address: str) -> tuple[str, str | None]:
    """A sign-up of an email of its own from ``address``, with sign-up open."""
    body = accounts.NewAccount(f"{uuid.uuid4().hex}@example.com", "a long enough password")
    try:
        account = accounts.create_account(
            store, SystemClock(), body, signup_enabled=True, client_address=address, hasher=HASHER
        )
    except RateLimited:
        return "throttled", None
    return "created", account.id


class SlowTokenReads:
    """The store, its read of a token taking a moment (a busy disk): every racer has read the refresh token
    unused before the first one's step uses it, the interleaving that only the step's own check can catch."""

    def __init__(self, store: KeyStore) -> None:
        self._store = store

    def get_oauth_token(self, token_hash: str) -> Any:
        found = self._store.get_oauth_token(token_hash)
        time.sleep(0.2)
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def refresh(store: KeyStore, target: str) -> tuple[str, str | None]:
    """``target``: a client's id and a refresh token of it, as ``client|token``."""
    client_id, token = target.split("|")
    slow = cast(KeyStore, SlowTokenReads(store))
    try:
        issued = oauth.refresh(slow, SystemClock(), client_id=client_id, refresh_token=token, scope=None, resource=None)
    except oauth_clients.OAuthError:
        return "refused", None
    return "refreshed", issued.refresh_token


Action = Callable[[KeyStore, str], tuple[str, str | None]]


def _racer(path: str, actions: list[Action], targets: list[str], barrier: Any, results: Any, who: int) -> None:
    store = SqliteKeyStore(path, SECRET)
    for round_, target in enumerate(targets):
        barrier.wait(timeout=60)
        try:
            outcome = actions[round_](store, target)
        except ServiceError as error:
            outcome = (f"error:{error.code}", None)
        results.put((round_, who, outcome))


# --- running rounds on the fake or on SQLite ----------------------------------------------------------


class Arena:
    """A store of the kind under test, and a way to run racers against it."""

    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.kind = kind
        self.path = str(tmp_path / "races.sqlite3")
        self.store: KeyStore = FakeKeyStore() if kind == "fake" else SqliteKeyStore(self.path, SECRET)

    def run(self, plans: list[list[Action]], targets: list[str]) -> list[list[tuple[str, str | None]]]:
        """``plans[who][round]`` is what racer ``who`` does in round ``round`` to ``targets[round]``; all
        racers start each round together. Answers ``outcomes[round][who]``."""
        racers = len(plans)
        outcomes: list[list[tuple[str, str | None]]] = [[("missing", None)] * racers for _ in targets]
        if self.kind == "fake":
            barrier = threading.Barrier(racers)

            def thread(who: int) -> None:
                for round_, target in enumerate(targets):
                    barrier.wait(timeout=60)
                    outcomes[round_][who] = plans[who][round_](self.store, target)

            threads = [threading.Thread(target=thread, args=(who,)) for who in range(racers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            return outcomes
        context = multiprocessing.get_context("spawn")
        process_barrier = context.Barrier(racers)
        results = context.Queue()
        processes = [
            context.Process(target=_racer, args=(self.path, plans[who], targets, process_barrier, results, who))
            for who in range(racers)
        ]
        for process in processes:
            process.start()
        for _ in range(racers * len(targets)):
            round_, who, outcome = results.get(timeout=120)
            outcomes[round_][who] = outcome
        for process in processes:
            process.join(30)
        return outcomes

    def mint(self, count: int) -> list[keys.IssuedKey]:
        clock = SystemClock()
        if self.store.get_account(ACCOUNT) is None:
            self.store.add_account(Account(id=ACCOUNT, email="race@example.com", created_at=clock.now()), "h")
        return [
            keys.mint_key(self.store, clock, account_id=ACCOUNT, name=f"k{i}", scopes=None, connection_id=None)
            for i in range(count)
        ]

    def works(self, secret: str) -> bool:
        try:
            keys.authenticate_key(self.store, SystemClock(), secret, RefusalAudit())
        except Unauthorized:
            return False
        return True


@pytest.fixture(params=["fake", "sqlite"])
def arena(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Arena]:
    yield Arena(request.param, tmp_path)


def test_concurrent_rotations_of_one_key_let_exactly_one_through(arena: Arena) -> None:
    minted = arena.mint(ROUNDS)
    outcomes = arena.run([[rotate] * ROUNDS for _ in range(RACERS)], [m.key.id for m in minted])
    failures = []
    for round_, (original, answers) in enumerate(zip(minted, outcomes, strict=True)):
        rotated = [secret for kind, secret in answers if kind == "rotated"]
        lineage = [original.secret, *(s for s in rotated if s)]
        live = [secret for secret in lineage if arena.works(secret)]
        shown_dead = [secret for secret in rotated if secret and not arena.works(secret)]
        audit = [e for e in arena.store.list_audit(ACCOUNT) if e.event == "key.rotated" and e.key_id == original.key.id]
        if (len(rotated), len(live), len(shown_dead), len(audit)) != (1, 2, 0, 1) or any(
            kind not in ("rotated", "conflict") for kind, _ in answers
        ):
            failures.append(
                f"round {round_}: {len(rotated)} rotations answered 201, {len(live)} secrets of the lineage work, "
                f"{len(shown_dead)} shown secrets are dead, {len(audit)} key.rotated lines, answers "
                f"{sorted(kind for kind, _ in answers)}"
            )
    assert not failures, "\n".join(failures)


def test_a_revocation_racing_a_rotation_is_never_undone(arena: Arena) -> None:
    minted = arena.mint(ROUNDS)
    outcomes = arena.run([[rotate] * ROUNDS, [revoke] * ROUNDS], [m.key.id for m in minted])
    failures = []
    for round_, (original, (rotation, revocation)) in enumerate(zip(minted, outcomes, strict=True)):
        assert revocation[0] == "revoked", revocation
        stored = arena.store.get_key(original.key.id)
        assert stored is not None
        if arena.works(original.secret) or stored.revoked_at is None:
            failures.append(f"round {round_}: the revoked key still works (revoked_at={stored.revoked_at})")
        if rotation[0] == "rotated":
            # Rotation first, then the old key's revocation: the old key dead, its successor live.
            assert rotation[1] is not None
            if not arena.works(rotation[1]):
                failures.append(f"round {round_}: a secret shown in a 201 answer does not work")
        elif rotation[0] != "conflict":  # revocation first: the rotation is refused (409)
            failures.append(f"round {round_}: the rotation answered {rotation[0]}")
    assert not failures, "\n".join(failures)


def test_concurrent_sign_ups_of_one_email_make_one_account(arena: Arena) -> None:
    emails = [f"same-{round_}@example.com" for round_ in range(ROUNDS)]
    outcomes = arena.run([[sign_up] * ROUNDS for _ in range(RACERS)], emails)
    for email, answers in zip(emails, outcomes, strict=True):
        created = [account for kind, account in answers if kind == "created"]
        assert len(created) == 1 and sorted({kind for kind, _ in answers}) in (["conflict", "created"], ["created"])
        found = arena.store.find_account_by_email(email)
        assert found is not None and found[0].id == created[0]


def test_a_key_that_was_rotated_cannot_be_brought_back_by_a_stale_copy(arena: Arena) -> None:
    """Writes state the change: ending a key only ever moves its end earlier."""
    (issued,) = arena.mint(1)
    stale = issued.key
    keys.revoke_key(arena.store, SystemClock(), account_id=ACCOUNT, key_id=stale.id)
    now = datetime.now(UTC)
    arena.store.end_key(stale.id, expires_at=now)  # a late write from a copy read before the revocation
    stored = arena.store.get_key(stale.id)
    assert stored is not None and stored.revoked_at is not None
    assert not arena.works(issued.secret)


def first_sign_up(store: KeyStore, _: str) -> tuple[str, str | None]:
    """A sign-up, with an email of its own, while only the service's first account may sign up."""
    body = accounts.NewAccount(f"{uuid.uuid4().hex}@example.com", "a long enough password")
    try:
        account = accounts.create_account(store, SystemClock(), body, signup_enabled=False, hasher=HASHER)
    except Forbidden:
        return "refused", None
    return "created", account.id


@pytest.mark.parametrize("kind", ["fake", "sqlite"])
def test_only_one_first_account_when_sign_up_is_closed(kind: str, tmp_path: Path) -> None:
    """Racers with different emails on an empty service: exactly one finds it empty, each round."""
    for round_ in range(4):
        folder = tmp_path / str(round_)
        folder.mkdir()
        arena = Arena(kind, folder)
        outcomes = arena.run([[first_sign_up] for _ in range(RACERS)], ["-"])
        assert sorted(k for k, _ in outcomes[0]) == ["created"] + ["refused"] * (RACERS - 1), (round_, outcomes)
        assert arena.store.count_accounts() == 1


def test_registrations_at_once_from_one_address_stay_within_its_bound(arena: Arena) -> None:
    """Each round an address two short of its bound sends six registrations at once: two pass."""
    addresses = [f"198.51.100.{round_}" for round_ in range(4)]
    for address in addresses:
        for _ in range(oauth_clients.MAX_REGISTRATIONS_PER_ADDRESS - 2):
            assert register(arena.store, address)[0] == "registered"
    outcomes = arena.run([[register] * len(addresses) for _ in range(RACERS)], addresses)
    for address, answers in zip(addresses, outcomes, strict=True):
        assert sorted(kind for kind, _ in answers) == ["registered"] * 2 + ["throttled"] * (RACERS - 2), address


def test_sign_ups_at_once_from_one_address_stay_within_its_bound(arena: Arena) -> None:
    """Each round an address two short of its bound of accounts created sends six sign-ups at once: two
    pass (the count is checked and added in the step that writes the account)."""
    addresses = [f"203.0.113.{round_}" for round_ in range(4)]
    limit = accounts.CREATED_PER_ADDRESS[0]
    for address in addresses:
        for _ in range(limit - 2):
            assert sign_up_from(arena.store, address)[0] == "created"
    outcomes = arena.run([[sign_up_from] * len(addresses) for _ in range(RACERS)], addresses)
    for address, answers in zip(addresses, outcomes, strict=True):
        assert sorted(kind for kind, _ in answers) == ["created"] * 2 + ["throttled"] * (RACERS - 2), address
    assert arena.store.count_accounts() == len(addresses) * limit


def a_grant(store: KeyStore, n: int) -> tuple[str, oauth.IssuedTokens]:
    """A connector's grant on ACCOUNT, through consent and the code's exchange: its client's id and tokens."""
    clock, verifier = SystemClock(), "v" * 43
    if store.get_account(ACCOUNT) is None:
        store.add_account(Account(id=ACCOUNT, email="race@example.com", created_at=clock.now()), "h")
    metadata = oauth_clients.ClientMetadata(redirect_uris=["https://agent.example/cb"], client_name="Racer")
    client = oauth_clients.register_client(store, clock, metadata, f"192.0.2.{n}")
    request = oauth_clients.AuthorizationRequest(
        client=client,
        redirect_uri="https://agent.example/cb",
        redirect_uri_sent=True,
        state=None,
        code_challenge=oauth.s256(verifier),
        requested_scopes=("posts:read",),
        resource="https://service.example/v1/mcp",
    )
    code = oauth.approve(store, clock, request, account_id=ACCOUNT, scopes=["posts:read"], connection_id=None)
    tokens = oauth.exchange_code(
        store,
        clock,
        client_id=client.id,
        code=code,
        redirect_uri=request.redirect_uri,
        code_verifier=verifier,
        resource=None,
    )
    return client.id, tokens


def test_a_refresh_token_sent_at_once_is_used_once(arena: Arena) -> None:
    """Six refreshes with one refresh token at once: one answers a new pair; the others are replays, which
    revoke the grant (OAuth 2.1 §6.1), so that nothing issued by it works afterwards."""
    grants = [a_grant(arena.store, n) for n in range(4)]
    targets = [f"{client_id}|{tokens.refresh_token}" for client_id, tokens in grants]
    outcomes = arena.run([[refresh] * len(targets) for _ in range(RACERS)], targets)
    for (_, tokens), answers in zip(grants, outcomes, strict=True):
        assert sorted(kind for kind, _ in answers) == ["refreshed"] + ["refused"] * (RACERS - 1), answers
        grant = arena.store.get_key(tokens.key.id)
        assert grant is not None and grant.revoked_at is not None
