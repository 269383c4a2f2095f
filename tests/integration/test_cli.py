"""The command line as an operator uses it: one-line refusals, accounts and keys on a real database."""

from __future__ import annotations

import contextlib
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import requests

from adapters.cli import check_state
from adapters.platform import procfs
from adapters.settings import Settings
from scripts.processes import ROOT, free_port, serving
from tests.integration.cli_support import PLATFORM, SECRET, run


def test_serve_refuses_to_start_without_a_secret(tmp_path: Path) -> None:
    result = run("serve", "--bind", "127.0.0.1:1", env={"COMMUNITY_API_DB": str(tmp_path / "db.sqlite3")})
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "COMMUNITY_API_SECRET" in lines[0]
    assert "Traceback" not in result.stderr


def test_a_bad_setting_is_one_line(tmp_path: Path) -> None:
    result = run("serve", env={"COMMUNITY_API_MODE": "staging"})
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    misspelt = run("serve", env={"COMMUNITY_API_SECRET": SECRET, "COMMUNITY_API_TRUSTED_PROXY": "127.0.0.1"})
    assert misspelt.returncode == 2 and len(misspelt.stderr.strip().splitlines()) == 1
    assert "did you mean COMMUNITY_API_TRUSTED_PROXIES?" in misspelt.stderr


def run_bytes(*args: bytes, stdin: bytes, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``run`` with arguments and standard input as bytes, which need not be UTF-8."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("COMMUNITY_API_")} | env
    answer = subprocess.run(
        [sys.executable.encode(), b"-m", b"adapters.cli", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        env=full_env,
        timeout=60,
    )
    return subprocess.CompletedProcess(answer.args, answer.returncode, answer.stdout.decode(), answer.stderr.decode())


def test_input_that_is_not_utf8_is_one_line_and_changes_nothing(tmp_path: Path) -> None:
    """A password file saved in Latin-1, a key list with a stray byte, an email typed in another encoding:
    Python kept such bytes as lone surrogates, and each command ended in a traceback (a hash, a look-up)."""
    env = {"COMMUNITY_API_DB": str(tmp_path / "db.sqlite3"), "COMMUNITY_API_SECRET": SECRET}
    latin1 = "a strong pässword".encode("latin-1") + b"\n"
    cases = [
        ((b"accounts", b"create", b"ops@example.com"), latin1, "the password piped in is not UTF-8 text (byte 10)"),
        ((b"accounts", b"create", b"op\xe9@example.com"), b"a strong password\n", "argument 3 is not UTF-8 text"),
    ]
    for args, stdin, says in cases:
        refused = run_bytes(*args, stdin=stdin, env=env)
        assert refused.returncode == 2 and refused.stderr == f"community-api: {says}: nothing " + (
            "changed\n" if "piped" in says else "was done\n"
        ), refused.stderr
    assert "no accounts yet" in run("accounts", "list", env=env).stdout  # the database made, nothing in it
    assert run("accounts", "create", "ops@example.com", stdin="a strong password\n", env=env).returncode == 0
    reset = run_bytes(b"accounts", b"set-password", b"ops@example.com", stdin=latin1, env=env)
    assert reset.returncode == 2 and "the password piped in is not UTF-8 text" in reset.stderr, reset.stderr
    revoke = run_bytes(b"keys", b"revoke", stdin=b"cda_\xffabc\n", env=env)
    assert revoke.stderr == "community-api: what was piped in is not UTF-8 text (byte 4): nothing changed\n"
    listed = run_bytes(b"keys", b"list", b"--account", b"ops\xff@example.com", stdin=b"", env=env)
    assert listed.returncode == 2 and listed.stderr == "community-api: argument 4 is not UTF-8 text: nothing was done\n"
    secret = run_bytes(b"accounts", b"list", stdin=b"", env={**env, "COMMUNITY_API_SECRET": SECRET + "\udcff"})
    assert secret.stderr == "community-api: COMMUNITY_API_SECRET is not UTF-8 text: set it again\n", secret.stderr


def test_accounts_create_says_when_it_made_a_new_database(tmp_path: Path) -> None:
    """Run from another folder than serve's, with the default relative path, it made a database serve never
    reads, and said nothing of it."""
    env = {"COMMUNITY_API_DB": "var/db.sqlite3", "COMMUNITY_API_MODE": "test"}
    first = subprocess.run(
        [sys.executable, "-m", "adapters.cli", "accounts", "create", "ops@example.com"],
        cwd=tmp_path,
        input="a strong password\n",
        capture_output=True,
        text=True,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("COMMUNITY_API_")}, **env},
        timeout=60,
    )
    assert first.returncode == 0, first.stderr
    assert first.stdout.endswith(f" created for ops@example.com in a new database, {tmp_path / 'var' / 'db.sqlite3'}\n")
    second = run(
        "accounts",
        "create",
        "two@example.com",
        stdin="a strong password\n",
        env={**env, "COMMUNITY_API_DB": str(tmp_path / "var" / "db.sqlite3")},
    )
    assert second.returncode == 0 and second.stdout.endswith(" created for two@example.com\n"), second.stderr


def test_accounts_create_and_keys_mint_then_serve(tmp_path: Path) -> None:
    env = {"COMMUNITY_API_DB": str(tmp_path / "db.sqlite3"), "COMMUNITY_API_SECRET": SECRET, **PLATFORM}
    created = run("accounts", "create", "ops@example.com", stdin="a strong password\n", env=env)
    assert created.returncode == 0, created.stderr
    assert "a strong password" not in created.stdout + created.stderr
    again = run("accounts", "create", "ops@example.com", stdin="a strong password\n", env=env)
    assert again.returncode == 2 and "exists" in again.stderr
    weak = run("accounts", "create", "weak@example.com", stdin="short\n", env=env)
    assert weak.returncode == 2 and "password" in weak.stderr
    minted = run("keys", "mint", "--email", "ops@example.com", "--scope", "posts:read", env=env)
    assert minted.returncode == 0, minted.stderr
    secret = minted.stdout.strip()
    assert secret.startswith("cda_") and len(secret) == 53
    unknown = run("keys", "mint", "--email", "nobody@example.com", env=env)
    assert unknown.returncode == 2 and "no account" in unknown.stderr
    # Named by its id, as `accounts delete` and `set-password` name one (before: "no account with the email")
    account_id = created.stdout.split()[1]
    by_id = run("keys", "mint", "--account", account_id, "--name", "by id", env=env)
    assert by_id.returncode == 0 and by_id.stdout.strip().startswith("cda_"), by_id.stderr
    unknown_id = run("keys", "mint", "--account", "acc_nothing", env=env)
    assert unknown_id.returncode == 2 and "no account with the id acc_nothing" in unknown_id.stderr
    bad_scope = run("keys", "mint", "--email", "ops@example.com", "--scope", "root", env=env)
    # Refused before anything is opened, with the scopes there are (before: "unknown scope: root" alone).
    assert bad_scope.returncode == 2 and "invalid choice: 'root'" in bad_scope.stderr
    assert "'comments:write'" in bad_scope.stderr

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with serving(
        ["-m", "adapters.cli", "serve", "--bind", f"127.0.0.1:{port}", "--workers", "2"],
        url + "/v1/openapi.json",
        env=env,
    ):
        signed = requests.post(
            url + "/v1/session",
            json={"email": "ops@example.com", "password": "a strong password"},
            headers={"X-Forwarded-Proto": "https"},
        )
        assert signed.status_code == 200
        # No trusted proxy is set: a client's X-Forwarded-Proto is not believed (gunicorn's default would).
        assert "secure" not in signed.headers["Set-Cookie"].lower()
        # No connection is linked yet: the key authenticates and the answer says what to do.
        answer = requests.get(url + "/v1/groups/any/posts", headers={"Authorization": f"Bearer {secret}"})
        assert answer.status_code == 409 and "POST /v1/connections" in answer.json()["error"]["message"]
        # The operator deletes the account while the service runs: its key stops at once, in every worker.
        deleted = run("accounts", "delete", "ops@example.com", env=env)
        assert deleted.returncode == 0, deleted.stderr
        for _ in range(4):
            refused = requests.get(url + "/v1/groups/any/posts", headers={"Authorization": f"Bearer {secret}"})
            assert refused.status_code == 401
        assert (
            requests.post(
                url + "/v1/session", json={"email": "ops@example.com", "password": "a strong password"}
            ).status_code
            == 401
        )
    missing = run("accounts", "delete", "ops@example.com", env=env)
    assert missing.returncode == 2 and "no account" in missing.stderr


def test_accounts_list_shows_each_account_with_what_it_holds(tmp_path: Path) -> None:
    """The operator who sets a password or deletes an account must know the emails; nothing secret shown."""
    env = {"COMMUNITY_API_DB": str(tmp_path / "db.sqlite3"), "COMMUNITY_API_SECRET": SECRET}
    from adapters.store.sqlite_key_store import SqliteKeyStore

    SqliteKeyStore.open(env["COMMUNITY_API_DB"], SECRET).close()  # the database a first `serve` makes
    empty = run("accounts", "list", env=env)
    assert empty.returncode == 0 and "no accounts" in empty.stdout
    for email in ("operations-team@example.com", "dev@example.com"):
        assert run("accounts", "create", email, stdin="a strong password\n", env=env).returncode == 0
    assert run("keys", "mint", "--email", "dev@example.com", env=env).returncode == 0
    assert run("keys", "mint", "--email", "dev@example.com", env=env).returncode == 0
    listed = run("accounts", "list", env=env)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.strip().splitlines()
    assert lines[0].split() == ["EMAIL", "ACCOUNT", "CREATED", "CONNECTIONS", "TO", "LINK", "AGAIN", "LIVE", "KEYS"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert set(rows) == {"operations-team@example.com", "dev@example.com"}
    assert rows["dev@example.com"][-3:] == ["0", "0", "2"]
    assert rows["operations-team@example.com"][-3:] == ["0", "0", "0"]
    # In columns however long the emails: each account id under ACCOUNT.
    assert all(line.index("acc_") == lines[0].index("ACCOUNT") for line in lines[1:])
    assert "cda_" not in listed.stdout and "argon2" not in listed.stdout


def test_keys_list_shows_an_accounts_keys_as_its_dashboard_does_and_never_a_secret(tmp_path: Path) -> None:
    env = {"COMMUNITY_API_DB": str(tmp_path / "db.sqlite3"), "COMMUNITY_API_SECRET": SECRET}
    assert run("accounts", "create", "ops@example.com", stdin="a strong password\n", env=env).returncode == 0
    none = run("keys", "list", "--account", "ops@example.com", env=env)
    assert none.returncode == 0 and none.stdout == (
        "ops@example.com has no keys: community-api keys mint --account ops@example.com\n"
    )
    secrets = []
    for name, scopes in (("nightly report", ["--scope", "posts:read"]), ("old bot", [])):
        minted = run("keys", "mint", "--account", "ops@example.com", "--name", name, *scopes, env=env)
        assert minted.returncode == 0, minted.stderr
        secrets.append(minted.stdout.strip())
    assert run("keys", "revoke", stdin=secrets[1] + "\n", env=env).returncode == 0
    listed = run("keys", "list", "--account", "ops@example.com", env=env)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["KEY", "PREFIX", "STATE", "CREATED", "(UTC)", "LAST", "USED", "(UTC)", "CONNECTION",
                                "KIND", "SCOPES", "NAME"]  # fmt: skip
    first, second = (line.split() for line in lines[1:])
    assert first[2] == "live" and first[-4:] == ["standard", "posts:read", "nightly", "report"]
    assert second[2] == "revoked" and second[-4:] == ["standard", "groups:read,posts:read,comments:read", "old", "bot"]
    assert first[1] == secrets[0][:12] + "…" and not any(secret in listed.stdout for secret in secrets)
    account_id = run("accounts", "list", env=env).stdout.splitlines()[1].split()[1]
    assert run("keys", "list", "--account", account_id, env=env).stdout == listed.stdout  # by id too
    unknown = run("keys", "list", "--account", "nobody@example.com", env=env)
    assert unknown.returncode == 2 and len(unknown.stderr.splitlines()) == 1 and not unknown.stdout

    from adapters.store.sqlite_key_store import SqliteKeyStore
    from community_api.clock import SystemClock
    from community_api.keys import rotate_key

    store = SqliteKeyStore(env["COMMUNITY_API_DB"], SECRET)
    try:  # rotated (the dashboard's Rotate): the old key works 24 hours more, and says until when
        rotated = rotate_key(store, SystemClock(), account_id=account_id, key_id=first[0])
    finally:
        store.close()
    after = {
        line.split()[0]: line.split()
        for line in run("keys", "list", "--account", account_id, env=env).stdout.splitlines()[1:]
    }
    assert re.fullmatch(r"in-grace-until-\d{4}-\d\d-\d\dT\d\d:\d\d", after[first[0]][2])
    assert after[rotated.key.id][2] == "live" and after[rotated.key.id][-2:] == ["nightly", "report"]


def test_backup_says_what_the_copy_holds(tmp_path: Path) -> None:
    env = {"COMMUNITY_API_DB": str(tmp_path / "db.sqlite3"), "COMMUNITY_API_SECRET": SECRET}
    assert run("accounts", "create", "ops@example.com", stdin="a strong password\n", env=env).returncode == 0
    for _ in range(2):
        assert run("keys", "mint", "--email", "ops@example.com", env=env).returncode == 0
    made = run("backup", str(tmp_path / "copy.sqlite3"), env=env)
    assert made.returncode == 0, made.stderr
    assert "bytes: 1 account, 2 keys, 0 connections); restoring it needs the same COMMUNITY_API_SECRET" in made.stdout
    again = run("backup", str(tmp_path / "copy.sqlite3"), env=env)
    assert again.returncode == 2 and "exists" in again.stderr and "Traceback" not in again.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ((), "backup needs a new file's PATH, or --into FOLDER (with --keep N)"),
        (("copy.sqlite3", "--into", "."), "backup takes a new file's PATH, or --into FOLDER (with --keep N), not both"),
        (("copy.sqlite3", "--keep", "3"), "--keep goes with --into FOLDER: it removes older copies from that folder"),
        (("--into", "{tmp}", "--keep", "0"), "--keep takes a number of copies from 1 to 10000, not 0"),
        (("--into", "{tmp}", "--keep", "10001"), "--keep takes a number of copies from 1 to 10000, not 10001"),
        (("--into", "{tmp}/nowhere"), "no folder {tmp}/nowhere to write the backup in"),
        (("--into", ""), "--into needs the folder to write the copies in"),
        (
            ("--into", "{tmp}/db.sqlite3"),
            "{tmp}/db.sqlite3 is not a folder: --into names the folder to write the copies in",
        ),
        # Before: a file named "copies" was written (Path drops the slash).
        (("{tmp}/copies/",), "{tmp}/copies/ names a folder: name a new file in it, or use --into FOLDER"),
    ],
    ids=[
        "neither",
        "both",
        "keep without into",
        "keep 0",
        "keep past the bound",
        "no folder",
        "empty folder",
        "a file",
        "a folder",
    ],
)
def test_backup_refuses_what_it_cannot_do_in_one_line(tmp_path: Path, args: tuple[str, ...], said: str) -> None:
    env = {"COMMUNITY_API_DB": str(tmp_path / "db.sqlite3"), "COMMUNITY_API_SECRET": SECRET}
    assert run("accounts", "create", "ops@example.com", stdin="a strong password\n", env=env).returncode == 0
    result = run("backup", *(arg.format(tmp=tmp_path) for arg in args), env=env)
    assert result.returncode == 2, result.stdout
    assert result.stderr.splitlines() == [f"community-api: {said.format(tmp=tmp_path)}"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["db.sqlite3"]  # no copy, nothing partial


def test_reseal_moves_every_platform_session_to_the_new_secret(tmp_path: Path) -> None:
    """Changing the secret without linking every connection again (docs/deployment.md): run with the new
    secret and the old one as PREVIOUS_SECRET, reseal, and the new secret alone opens every session."""
    from adapters.store.sqlite_key_store import SqliteKeyStore
    from community_api.model import CONNECTION_ACTIVE, Account, Connection

    db = str(tmp_path / "db.sqlite3")
    old = SqliteKeyStore.open(db, SECRET)
    old.add_account(Account("acc_1", "ops@example.com", datetime.now(UTC)), "argon-hash")
    for n in (1, 2):
        linked = Connection(
            f"con_{n}", "acc_1", f"u{n}", f"h{n}", f"H {n}", n == 1, CONNECTION_ACTIVE, datetime.now(UTC)
        )
        old.save_connection(linked, f"platform-session-{n}")
    old.close()
    new_secret = "the-new-secret-" + "n" * 40
    changing = {"COMMUNITY_API_DB": db, "COMMUNITY_API_SECRET": new_secret, "COMMUNITY_API_PREVIOUS_SECRET": SECRET}
    moved = run("reseal", env=changing)
    assert moved.returncode == 0, moved.stderr
    assert moved.stdout.splitlines() == [
        "2 platform sessions sealed anew under COMMUNITY_API_SECRET, 0 already under it",
        "every platform session opens under COMMUNITY_API_SECRET: COMMUNITY_API_PREVIOUS_SECRET may be removed",
    ]
    assert SECRET not in moved.stdout + moved.stderr and new_secret not in moved.stdout + moved.stderr
    after = SqliteKeyStore(db, new_secret)
    try:
        assert [after.get_platform_session(f"con_{n}") for n in (1, 2)] == ["platform-session-1", "platform-session-2"]
    finally:
        after.close()
    checked = run("reseal", env={"COMMUNITY_API_DB": db, "COMMUNITY_API_SECRET": new_secret})
    assert checked.returncode == 0 and checked.stdout.splitlines() == [
        "0 platform sessions sealed anew under COMMUNITY_API_SECRET, 2 already under it"
        " (no COMMUNITY_API_PREVIOUS_SECRET set: nothing could be moved)"
    ]
    wrong = run("reseal", env={"COMMUNITY_API_DB": db, "COMMUNITY_API_SECRET": "a-wrong-secret-" + "w" * 40})
    assert wrong.returncode == 1 and wrong.stdout.splitlines()[1:] == [
        "2 platform sessions opened under neither secret: their connections must be linked again "
        "(the dashboard's Connections page):",
        "  @h1 (con_1) of ops@example.com",
        "  @h2 (con_2) of ops@example.com",
    ]
    wrong_env = {"COMMUNITY_API_DB": db, "COMMUNITY_API_SECRET": "a-wrong-secret-" + "w" * 40}
    listed = run("accounts", "list", env=wrong_env)
    assert listed.stdout.splitlines()[1].split()[-3:] == ["2", "2", "0"]  # both to link again under that secret
    # ... and said why, so that an operator who mistyped the secret does not tell everyone to link again.
    assert listed.stderr.startswith(
        "community-api: warning: 2 of 2 stored platform sessions open under neither COMMUNITY_API_SECRET nor "
        "COMMUNITY_API_PREVIOUS_SECRET: their connections read as expired"
    )
    right_env = {"COMMUNITY_API_DB": db, "COMMUNITY_API_SECRET": new_secret}
    listed = run("accounts", "list", env=right_env)
    assert listed.stdout.splitlines()[1].split()[-3:] == ["2", "0", "0"] and listed.stderr == ""


def test_accounts_set_password_for_a_person_who_forgot_it(tmp_path: Path) -> None:
    """The service sends no mail: the operator sets the new password. It follows the sign-up rules, is
    read from standard input (never an argument: it would show in `ps`), and ends every web session."""
    from adapters.store.sqlite_key_store import SqliteKeyStore
    from community_api.accounts import DEFAULT_HASHER
    from community_api.passwords import password_matches

    env = {"COMMUNITY_API_DB": str(tmp_path / "db.sqlite3"), "COMMUNITY_API_SECRET": SECRET}
    assert run("accounts", "create", "ops@example.com", stdin="a strong password\n", env=env).returncode == 0
    weak = run("accounts", "set-password", "ops@example.com", stdin="short\n", env=env)
    assert weak.returncode == 2 and "password" in weak.stderr and len(weak.stderr.strip().splitlines()) == 1
    unknown = run("accounts", "set-password", "nobody@example.com", stdin="another strong one\n", env=env)
    assert unknown.returncode == 2 and "no account" in unknown.stderr
    done = run("accounts", "set-password", "OPS@example.com", stdin="another strong one\n", env=env)
    assert done.returncode == 0, done.stderr
    assert "another strong one" not in done.stdout + done.stderr and "ops@example.com" in done.stdout
    found = SqliteKeyStore(str(tmp_path / "db.sqlite3"), SECRET).find_account_by_email("ops@example.com")
    assert found is not None
    assert password_matches(DEFAULT_HASHER, found[1], "another strong one")
    assert not password_matches(DEFAULT_HASHER, found[1], "a strong password")
    # A line ended by CRLF (a script or file written on Windows): the carriage return is not part of the
    # password; kept, it made one that no sign-in form could send.
    assert run("accounts", "set-password", "ops@example.com", stdin="from windows 123\r\n", env=env).returncode == 0
    found = SqliteKeyStore(str(tmp_path / "db.sqlite3"), SECRET).find_account_by_email("ops@example.com")
    assert found is not None and password_matches(DEFAULT_HASHER, found[1], "from windows 123")
    # Only the line's end goes: spaces at either end are the password's, as the sign-in form sends them.
    assert run("accounts", "set-password", "ops@example.com", stdin="  spaced out 123  \n", env=env).returncode == 0
    found = SqliteKeyStore(str(tmp_path / "db.sqlite3"), SECRET).find_account_by_email("ops@example.com")
    assert found is not None and password_matches(DEFAULT_HASHER, found[1], "  spaced out 123  ")
    assert not password_matches(DEFAULT_HASHER, found[1], "spaced out 123")
    # Hashed in its NFKC form (``passwords``): typed with a combining accent, it is the one-character é's.
    decomposed = "cafe\u0301 cre\u0300me 123"
    assert run("accounts", "set-password", "ops@example.com", stdin=decomposed + "\n", env=env).returncode == 0
    found = SqliteKeyStore(str(tmp_path / "db.sqlite3"), SECRET).find_account_by_email("ops@example.com")
    assert found is not None and DEFAULT_HASHER.verify(found[1], "caf\u00e9 cr\u00e8me 123")


def at_a_terminal(
    args: list[str], env: dict[str, str], answers: list[str | bytes | Callable[[], str]]
) -> tuple[int, str]:
    """Run the command with a pseudo-terminal as its controlling terminal, as an operator types it: each
    answer is typed after a prompt ending in ": " (a callable is called then, for what happens while the
    operator reads the prompt, and answers what is typed). Answers the exit status and everything the
    terminal showed."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("COMMUNITY_API_")} | env
    pid, fd = pty.fork()
    if pid == 0:  # the child: its stdin, stdout and stderr are the terminal
        os.chdir(ROOT)
        os.execve(sys.executable, [sys.executable, "-m", "adapters.cli", *args], full_env)  # noqa: S606 - no shell on purpose
    shown = b""
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 1)
            if not ready:
                continue
            try:
                chunk = os.read(fd, 1024)
            except OSError:  # the child closed the terminal: it ended
                break
            if not chunk:
                break
            shown += chunk
            if answers and shown.endswith(b": "):  # a prompt, waiting: one answer for each
                answer = answers.pop(0)
                answer = answer() if callable(answer) else answer
                os.write(fd, (answer if isinstance(answer, bytes) else answer.encode()) + b"\n")
        else:
            os.kill(pid, signal.SIGKILL)  # still waiting for something never typed
    finally:
        os.close(fd)
        _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), shown.decode(errors="replace")


def test_a_password_typed_at_a_terminal_is_asked_twice_and_never_shown(tmp_path: Path) -> None:
    """Read with ``readline`` at a terminal, the password was echoed on the screen and nothing said that
    the command was waiting for it."""
    env = {"COMMUNITY_API_DB": str(tmp_path / "db.sqlite3"), "COMMUNITY_API_SECRET": SECRET}
    status, shown = at_a_terminal(["accounts", "create", "ops@example.com"], env, ["typed secretly", "typed secretly"])
    assert status == 0, shown
    assert "Password for ops@example.com:" in shown and "again" in shown and "created" in shown
    assert "typed secretly" not in shown
    status, shown = at_a_terminal(["accounts", "set-password", "ops@example.com"], env, ["new one here", "a typo"])
    assert status == 2 and "differ" in shown and "new one" not in shown
    from adapters.store.sqlite_key_store import SqliteKeyStore
    from community_api.accounts import DEFAULT_HASHER
    from community_api.passwords import password_matches

    found = SqliteKeyStore(str(tmp_path / "db.sqlite3"), SECRET).find_account_by_email("ops@example.com")
    assert found is not None and password_matches(DEFAULT_HASHER, found[1], "typed secretly")  # unchanged


def test_deleting_an_account_at_a_terminal_asks_for_its_email_first(tmp_path: Path) -> None:
    """A typo in the command must not erase someone's account: a person at a terminal types the email
    again. Scripts (standard input not a terminal) are not asked, as before."""
    env = {"COMMUNITY_API_DB": str(tmp_path / "db.sqlite3"), "COMMUNITY_API_SECRET": SECRET}
    assert run("accounts", "create", "ops@example.com", stdin="a strong password\n", env=env).returncode == 0
    status, shown = at_a_terminal(["accounts", "delete", "ops@example.com"], env, ["ops@example.org"])
    assert status == 2 and "Type the email to confirm" in shown and "nothing was deleted" in shown
    status, shown = at_a_terminal(["accounts", "delete", "nobody@example.com"], env, [])
    assert status == 2 and "no account" in shown and "confirm" not in shown
    # Bytes that are not UTF-8 (a terminal in Latin-1): one line, nothing deleted; a traceback before.
    status, shown = at_a_terminal(["accounts", "delete", "ops@example.com"], env, [b"ops@exampl\xe9.com"])
    assert status == 2 and "what was typed is not UTF-8 text" in shown and "Traceback" not in shown, shown
    status, shown = at_a_terminal(["accounts", "set-password", "ops@example.com"], env, [b"caf\xe9 cr\xe8me 12"])
    assert status == 2 and "what was typed is not UTF-8 text" in shown and "Traceback" not in shown, shown
    status, shown = at_a_terminal(["accounts", "delete", "ops@example.com"], env, ["OPS@example.com"])
    assert status == 0 and "deleted" in shown, shown


def test_deleting_at_a_terminal_deletes_the_account_confirmed_never_one_made_since(tmp_path: Path) -> None:
    """The prompt names the account by its email and id; while the operator reads it, that account may be
    deleted and another made with the same email (its owner signing up again). The email typed confirms the
    account shown: the new one is kept."""
    env = {"COMMUNITY_API_DB": str(tmp_path / "db.sqlite3"), "COMMUNITY_API_SECRET": SECRET}
    assert run("accounts", "create", "ops@example.com", stdin="a strong password\n", env=env).returncode == 0
    first = run("accounts", "list", env=env).stdout.splitlines()[1].split()[1]

    def meanwhile() -> str:
        assert run("accounts", "delete", first, env=env).returncode == 0  # a script: not asked
        assert run("accounts", "create", "ops@example.com", stdin="another password\n", env=env).returncode == 0
        return "ops@example.com"

    status, shown = at_a_terminal(["accounts", "delete", "ops@example.com"], env, [meanwhile])
    assert status == 2 and f"Delete ops@example.com ({first})" in shown, shown
    assert f"no account with the id {first}" in shown and "deleted:" not in shown, shown
    rows = run("accounts", "list", env=env).stdout.splitlines()[1:]
    assert [row.split()[0] for row in rows] == ["ops@example.com"] and rows[0].split()[1] != first


def test_an_account_is_named_by_its_id_too(tmp_path: Path) -> None:
    """Two accounts a file kept for one address from before schema version 10 (one made as typed, one from
    a browser) are both found by that address as the browser's: the other can only be named by its id."""
    env = {"COMMUNITY_API_DB": str(tmp_path / "db.sqlite3"), "COMMUNITY_API_SECRET": SECRET}
    assert run("accounts", "create", "ops@example.com", stdin="a strong password\n", env=env).returncode == 0
    account_id = run("accounts", "list", env=env).stdout.splitlines()[1].split()[1]
    assert account_id.startswith("acc_")
    reset = run("accounts", "set-password", account_id, stdin="another strong one\n", env=env)
    assert reset.returncode == 0 and "password of ops@example.com set" in reset.stdout, reset.stderr
    unknown = run("accounts", "delete", "acc_nobody", env=env)
    assert unknown.returncode == 2 and unknown.stderr.strip() == (
        "community-api: no account with the id acc_nobody (name an account by its email or its id)"
    )
    status, shown = at_a_terminal(["accounts", "delete", account_id], env, ["ops@example.com"])
    assert status == 0 and f"Delete ops@example.com ({account_id})" in shown and "deleted" in shown, shown
    assert "no accounts yet" in run("accounts", "list", env=env).stdout


def test_two_services_on_one_host_leave_no_control_socket_behind(tmp_path: Path) -> None:
    """gunicorn 25.1+ opens a control socket at one path per user ($XDG_RUNTIME_DIR or ~/.gunicorn) by
    default: a second service took it from the first (its commands went to the wrong service) and removed
    it on stopping. The service turns it off (gunicorn_conf.py)."""
    home, runtime = tmp_path / "home", tmp_path / "run"
    home.mkdir()
    runtime.mkdir()
    logs = []
    with contextlib.ExitStack() as services:
        for name in ("first", "second"):
            port = free_port()
            env = {
                "COMMUNITY_API_DB": str(tmp_path / f"{name}.sqlite3"),
                "COMMUNITY_API_SECRET": SECRET,
                **PLATFORM,
                "HOME": str(home),
                "XDG_RUNTIME_DIR": str(runtime),
            }
            logs.append(tmp_path / f"{name}.log")
            services.enter_context(
                serving(
                    ["-m", "adapters.cli", "serve", "--bind", f"127.0.0.1:{port}", "--workers", "1"],
                    f"http://127.0.0.1:{port}/healthz",
                    env=env,
                    log_path=logs[-1],
                )
            )
        assert list(runtime.iterdir()) == [] and list(home.iterdir()) == []
    for log in logs:
        assert "Control socket" not in log.read_text()


@pytest.fixture
def long_temp_folder() -> Iterator[str]:
    """A temporary folder of 63 characters: one too many for Chromium's socket inside it."""
    folder = tempfile.mkdtemp(prefix="t" * 50, dir="/tmp")  # noqa: S108 - its length is the point
    assert len(folder) == 63
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_serve_refuses_a_temporary_folder_too_long_for_chromium(
    tmp_path: Path, long_temp_folder: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every local browser would abort at its start ("Socket path too long"), and /readyz could only say
    that none started."""
    env = {"COMMUNITY_API_DB": str(tmp_path / "db.sqlite3"), "COMMUNITY_API_SECRET": SECRET, "TMPDIR": long_temp_folder}
    result = run("serve", "--bind", "127.0.0.1:1", env=env | PLATFORM)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"community-api: TMPDIR ({long_temp_folder}) is 63 characters"), (
        lines
    )
    assert "at most 62 characters" in lines[0]
    # With a Grid the browsers start on its nodes, in their own temporary folders.
    monkeypatch.setattr(tempfile, "tempdir", long_temp_folder)
    grid = Settings(
        mode="test", db=str(tmp_path / "grid.sqlite3"), secret=SECRET, selenium_remote_url="http://127.0.0.1:9"
    )
    check_state(grid)


def test_the_worker_class_asked_for_is_the_one_that_runs(tmp_path: Path) -> None:
    """gunicorn turns a sync worker given several threads into a gthread one, without a word; serve gave
    every worker 4 threads, so --worker-class sync ran gthread workers."""
    env = {"COMMUNITY_API_DB": str(tmp_path / "db.sqlite3"), "COMMUNITY_API_SECRET": SECRET, **PLATFORM}
    for worker_class in ("sync", "gthread"):
        port = free_port()
        log = tmp_path / f"{worker_class}.log"
        args = ["-m", "adapters.cli", "serve", "--bind", f"127.0.0.1:{port}", "--workers", "1"]
        with serving([*args, "--worker-class", worker_class], f"http://127.0.0.1:{port}/healthz", env, log):
            pass
        assert f"Using worker: {worker_class}" in log.read_text()
    refused = run("serve", "--worker-class", "sync", "--threads", "4", env=env)
    assert refused.returncode == 2 and "--threads applies to gthread workers" in refused.stderr
    assert run("serve", "--threads", "0", env=env).returncode == 2


def test_serve_says_in_its_log_what_it_runs_with(tmp_path: Path) -> None:
    """The operator reads the journal, not the environment: the first line says which settings took effect."""
    env = {"COMMUNITY_API_DB": str(tmp_path / "db.sqlite3"), "COMMUNITY_API_SECRET": SECRET, **PLATFORM}
    port = free_port()
    log = tmp_path / "serve.log"
    args = ["-m", "adapters.cli", "serve", "--bind", f"127.0.0.1:{port}", "--workers", "1"]
    with serving(args, f"http://127.0.0.1:{port}/healthz", env, log):
        pass
    first = log.read_text().splitlines()[0]
    assert first.startswith(f"community-api: starting in production mode on 127.0.0.1:{port}, 1 worker of 4 threads;")
    assert f"database {tmp_path / 'db.sqlite3'};" in first and "platform http://127.0.0.1:9 " in first
    assert SECRET not in log.read_text()
    assert "warning" not in log.read_text()


def test_serve_warns_when_the_stored_platform_sessions_do_not_open_under_its_secret(tmp_path: Path) -> None:
    """A mistyped or a changed secret (without the old one as PREVIOUS_SECRET) makes every connection read as
    expired, although nothing is lost yet: the journal says so as the service starts, with the remedy."""
    from adapters.store.sqlite_key_store import SqliteKeyStore
    from community_api.model import CONNECTION_ACTIVE, Account, Connection

    db = str(tmp_path / "db.sqlite3")
    store = SqliteKeyStore.open(db, SECRET)
    store.add_account(Account("acc_1", "ops@example.com", datetime.now(UTC)), "argon-hash")
    store.save_connection(
        Connection("con_1", "acc_1", "u1", "h1", "H", True, CONNECTION_ACTIVE, datetime.now(UTC)), "s"
    )
    store.close()
    other = "another-secret-" + "o" * 40
    for env, warned in [
        ({"COMMUNITY_API_SECRET": other}, True),
        ({"COMMUNITY_API_SECRET": other, "COMMUNITY_API_PREVIOUS_SECRET": SECRET}, False),
        ({"COMMUNITY_API_SECRET": SECRET}, False),
    ]:
        port = free_port()
        log = tmp_path / "serve.log"
        args = ["-m", "adapters.cli", "serve", "--bind", f"127.0.0.1:{port}", "--workers", "1"]
        with serving(args, f"http://127.0.0.1:{port}/healthz", {"COMMUNITY_API_DB": db, **env, **PLATFORM}, log):
            pass
        said = log.read_text()
        assert ("1 of 1 stored platform session opens under neither COMMUNITY_API_SECRET" in said) is warned, env
        assert SECRET not in said and other not in said


def test_serve_removes_the_browser_profiles_a_service_or_a_worker_killed_outright_left(tmp_path: Path) -> None:
    """A service killed outright (OOM, a power cut) leaves its browsers' profiles, with the platform's
    cookies, in the temporary folder: the next start removes those whose worker and browser are gone, and
    says so; so does the master when one of its workers is killed; a folder of something else is left."""
    from adapters.platform.orphans import PROFILE_PREFIX

    temp = Path(tempfile.mkdtemp(prefix="cda-t-", dir="/tmp"))  # short: Chromium's socket lives under it
    dead = subprocess.Popen(["true"])  # a process id that no longer runs
    dead.wait()
    left = temp / f"{PROFILE_PREFIX}w{dead.pid}-abandoned"
    (left / "Default").mkdir(parents=True)
    (left / "Default" / "Cookies").write_bytes(b"the platform's session")
    hours_ago = time.time() - 2 * 3600  # no Chromium lock in it: only an old one is taken for abandoned
    os.utime(left, (hours_ago, hours_ago))
    other = temp / "someone-elses-folder"
    other.mkdir()
    port = free_port()
    log = tmp_path / "serve.log"
    env = {"COMMUNITY_API_DB": str(tmp_path / "db.sqlite3"), "COMMUNITY_API_SECRET": SECRET, "TMPDIR": str(temp)}
    args = ["-m", "adapters.cli", "serve", "--bind", f"127.0.0.1:{port}", "--workers", "1"]
    try:
        with serving(args, f"http://127.0.0.1:{port}/healthz", {**env, **PLATFORM}, log) as master:
            assert not left.exists() and other.is_dir()
            # And when a worker is killed outright: the master sweeps again as it learns the worker ended.
            (worker,) = procfs.children(master.pid)
            again = temp / f"{PROFILE_PREFIX}w{dead.pid}-again"
            again.mkdir()
            os.utime(again, (hours_ago, hours_ago))
            os.kill(worker, signal.SIGKILL)
            deadline = time.monotonic() + 20
            while again.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not again.exists() and other.is_dir()
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    said = log.read_text()
    assert "removed 1 browser profiles whose browsers had ended" in said
    assert (
        f"worker {worker} ended without closing its browsers: ended 0 drivers and their 0 processes, removed 1" in said
    )


def test_keys_revoke_ends_leaked_keys_given_by_value(tmp_path: Path) -> None:
    """The key's shape is there so that secret scanners find leaked keys; the operator who gets such a
    report had no way to act on it without the owner's dashboard password."""
    from adapters.store.sqlite_key_store import SqliteKeyStore
    from community_api.clock import SystemClock
    from community_api.errors import Unauthorized
    from community_api.keys import authenticate_key, new_secret
    from community_api.refusal_audit import RefusalAudit

    env = {"COMMUNITY_API_DB": str(tmp_path / "db.sqlite3"), "COMMUNITY_API_SECRET": SECRET}
    assert run("accounts", "create", "dev@example.com", stdin="a strong password\n", env=env).returncode == 0
    leaked = run("keys", "mint", "--email", "dev@example.com", "--name", "ci token", env=env).stdout.strip()
    kept = run("keys", "mint", "--email", "dev@example.com", env=env).stdout.strip()
    unknown = new_secret("cda_")
    done = run("keys", "revoke", stdin=f"{leaked}\n\n{unknown}\nnot-a-key\n", env=env)
    assert done.returncode == 1, done.stderr  # one value was no key of ours
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith(leaked[:12]) and "'ci token'" in lines[0] and "dev@example.com revoked" in lines[0]
    assert "no key has this value" in lines[1] and "not an API key" in lines[2]
    assert leaked not in done.stdout and unknown not in done.stdout
    store = SqliteKeyStore(str(tmp_path / "db.sqlite3"), SECRET)
    with pytest.raises(Unauthorized):
        authenticate_key(store, SystemClock(), leaked, RefusalAudit())
    assert authenticate_key(store, SystemClock(), kept, RefusalAudit()).name != "ci token"
    again = run("keys", "revoke", stdin=leaked + "\n", env=env)
    assert again.returncode == 0 and "already ended" in again.stdout
    # Each way a value can fail makes the run fail, alone too: a scanner's pipeline must not read it as done.
    for alone in ("not-a-key", unknown):
        assert run("keys", "revoke", stdin=alone + "\n", env=env).returncode == 1, alone
    nothing = run("keys", "revoke", stdin="", env=env)
    assert nothing.returncode == 2 and "no key given" in nothing.stderr
    # COMMUNITY_API_DB forgotten: an empty database (a service's that has no accounts yet) is said to be
    # one, not "no key has this value".
    elsewhere = {**env, "COMMUNITY_API_DB": str(tmp_path / "other.sqlite3")}
    SqliteKeyStore.open(elsewhere["COMMUNITY_API_DB"], SECRET).close()
    wrong = run("keys", "revoke", stdin=leaked + "\n", env=elsewhere)
    assert wrong.returncode == 2 and "has no accounts" in wrong.stderr and "COMMUNITY_API_DB" in wrong.stderr


def test_a_leaked_key_typed_at_a_terminal_is_not_shown(tmp_path: Path) -> None:
    env = {"COMMUNITY_API_DB": str(tmp_path / "db.sqlite3"), "COMMUNITY_API_SECRET": SECRET}
    assert run("accounts", "create", "dev@example.com", stdin="a strong password\n", env=env).returncode == 0
    leaked = run("keys", "mint", "--email", "dev@example.com", env=env).stdout.strip()
    # A byte that is not UTF-8 (a terminal in Latin-1): one line; a traceback before.
    status, shown = at_a_terminal(["keys", "revoke"], env, [leaked.encode() + b"\xe9"])
    assert status == 2 and "what was typed is not UTF-8 text" in shown and "Traceback" not in shown, shown
    status, shown = at_a_terminal(["keys", "revoke"], env, [leaked])
    assert status == 0, shown
    assert "The leaked key (not shown):" in shown and "revoked" in shown and leaked not in shown


def test_the_metrics_files_live_in_shared_memory_not_on_the_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """prometheus_client writes sparse files through a mapping: on a full disk a new value's first write
    would kill the worker (SIGBUS). The folder `serve` makes for them is in /dev/shm, and goes with it."""
    shm = Path("/dev/shm")  # gunicorn_conf.SHARED_MEMORY (importing that module here would set the variable)
    if not shm.is_dir():
        pytest.skip("this system has no /dev/shm")
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    before = set(shm.glob("community-api-metrics-*"))
    port = free_port()
    env = {"COMMUNITY_API_DB": str(tmp_path / "db.sqlite3"), "COMMUNITY_API_SECRET": SECRET, **PLATFORM}
    with serving(
        ["-m", "adapters.cli", "serve", "--bind", f"127.0.0.1:{port}", "--workers", "1"],
        f"http://127.0.0.1:{port}/healthz",
        env=env,
        log_path=tmp_path / "serve.log",
    ) as service:
        assert requests.get(f"http://127.0.0.1:{port}/v1/whoami", timeout=10).status_code == 401  # counted
        # This service's folder: the one holding its worker's files (prometheus_client names them by PID).
        # Another test's service may be making its own meanwhile (`make test` runs two at once).
        workers = procfs.children(service.pid)
        new = set(shm.glob("community-api-metrics-*")) - before
        [made] = [folder for folder in new if any(any(folder.glob(f"*_{pid}.db")) for pid in workers)]
    assert not made.exists()


def test_serve_in_production_needs_the_platforms_address(tmp_path: Path) -> None:
    """Its default is the stand-in's loopback address: a real service left on it started, and failed every
    link as "platform unavailable". The account commands never need it."""
    env = {"COMMUNITY_API_DB": str(tmp_path / "db.sqlite3"), "COMMUNITY_API_SECRET": SECRET}
    refused = run("serve", "--bind", "127.0.0.1:1", env=env)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "COMMUNITY_API_PLATFORM_URL must be set to the platform's web address" in refused.stderr
    assert run("accounts", "list", env=env).returncode == 0
