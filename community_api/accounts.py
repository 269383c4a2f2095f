"""Accounts of the service and their web sessions (management is authenticated by web session).

Rules (DESIGN §2):
- sign-up through the API is open only while the service has no account, or when sign-up is enabled;
  the command line can always create one;
- passwords are hashed with Argon2id (argon2-cffi's defaults), in their NFKC form (``passwords``); at
  least 10 characters;
- a session is a random cookie value of which only the SHA-256 is stored, with its own CSRF token that
  unsafe management requests must echo in ``X-CSRF-Token``; sessions last 14 days;
- sign-in attempts are throttled by ``sign_in_guard``: per (email, address), per address and per email,
  or per device for a browser that signed in to that email before, so a stranger cannot lock the owner
  out; the answer to a wrong email and to a wrong password is the same.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import re
import secrets
from datetime import datetime, timedelta

import attrs
from argon2 import PasswordHasher

from community_api import sign_in_guard as guard
from community_api.commands import BadField, at_least, at_most, expects, filled
from community_api.email_address import ascii_domain, email_key
from community_api.errors import Conflict, Forbidden, RateLimited, Unauthorized
from community_api.ids import new_id
from community_api.model import Account, WebSession
from community_api.passwords import check_password, hash_password
from community_api.ports import Clock, KeyStore
from community_api.readable import is_readable
from community_api.sign_in_guard import DeviceCookies

SESSION_LIFETIME = timedelta(days=14)
MIN_PASSWORD = 10
MAX_PASSWORD = 1024
MAX_EMAIL = 320
_EMAIL = re.compile(r"[^@\s]{1,64}@[^@\s]{1,255}\.[^@\s]{1,63}")


def _email_address(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not is_readable(value):
        raise BadField(attribute.name, "may not hold control characters or bidirectional overrides")
    if not _EMAIL.fullmatch(value.strip().lower()) or ascii_domain(value.strip().rpartition("@")[2]) is None:
        raise BadField(attribute.name, "is not a valid address")


@attrs.frozen
class Credentials:
    """An email and a password, to sign in with."""

    email: str = attrs.field(
        validator=[filled, at_most(MAX_EMAIL), _email_address],
        metadata=expects("a string", description="An email address.", format="email"),
    )
    password: str = attrs.field(validator=[filled, at_most(MAX_PASSWORD)], repr=False)

    @property
    def address(self) -> str:
        """The email as accounts are kept and shown: trimmed, in lower case."""
        return self.email.strip().lower()

    @property
    def key(self) -> str:
        """The email as accounts are found (``email_address.email_key``): however it is written."""
        return email_key(self.email)


@attrs.frozen
class NewAccount(Credentials):
    """An email and a password to sign up with: the password of at least ``MIN_PASSWORD`` characters."""

    password: str = attrs.field(validator=[filled, at_most(MAX_PASSWORD), at_least(MIN_PASSWORD)], repr=False)


DEFAULT_HASHER = PasswordHasher()  # argon2-cffi's defaults: Argon2id, RFC 9106 low-memory profile


@attrs.frozen
class SignedIn:
    account: Account
    session: WebSession
    cookie_value: str
    device_cookie: str  # for the client to keep: proof of this sign-in (``sign_in_guard.DeviceCookies``)


def _hash_token(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def create_account(
    store: KeyStore,
    clock: Clock,
    credentials: NewAccount,
    *,
    signup_enabled: bool,
    client_address: str | None = None,
    hasher: PasswordHasher = DEFAULT_HASHER,
) -> Account:
    """Create an account. ``client_address`` (None from the command line) is counted, 10 an hour each,
    then 429: sign-ups refused as taken (so nobody can learn which emails have accounts in bulk), and
    accounts created (so that open sign-up cannot be used to make accounts by the thousand)."""
    closed = Forbidden("sign-up is closed on this service; ask its operator for an account")
    if not signup_enabled and store.count_accounts() > 0:
        raise closed  # before the slow hash; the step below checks again, atomically
    email, password = credentials.address, credentials.password
    where = None if client_address is None else guard.client_key(client_address)
    taken_by = None if where is None else guard.Bound("signup-taken", where, *TAKEN_PER_ADDRESS)
    created_by = None if where is None else guard.Bound("signup-created", where, *CREATED_PER_ADDRESS)
    for event, bound in ((SIGNUP_TAKEN, taken_by), (SIGNUP_CREATED, created_by)):
        if bound is not None and _count(store, clock, event, bound) >= bound.limit:
            raise _refusal(event, bound)  # before the slow hash
    password_hash = hash_password(hasher, password)  # slow on purpose: before the step, not inside it
    # One step: "no account yet" and "this email is free" still hold when the account is written, so
    # two first sign-ups at once cannot both find the service empty; the counts are checked and added in
    # it, so sign-ups sent at once cannot pass a bound.
    with store.unit_of_work() as uow:
        if not signup_enabled and uow.accounts.count_accounts() > 0:
            raise closed
        account = Account(id=new_id("acc"), email=email, created_at=clock.now())
        taken = uow.accounts.find_account_by_email(email) is not None
        event, bound = (SIGNUP_TAKEN, taken_by) if taken else (SIGNUP_CREATED, created_by)
        if bound is not None:
            if _count(uow.store, clock, event, bound) >= bound.limit:
                raise _refusal(event, bound)
            uow.attempts.add_attempt(event, bound.subject, clock.now())  # kept: the step commits
        if not taken:
            uow.accounts.add_account(account, password_hash)
        uow.commit()
    if taken:
        raise Conflict("an account with this email exists")
    return account


SIGNUP_TAKEN = "signup.taken"
SIGNUP_CREATED = "signup.created"
TAKEN_PER_ADDRESS = (10, timedelta(hours=1))
CREATED_PER_ADDRESS = (10, timedelta(hours=1))
_REFUSALS = {
    SIGNUP_TAKEN: "too many sign-ups refused from this address",
    SIGNUP_CREATED: "too many accounts created from this address",
}


def _count(store: KeyStore, clock: Clock, event: str, bound: guard.Bound) -> int:
    return store.count_attempts(event, bound.subject, bound.since(clock.now()))


def _refusal(event: str, bound: guard.Bound) -> RateLimited:
    wait = int(bound.window.total_seconds())
    return RateLimited(f"{_REFUSALS[event]}: try again in {wait // 60} minutes", wait, bound=bound.kind)


def sign_in(
    store: KeyStore,
    clock: Clock,
    credentials: Credentials,
    client_address: str,
    *,
    device_cookies: DeviceCookies,
    device_cookie: str | None = None,
    hasher: PasswordHasher = DEFAULT_HASHER,
) -> SignedIn:
    """Check the email and password, throttled by ``sign_in_guard`` (a stranger cannot lock the owner
    out: the browser that signed in before shows its device cookie). The answer carries a fresh device
    cookie for the client to keep."""
    # The key, not the email as typed: the sign-in bounds and the device cookie of an account are the same
    # whichever way its domain is written (``email_address``).
    email, password = credentials.key, credentials.password
    now = clock.now()
    device_id = device_cookies.device(device_cookie, email, now)
    bounds = guard.bounds_for(email, client_address, device_id)
    guard.admit(store, clock, bounds)
    found = store.find_account_by_email(email)
    # An unknown email is verified against a throw-away hash, so both failures take the same time.
    check = check_password(hasher, found[1] if found else _dummy_hash(hasher), password)
    if not check.matches or found is None:
        raise Unauthorized("wrong email or password")
    account = found[0]
    guard.succeeded(store, clock, bounds, account.id, detail=None if device_id else guard.NEW_BROWSER)
    if check.needs_rehash:
        _rehash(store, email, account.id, found[1], hash_password(hasher, password))
    cookie_value, session = new_session(account.id, now)
    store.add_web_session(session)
    return SignedIn(
        account=account,
        session=session,
        cookie_value=cookie_value,
        device_cookie=device_cookies.issue(email, now, device_id),
    )


# What ``secrets.token_urlsafe(32)`` makes: a session's CSRF token, as the OpenAPI document gives it.
CSRF_TOKEN_PATTERN = "^[A-Za-z0-9_-]{43}$"  # noqa: S105 - a pattern, not a token


def new_session(account_id: str, now: datetime, *, csrf_token: str | None = None) -> tuple[str, WebSession]:
    """A new session cookie's value, and the session to store for it (only the value's hash is kept);
    its CSRF token ``csrf_token``, or a new one."""
    cookie_value = secrets.token_urlsafe(32)
    session = WebSession(
        token_hash=_hash_token(cookie_value),
        account_id=account_id,
        csrf_token=csrf_token or secrets.token_urlsafe(32),
        created_at=now,
        expires_at=now + SESSION_LIFETIME,
    )
    return cookie_value, session


def _rehash(store: KeyStore, email: str, account_id: str, checked: str, new_hash: str) -> None:
    """Keep ``new_hash`` (the password just checked, hashed as passwords now are) unless the account's hash
    is no longer the one checked: a password changed meanwhile is never put back."""
    with store.unit_of_work() as uow:
        current = uow.accounts.find_account_by_email(email)
        if current is not None and current[0].id == account_id and current[1] == checked:
            uow.accounts.set_password_hash(account_id, new_hash)
            uow.commit()


@functools.cache
def _dummy_hash(hasher: PasswordHasher) -> str:
    return hasher.hash(secrets.token_urlsafe(16))


def session_account(store: KeyStore, clock: Clock, cookie_value: str | None) -> tuple[Account, WebSession]:
    """The account behind a session cookie, or ``Unauthorized``."""
    if not cookie_value or len(cookie_value) > 200:
        raise Unauthorized("sign in first: this route needs a web session")
    session = store.get_web_session(_hash_token(cookie_value))
    if session is None or session.expires_at <= clock.now():
        raise Unauthorized("sign in first: this route needs a web session")
    account = store.get_account(session.account_id)
    if account is None:
        raise Unauthorized("sign in first: this route needs a web session")
    return account, session


def check_csrf(session: WebSession, presented: str | None) -> None:
    if not presented or not hmac.compare_digest(presented.encode(), session.csrf_token.encode()):
        raise Forbidden("missing or wrong X-CSRF-Token header")


def sign_out(store: KeyStore, cookie_value: str) -> None:
    store.delete_web_session(_hash_token(cookie_value))


def create_account_unchecked(
    store: KeyStore, clock: Clock, email: str, password: str, *, hasher: PasswordHasher = DEFAULT_HASHER
) -> Account:
    """For the command line: always allowed, same rules for the email and password."""
    return create_account(store, clock, NewAccount(email, password), signup_enabled=True, hasher=hasher)
