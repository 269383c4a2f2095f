"""What a person whose password leaked needs: change it, end every session, or delete the account.

Rules (issue 17):
- a password change needs the current password (403 and nothing changed when wrong); the new one follows
  the sign-up rules; every other web session of the account ends, and the one that made the change goes on
  under a new cookie (OWASP: a session id is renewed when its privileges change): a copy of its old
  cookie, taken by whoever the owner is changing the password against, is signed out with the rest. Its
  CSRF token is kept, so that a JSON client goes on with the token it holds (the answer is a 204, with no
  body to carry a new one); the token alone is worth nothing without a session cookie;
- "sign out everywhere" ends every web session of the account, this one included; API keys are kept;
- deleting the account needs its password (403 and nothing deleted when wrong or missing) and is one unit
  of work: every key and OAuth grant is revoked (REST and MCP answer 401 at once in every worker), the
  connections are removed with their platform sessions erased, the web sessions end, and the account goes,
  so that its email may sign up afresh and sees nothing of the old account. The audit keeps a line
  naming the account's id only, never its email;
- the operator may set a forgotten password from the command line (the service sends no mail): the
  new one follows the sign-up rules, every web session of the account ends (whoever held the old password
  may be signed in), API keys are kept;
- each writes an audit line, without secrets;
- the password asked by a change or a deletion cannot be guessed through a session: a session cookie taken
  from a browser acts as the account, and the password it lacks is what would let it sign the owner out
  (a change) or erase everything (a deletion). Wrong passwords are counted on the session that sent them
  (``sign_in_guard``'s one-step count, as sign-ins are): five in 15 minutes, then 429 with ``Retry-After``
  before any password is checked, the right one included. Counted per session, not per account, so that
  whoever holds a session cannot hold back the owner's own; "sign out everywhere" ends the session and its
  guesses with it. Each wrong password leaves an audit line, so the owner sees the guessing.
"""

from __future__ import annotations

from datetime import timedelta

import attrs
from argon2 import PasswordHasher

from community_api import idempotency
from community_api import sign_in_guard as guard
from community_api.accounts import DEFAULT_HASHER, MAX_PASSWORD, MIN_PASSWORD, new_session
from community_api.commands import at_least, at_most, blank_as_none, filled
from community_api.connections import count_to_link_again
from community_api.errors import Forbidden, NotFound, Unauthorized
from community_api.model import KEY_CONNECTOR, Account, AuditEvent, WebSession
from community_api.passwords import hash_password, password_matches
from community_api.ports import Clock, KeyStore

WRONG_PASSWORD = "the password is wrong"  # noqa: S105 - a message, not a password
# The counted events of a password asked again (``guard.admit``): a try, and a right one, which no longer counts.
PASSWORD_CHECK_EVENTS = ("password.check", "password.check_passed")
PASSWORD_CHECKS_PER_SESSION = (5, timedelta(minutes=15))
PASSWORD_REFUSED = "account.password_refused"  # noqa: S105 - the audit line of a wrong one, not a password


@attrs.frozen
class PasswordChange:
    """The current password (proof) and the new one (the sign-up rules)."""

    current_password: str = attrs.field(validator=[filled, at_most(MAX_PASSWORD)], repr=False)
    new_password: str = attrs.field(validator=[filled, at_most(MAX_PASSWORD), at_least(MIN_PASSWORD)], repr=False)


@attrs.frozen
class PasswordReset:
    """A new password set by the operator (the sign-up rules), no proof asked."""

    password: str = attrs.field(validator=[filled, at_most(MAX_PASSWORD), at_least(MIN_PASSWORD)], repr=False)


@attrs.frozen
class AccountDeletion:
    """The account's password, without which nothing is deleted."""

    password: str | None = attrs.field(
        default=None, converter=blank_as_none, validator=at_most(MAX_PASSWORD), repr=False
    )


def _check_password(
    store: KeyStore, clock: Clock, account: Account, session: WebSession, password: str, hasher: PasswordHasher
) -> None:
    """``Forbidden`` when ``password`` is not the account's; ``RateLimited`` when the session gave five wrong
    ones in 15 minutes (counted before the slow check, so guesses sent at once cannot pass the bound)."""
    bounds = (guard.Bound("session", session.token_hash, *PASSWORD_CHECKS_PER_SESSION),)
    guard.admit(store, clock, bounds, events=PASSWORD_CHECK_EVENTS, refusal="too many wrong passwords")
    found = store.find_account_by_email(account.email)
    if found is None or found[0].id != account.id or not password_matches(hasher, found[1], password):
        with store.unit_of_work() as uow:
            uow.audit.add_audit(AuditEvent(at=clock.now(), event=PASSWORD_REFUSED, account_id=account.id))
            uow.commit()
        raise Forbidden(WRONG_PASSWORD)
    guard.succeeded(store, clock, bounds, account.id, event=PASSWORD_CHECK_EVENTS[1], trail=False)


def change_password(
    store: KeyStore,
    clock: Clock,
    account: Account,
    session: WebSession,
    change: PasswordChange,
    *,
    hasher: PasswordHasher = DEFAULT_HASHER,
) -> str:
    """Change the password; answer the value of the session cookie that replaces ``session``'s."""
    _check_password(store, clock, account, session, change.current_password, hasher)
    new_hash = hash_password(hasher, change.new_password)  # slow on purpose: before the step, not inside it
    cookie_value, renewed = new_session(account.id, clock.now(), csrf_token=session.csrf_token)
    with store.unit_of_work() as uow:
        if uow.accounts.get_web_session(session.token_hash) is None:
            # Ended while the password was checked ("sign out everywhere" from another browser): the request
            # acts as if it came after, as a signed-out one, and no session comes back to life.
            raise Unauthorized("sign in first: this route needs a web session")
        uow.accounts.set_password_hash(account.id, new_hash)
        uow.accounts.delete_web_sessions(account.id)
        uow.accounts.add_web_session(renewed)
        uow.audit.add_audit(AuditEvent(at=clock.now(), event="account.password_changed", account_id=account.id))
        uow.commit()
    return cookie_value


def reset_password_unchecked(
    store: KeyStore, clock: Clock, name: str, new_password: str, *, hasher: PasswordHasher = DEFAULT_HASHER
) -> Account:
    """For the operator's command line: no current password asked. Every web session of the account
    ends; its keys are kept. ``name`` as ``account_named`` reads it: ``NotFound`` for an unknown one,
    ``InvalidRequest`` for a weak password."""
    reset = PasswordReset(new_password)
    account = account_named(store, name)
    new_hash = hash_password(hasher, reset.password)  # slow on purpose: before the step, not inside it
    with store.unit_of_work() as uow:
        uow.accounts.set_password_hash(account.id, new_hash)
        uow.accounts.delete_web_sessions(account.id)
        uow.audit.add_audit(AuditEvent(at=clock.now(), event="account.password_reset", account_id=account.id))
        uow.commit()
    return account


def sign_out_everywhere(store: KeyStore, clock: Clock, account: Account) -> None:
    with store.unit_of_work() as uow:
        uow.accounts.delete_web_sessions(account.id)
        uow.audit.add_audit(AuditEvent(at=clock.now(), event="account.signed_out_everywhere", account_id=account.id))
        uow.commit()


def delete_account(
    store: KeyStore,
    clock: Clock,
    account: Account,
    session: WebSession,
    deletion: AccountDeletion,
    *,
    hasher: PasswordHasher = DEFAULT_HASHER,
) -> None:
    if deletion.password is None:
        raise Forbidden("give the account's password to delete it")
    _check_password(store, clock, account, session, deletion.password, hasher)
    _erase(store, clock, account)


@attrs.frozen
class AccountSummary:
    """What the operator's ``accounts list`` shows of an account: nothing secret."""

    account: Account
    connections: int
    live_keys: int
    # Connections whose platform session has expired, or whose token says it ends within a month or has
    # ended (``connections.needs_linking_again``): the operator can tell their owners before their keys stop.
    to_link_again: int


def account_summaries(store: KeyStore, clock: Clock) -> list[AccountSummary]:
    """Every account, oldest first, with how many connections and live keys it holds, and how many of its
    connections need linking again."""
    now = clock.now()
    summaries = []
    for account in store.list_accounts():
        linked = store.list_connections(account.id)
        summaries.append(
            AccountSummary(
                account,
                len(linked),
                sum(1 for key in store.list_keys(account.id) if key.is_live(now)),
                count_to_link_again(linked, now),
            )
        )
    return summaries


def delete_account_unchecked(store: KeyStore, clock: Clock, name: str) -> Account:
    """For the operator's command line: no password asked. ``name`` as ``account_named`` reads it."""
    account = account_named(store, name)
    _erase(store, clock, account)
    return account


def account_named(store: KeyStore, name: str) -> Account:
    """The account the operator names: by its email (found however its domain is written), or by its id
    (``acc_…``, as ``accounts list`` shows it). The id is the one way to name either of two accounts that
    a file kept for one address from before schema version 10 or 11 (``email_address``): their email finds
    one."""
    name = name.strip()
    if "@" not in name:
        account = store.get_account(name)
        if account is None:
            raise NotFound(f"no account with the id {name} (name an account by its email or its id)")
        return account
    found = store.find_account_by_email(name)
    if found is None:
        raise NotFound(f"no account with the email {name}")
    return found[0]


def _erase(store: KeyStore, clock: Clock, account: Account) -> None:
    now = clock.now()
    with store.unit_of_work() as uow:
        for key in uow.keys.list_keys(account.id):
            uow.keys.end_key(key.id, revoked_at=now)
            if key.kind == KEY_CONNECTOR:
                uow.oauth.delete_oauth_tokens(key.id)
        uow.connections.delete_connections(account.id)
        uow.idempotency.forget_idempotency(idempotency.account_prefix(account.id))  # what it posted and sent
        uow.accounts.delete_account(account.id)
        uow.audit.add_audit(AuditEvent(at=now, event="account.deleted", account_id=account.id))
        uow.commit()
