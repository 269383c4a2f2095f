"""The service's own account passwords: how they are hashed and checked.

A password is hashed and checked in its Unicode NFKC form (NIST SP 800-63B §5.1.1.2: normalise a password
that may hold characters outside ASCII). The same word reaches us in different code points from different
keyboards: ``é`` typed as one character (U+00E9) on one, as ``e`` and a combining accent (U+0065 U+0301) on
another (Windows' Vietnamese layouts write their tones so), ``ａ`` from an input method left in full width.
Hashed as typed, such a password set on one device was "wrong" on the next.

Hashes made before this (of the password as typed) still match what was typed then; the first sign-in
that matches one writes it again in the normalised form (``PasswordCheck.needs_rehash``), as it does a hash
made with Argon2 parameters older than the hasher's (argon2-cffi's ``check_needs_rehash``).

Only these passwords: a platform account's password is passed to the platform exactly as typed.
"""

from __future__ import annotations

import unicodedata

import attrs
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError


def password_form(password: str) -> str:
    """The password as it is hashed and checked: NFKC."""
    return unicodedata.normalize("NFKC", password)


def hash_password(hasher: PasswordHasher, password: str) -> str:
    return hasher.hash(password_form(password))


@attrs.frozen
class PasswordCheck:
    matches: bool
    # The hash should be made again from this password (its normalised form), now that it is known: it was
    # made of the password as typed, or with older parameters.
    needs_rehash: bool = False


def check_password(hasher: PasswordHasher, password_hash: str, password: str) -> PasswordCheck:
    """Whether ``password`` is the one ``password_hash`` was made from (a broken hash matches nothing)."""
    form = password_form(password)
    if _verifies(hasher, password_hash, form):
        return PasswordCheck(True, needs_rehash=_old_parameters(hasher, password_hash))
    # A hash from before passwords were normalised: of the password as typed (the second check costs only
    # a password that normalisation changes, which is the caller's own input, not the account's).
    if form != password and _verifies(hasher, password_hash, password):
        return PasswordCheck(True, needs_rehash=True)
    return PasswordCheck(False)


def password_matches(hasher: PasswordHasher, password_hash: str, password: str) -> bool:
    return check_password(hasher, password_hash, password).matches


def _verifies(hasher: PasswordHasher, password_hash: str, password: str) -> bool:
    try:
        return bool(hasher.verify(password_hash, password))
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def _old_parameters(hasher: PasswordHasher, password_hash: str) -> bool:
    try:
        return hasher.check_needs_rehash(password_hash)
    except InvalidHashError:  # it verified, so it is a hash argon2 reads; never worth failing a sign-in over
        return False
