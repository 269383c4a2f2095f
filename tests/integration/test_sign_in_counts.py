"""What a stranger's guesses leave in the database: counts under hashed subjects, never the email guessed or
the address it came from (``sign_in_guard``). A database copied off the box (a backup, a stolen disk) must
not tell which emails strangers tried, or who tried them."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from argon2 import PasswordHasher
from argon2.profiles import CHEAPEST

from adapters.store.sqlite_key_store import SqliteKeyStore
from community_api import accounts
from community_api.errors import RateLimited, Unauthorized
from community_api.sign_in_guard import DeviceCookies
from fakes.clock import FakeClock

SECRET = "service-secret-for-tests-0123456789"
FAST = PasswordHasher.from_parameters(CHEAPEST)  # as the service hashes in test mode (adapters/wiring.py)
OWNER, OWNER_PASSWORD = "owner@example.com", "correct horse battery"
GUESSED = "victim.guessed@example.org"
STRANGER = "203.0.113.77"


@pytest.fixture
def db_path(tmp_path: Path) -> str:
    return str(tmp_path / "keys.db")


@pytest.fixture
def store(db_path: str) -> Iterator[SqliteKeyStore]:
    s = SqliteKeyStore(db_path, SECRET)
    yield s
    s.close()


def every_value(db_path: str) -> str:
    """Every row of every table, as text: what anyone holding the file can read."""
    with closing(sqlite3.connect(db_path)) as db:
        return "\n".join(db.iterdump())


def test_guesses_leave_no_email_or_address_in_the_database(store: SqliteKeyStore, db_path: str) -> None:
    clock = FakeClock()
    cookies = DeviceCookies(SECRET.encode())
    accounts.create_account_unchecked(store, clock, OWNER, OWNER_PASSWORD, hasher=FAST)
    for email in (GUESSED, OWNER):
        for _ in range(5):
            with pytest.raises(Unauthorized):
                accounts.sign_in(
                    store,
                    clock,
                    accounts.Credentials(email, "wrong password"),
                    STRANGER,
                    device_cookies=cookies,
                    hasher=FAST,
                )
        with pytest.raises(RateLimited):  # counted: the sixth is held back
            accounts.sign_in(
                store,
                clock,
                accounts.Credentials(email, OWNER_PASSWORD),
                STRANGER,
                device_cookies=cookies,
                hasher=FAST,
            )
    dump = every_value(db_path)
    assert OWNER in dump  # the account itself, of course
    assert GUESSED not in dump and "victim" not in dump
    assert STRANGER not in dump
    # Each bound of each attempt is a subject of its own: the pair, the address and the email.
    with closing(sqlite3.connect(db_path)) as db:
        tables = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        subjects = {
            subject
            for table in tables
            if "subject" in [column[1] for column in db.execute(f"PRAGMA table_info({table})")]
            for (subject,) in db.execute(f"SELECT subject FROM {table} WHERE subject LIKE 'login-%'")  # noqa: S608
        }
    kinds = sorted({subject.split(":")[0] for subject in subjects})
    assert kinds == ["login-addr", "login-email", "login-pair"]
    assert len(subjects) == 5  # two pairs, one address, two emails
