"""The key commands on what binds a key: ``keys mint --connection`` (a key bound to one linked platform
account) and the OAuth grants a connector holds (``keys list`` shows them, ``keys revoke`` ends one by a
leaked token), on a real database."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from adapters.store.sqlite_key_store import SqliteKeyStore
from community_api.clock import SystemClock
from community_api.errors import Unauthorized
from community_api.model import CONNECTION_ACTIVE, Connection
from community_api.oauth import IssuedTokens, approve, authenticate_bearer, exchange_code, s256
from community_api.oauth_clients import (
    AuthorizationParams,
    ClientMetadata,
    check_authorization_request,
    register_client,
)
from community_api.refusal_audit import RefusalAudit
from tests.integration.cli_support import SECRET, run

RESOURCE = "http://127.0.0.1:8000/v1/mcp"
REDIRECT = "http://127.0.0.1:9/callback"


def _account(env: dict[str, str], email: str) -> str:
    """A new account's id, made as an operator makes one."""
    assert run("accounts", "create", email, stdin="a strong password\n", env=env).returncode == 0
    rows = run("accounts", "list", env=env).stdout.splitlines()[1:]
    return next(row.split()[1] for row in rows if row.split()[0] == email)


def _keys(env: dict[str, str], account: str) -> dict[str, list[str]]:
    """``keys list``'s rows by key id, each split in its columns."""
    listed = run("keys", "list", "--account", account, env=env)
    assert listed.returncode == 0, listed.stderr
    return {line.split()[0]: line.split() for line in listed.stdout.splitlines()[1:]}


def _link(db: str, connection_id: str, account_id: str) -> None:
    store = SqliteKeyStore(db, SECRET)
    try:
        linked = Connection(
            connection_id, account_id, "u1", "alice", "Alice", True, CONNECTION_ACTIVE, datetime.now(UTC)
        )
        store.save_connection(linked, "platform-session")
    finally:
        store.close()


def _grant(db: str, account_id: str) -> IssuedTokens:
    """An OAuth grant as a connector gets one: registered, approved by the person, its code redeemed."""
    store, clock = SqliteKeyStore(db, SECRET), SystemClock()
    try:
        metadata = ClientMetadata(redirect_uris=[REDIRECT], client_name="agent desk")
        client = register_client(store, clock, metadata, "127.0.0.1")
        verifier = "v" * 43
        params = AuthorizationParams(response_type="code", code_challenge=s256(verifier), code_challenge_method="S256")
        request = check_authorization_request(client, REDIRECT, params, RESOURCE)
        code = approve(store, clock, request, account_id=account_id, scopes=["posts:read"], connection_id=None)
        return exchange_code(
            store, clock, client_id=client.id, code=code, redirect_uri=None, code_verifier=verifier, resource=None
        )
    finally:
        store.close()


def test_a_key_minted_for_a_connection_is_bound_to_it_and_only_to_ones_own(tmp_path: Path) -> None:
    db = str(tmp_path / "db.sqlite3")
    env = {"COMMUNITY_API_DB": db, "COMMUNITY_API_SECRET": SECRET}
    mine, theirs = _account(env, "ops@example.com"), _account(env, "other@example.com")
    _link(db, "con_mine", mine)
    _link(db, "con_theirs", theirs)
    minted = run("keys", "mint", "--account", "ops@example.com", "--connection", "con_mine", "--name", "bot", env=env)
    assert minted.returncode == 0, minted.stderr
    key_id = minted.stderr.split()[1]
    assert _keys(env, mine)[key_id][-4:] == ["con_mine", "standard", "groups:read,posts:read,comments:read", "bot"]
    for connection in ("con_theirs", "con_nothing"):
        refused = run("keys", "mint", "--account", "ops@example.com", "--connection", connection, env=env)
        assert refused.returncode == 2 and refused.stdout == "", refused.stdout  # no key printed
        assert refused.stderr == "community-api: no such connection\n"
    assert list(_keys(env, mine)) == [key_id]  # nothing minted by the refusals


@pytest.mark.parametrize("pad", ["", " \t"], ids=["as-is", "indented"])
@pytest.mark.parametrize("leaked", ["access_token", "refresh_token"])
def test_a_connectors_grant_is_listed_and_ended_by_a_leaked_token(tmp_path: Path, leaked: str, pad: str) -> None:
    """A connector's grant is a key of the account (``keys list``: no display prefix, kind ``connector``);
    either of its tokens, reported leaked, ends the grant and with it every token of it. A report that
    indents the value (a scanner's, pasted) is read as the token, not as a key no one has."""
    db = str(tmp_path / "db.sqlite3")
    env = {"COMMUNITY_API_DB": db, "COMMUNITY_API_SECRET": SECRET}
    account = _account(env, "ops@example.com")
    tokens = _grant(db, account)
    row = _keys(env, account)[tokens.key.id]
    assert row[1:3] == ["-", "live"] and row[-4:] == ["connector", "posts:read", "agent", "desk"]
    value = getattr(tokens, leaked)
    done = run("keys", "revoke", stdin=pad + value + pad + "\n", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == f"{value[:12]}…: key {tokens.key.id} ('agent desk') of ops@example.com revoked\n"
    assert tokens.access_token not in done.stdout + done.stderr and tokens.refresh_token not in done.stdout
    assert _keys(env, account)[tokens.key.id][2] == "revoked"
    store = SqliteKeyStore(db, SECRET)
    try:
        with pytest.raises(Unauthorized):
            authenticate_bearer(store, SystemClock(), tokens.access_token, RESOURCE, RefusalAudit())
    finally:
        store.close()
