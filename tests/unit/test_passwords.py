"""The service's own passwords are compared in their NFKC form, whichever code points a keyboard wrote.

Before, a password was hashed as typed: ``é`` written as one character on one device and as ``e`` with a
combining accent on another (as Windows' Vietnamese layouts write their tones), or a letter in full width
from an input method, was "wrong email or password" on the other device.
"""

from __future__ import annotations

import unicodedata

import argon2
import pytest

from community_api import accounts
from community_api.account_lifecycle import reset_password_unchecked
from tests.unit.world_support import World

COMPOSED = "caf\u00e9 au lait, s'il vous pla\u00eet"  # é and î as one character each
DECOMPOSED = unicodedata.normalize("NFD", COMPOSED)  # each as a letter and a combining mark
FULL_WIDTH = "\uff50\uff41\uff53\uff53\uff57\uff4f\uff52\uff44 1234"  # "password 1234" from a full-width IME
EMAIL = "owner@example.com"


def sign_in_status(world: World, password: str, email: str = EMAIL) -> int:
    return world.client.simulate_post("/v1/session", json={"email": email, "password": password}).status_code


def stored(world: World, email: str = EMAIL) -> tuple[str, str]:
    """The account's id and its password hash, as kept."""
    found = world.store.find_account_by_email(email)
    assert found is not None
    return found[0].id, found[1]


def stored_hash(world: World) -> str:
    return stored(world)[1]


@pytest.mark.parametrize(
    ("set_as", "typed_as"),
    [
        (DECOMPOSED, COMPOSED),
        (COMPOSED, DECOMPOSED),
        (FULL_WIDTH, "password 1234"),
    ],
)
def test_a_password_signs_in_however_its_characters_were_written(world: World, set_as: str, typed_as: str) -> None:
    world.sign_up(EMAIL, set_as)
    assert set_as != typed_as
    assert sign_in_status(world, typed_as) == 200
    assert sign_in_status(world, set_as) == 200


def test_normalisation_makes_no_other_password_match(world: World) -> None:
    world.sign_up(EMAIL, COMPOSED)
    for other in (COMPOSED.replace("\u00e9", "e"), COMPOSED.replace("\u00e9", "\u00e8"), COMPOSED + " "):
        assert sign_in_status(world, other) == 401


def test_a_changed_or_reset_password_is_kept_normalised(world: World) -> None:
    browser = world.sign_up(EMAIL, "first password 123")
    changed = world.client.simulate_post(
        "/v1/me/password",
        headers=browser.headers(),
        json={"currentPassword": "first password 123", "newPassword": DECOMPOSED},
    )
    assert changed.status_code == 204
    assert sign_in_status(world, COMPOSED) == 200
    reset_password_unchecked(world.store, world.clock, EMAIL, COMPOSED, hasher=world.deps.password_hasher)
    assert sign_in_status(world, DECOMPOSED) == 200


def test_a_hash_of_the_password_as_typed_is_made_again_normalised_at_its_next_sign_in(world: World) -> None:
    """An account from before: its hash is of the password as it was typed (decomposed, here). It signs in
    as before; that sign-in keeps the normalised hash, and the composed spelling works from then on."""
    world.sign_up(EMAIL, "placeholder password")
    account_id, _ = stored(world)
    world.store.set_password_hash(account_id, world.deps.password_hasher.hash(DECOMPOSED))  # as it was kept
    assert sign_in_status(world, COMPOSED) == 401  # not yet: only the spelling hashed then matches
    assert sign_in_status(world, DECOMPOSED) == 200
    assert world.deps.password_hasher.verify(stored_hash(world), COMPOSED)  # the NFKC form, hashed
    assert sign_in_status(world, COMPOSED) == 200
    assert sign_in_status(world, DECOMPOSED) == 200


def test_a_hash_made_with_older_parameters_is_made_again_with_the_hashers(world: World) -> None:
    world.sign_up(EMAIL, COMPOSED)
    account_id, _ = stored(world)
    older = argon2.PasswordHasher(time_cost=2, memory_cost=16, parallelism=1)
    world.store.set_password_hash(account_id, older.hash(COMPOSED))
    assert sign_in_status(world, COMPOSED) == 200
    hasher = world.deps.password_hasher
    assert not hasher.check_needs_rehash(stored_hash(world)) and hasher.verify(stored_hash(world), COMPOSED)
    unchanged = stored_hash(world)
    assert sign_in_status(world, COMPOSED) == 200 and stored_hash(world) == unchanged  # nothing more to do


def test_a_rehash_never_puts_back_a_password_changed_meanwhile(world: World) -> None:
    """The sign-in checked the old hash; if the password changed before the new hash is written (another
    browser, the operator), the change stands."""
    world.sign_up(EMAIL, DECOMPOSED)
    account_id, _ = stored(world)
    checked = stored_hash(world)
    reset_password_unchecked(world.store, world.clock, EMAIL, "the new password", hasher=world.deps.password_hasher)
    accounts._rehash(world.store, EMAIL, account_id, checked, world.deps.password_hasher.hash(COMPOSED))
    assert sign_in_status(world, COMPOSED) == 401
    assert sign_in_status(world, "the new password") == 200


@pytest.mark.parametrize(
    "kept",
    [
        "",  # argon2 reads no hash at all (InvalidHashError)
        "$2b$12$abcdefghijklmnopqrstuuABCDEFGHIJKLMNOPQRSTUVWXYZ01234",  # another system's (bcrypt) hash
        # an argon2 hash cut short: argon2 cannot decode it (VerificationError)
        "$argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHRzYWx0$ctyHxqf1fazha4/d1h+Rrkjr4NIgTgkHyqg0TM",
    ],
    ids=["empty", "bcrypt", "cut-short"],
)
def test_a_hash_argon2_cannot_read_matches_no_password(world: World, kept: str) -> None:
    """A row imported or edited by hand holds a hash the hasher cannot read: its account answers "wrong
    email or password" to every password, as any wrong password is answered, never a server error."""
    world.sign_up(EMAIL, COMPOSED)
    account_id, _ = stored(world)
    world.store.set_password_hash(account_id, kept)
    assert sign_in_status(world, COMPOSED) == 401
    assert sign_in_status(world, kept or "anything at all") == 401
