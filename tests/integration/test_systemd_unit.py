"""The systemd unit an operator installs (``deploy/systemd/community-api.service``, with the settings file
``deploy/systemd/community-api.env``) is valid for systemd, and what it runs serves.

There is no systemd to start it on these machines, so the test does what systemd would: reads the unit's
``Environment=`` lines and the settings file, starts ``ExecStart`` with exactly that environment (nothing
inherited; paths moved from ``/opt/community-api`` and ``/var/lib/community-api`` to this checkout and a
temporary folder, the example's placeholders filled in), listens on ``NOTIFY_SOCKET`` as ``Type=notify``
does, then stops it as ``KillMode=mixed`` does (SIGTERM to the main process only) within ``TimeoutStopSec``.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import socket
import sqlite3
import stat
import struct
import subprocess
import time
from pathlib import Path

import pytest
import requests

from adapters.platform import procfs
from adapters.settings import PREFIX, SETTING_NAMES
from scripts.processes import ROOT, free_port
from tests.sandbox_support import SandboxProcess

pytestmark = [pytest.mark.browser, pytest.mark.slow]

UNIT = ROOT / "deploy" / "systemd" / "community-api.service"
ENV_FILE = ROOT / "deploy" / "systemd" / "community-api.env"
INSTALLED = "/opt/community-api"
STATE = "/var/lib/community-api"
PUBLIC_HOST = "api.example.org"  # the example's PUBLIC_URL


def directives(text: str, section: str) -> list[tuple[str, str]]:
    """(name, value) of each line of ``[section]``, in order (names repeat: ``Environment=``)."""
    out, current = [], None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = line.strip("[]")
        elif current == section:
            name, _, value = line.partition("=")
            out.append((name.strip(), value.strip()))
    return out


def env_file(text: str) -> dict[str, str]:
    pairs = (line.partition("=") for line in text.splitlines() if line.strip() and not line.startswith("#"))
    return {name.strip(): value.strip() for name, _, value in pairs}


SERVICE = directives(UNIT.read_text(), "Service")


def one(name: str) -> str:
    [value] = [v for n, v in SERVICE if n == name]
    return value


def test_systemd_accepts_the_unit(tmp_path: Path) -> None:
    if shutil.which("systemd-analyze") is None:
        pytest.fail("systemd-analyze is missing: `make test-deps` installs Debian's systemd package")
    settings = tmp_path / "env"
    settings.write_text(ENV_FILE.read_text())
    unit = tmp_path / "community-api.service"
    unit.write_text(UNIT.read_text().replace(INSTALLED, str(ROOT)).replace("/etc/community-api/env", str(settings)))
    checked = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
    said = [line for line in (checked.stdout + checked.stderr).splitlines() if "community-api" in line]
    assert checked.returncode == 0 and not said, said or checked.stderr


def test_the_settings_file_names_only_settings_the_service_knows() -> None:
    names = set(env_file(ENV_FILE.read_text())) | {v.partition("=")[0] for n, v in SERVICE if n == "Environment"}
    settings = {name for name in names if name.startswith(PREFIX)}
    assert {f"{PREFIX}SECRET", f"{PREFIX}PLATFORM_URL", f"{PREFIX}PLATFORM_API_URL", f"{PREFIX}DB"} <= settings
    assert {name[len(PREFIX) :] for name in settings} <= set(SETTING_NAMES)
    # The JavaScript engine writes the code it runs: this hardening option would stop every browser.
    assert "MemoryDenyWriteExecute" not in dict(SERVICE)


def ready_from(listener: socket.socket, timeout: float) -> tuple[str, int]:
    """The first sd_notify message and the PID that sent it (SCM_CREDENTIALS)."""
    listener.settimeout(timeout)
    data, ancillary, _, _ = listener.recvmsg(4096, socket.CMSG_SPACE(12))
    pids = [struct.unpack("3i", cdata)[0] for level, kind, cdata in ancillary if kind == socket.SCM_CREDENTIALS]
    return data.decode(), pids[0] if pids else -1


def link_and_mint(base: str) -> str:
    """Sign in over JSON, link alice through the browser, mint a key. The cookie is sent by hand: the
    service, told it is served over https, marks it Secure, and this test speaks plain HTTP to it."""
    host = {"Host": PUBLIC_HOST}
    signed = requests.post(
        base + "/v1/session", json={"email": "ops@example.com", "password": "a long password"}, headers=host, timeout=10
    )
    assert signed.status_code == 200, signed.text
    web = {**host, "Cookie": "; ".join(f"{c.name}={c.value}" for c in signed.cookies)}
    web["X-CSRF-Token"] = signed.json()["csrfToken"]
    linked = requests.post(
        base + "/v1/connections", json={"email": "alice@sandbox.test", "password": "sandbox"}, headers=web, timeout=120
    )
    assert linked.status_code == 201, linked.text
    minted = requests.post(base + "/v1/keys", json={"name": "unit", "scopes": ["groups:read"]}, headers=web, timeout=10)
    assert minted.status_code == 201, minted.text
    return str(minted.json()["secret"])


def test_what_the_unit_starts_serves_and_stops_as_systemd_would(tmp_path: Path, sandbox: SandboxProcess) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)  # StateDirectory=, StateDirectoryMode=0700
    port = free_port()

    def moved(value: str) -> str:
        return value.replace(INSTALLED, str(ROOT)).replace(STATE, str(state))

    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}  # systemd's own; nothing else inherited
    env.update(moved(v).split("=", 1) for n, v in SERVICE if n == "Environment")  # type: ignore[misc]
    settings = env_file(ENV_FILE.read_text())
    assert settings[f"{PREFIX}SECRET"] == "@SECRET@"  # the example asks for one
    settings[f"{PREFIX}SECRET"] = secrets.token_urlsafe(32)
    # This machine's platform is the stand-in, with its own certificate key.
    settings[f"{PREFIX}PLATFORM_URL"] = sandbox.url
    settings[f"{PREFIX}PLATFORM_API_URL"] = sandbox.api_url
    settings[f"{PREFIX}BROWSER_TRUSTED_SPKI"] = ",".join(sandbox.trusted_spki)
    env.update(settings)
    notify = tmp_path / "notify"
    env["NOTIFY_SOCKET"] = str(notify)
    command = moved(one("ExecStart")).split()
    command[command.index("127.0.0.1:8000")] = f"127.0.0.1:{port}"
    assert one("Type") == "notify" and one("KillMode") == "mixed"
    stop_seconds = float(one("TimeoutStopSec"))

    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as listener:
        listener.bind(str(notify))
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        log = tmp_path / "service.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(
                command, cwd=moved(one("WorkingDirectory")), env=env, stdout=out, stderr=subprocess.STDOUT
            )
        try:
            message, sender = ready_from(listener, 60)
            assert "READY=1" in message and sender == process.pid, (message, sender)  # NotifyAccess=main
            base = f"http://127.0.0.1:{port}"
            ready = requests.get(base + "/readyz", headers={"Host": PUBLIC_HOST}, timeout=60)
            assert ready.status_code == 200, ready.text  # the database, the throttle, a browser started
            meta = requests.get(
                base + "/.well-known/oauth-authorization-server", headers={"Host": PUBLIC_HOST}, timeout=10
            )
            assert meta.json()["issuer"] == f"https://{PUBLIC_HOST}"
            # The first account, made as the deployment guide says, with the unit's environment.
            subprocess.run(
                [moved(command[0]), "accounts", "create", "ops@example.com"],
                input=b"a long password\n",
                env=env,
                check=True,
                timeout=60,
            )
            key = link_and_mint(base)
            whoami = requests.get(
                base + "/v1/whoami", headers={"Host": PUBLIC_HOST, "Authorization": f"Bearer {key}"}, timeout=60
            )
            assert whoami.status_code == 200 and whoami.json()["handle"] == "alice", whoami.text
            assert (state / "db.sqlite3").exists()
            family = procfs.descendants(process.pid)
            assert any(procfs.process_table().get(pid, ("", ""))[1] == "chromium" for pid in family)
        finally:
            started = time.monotonic()
            os.kill(process.pid, signal.SIGTERM)  # KillMode=mixed: the main process only
            try:
                process.wait(stop_seconds)
            except subprocess.TimeoutExpired:
                process.kill()
                pytest.fail(f"not stopped within TimeoutStopSec:\n{log.read_text()[-2000:]}")
    took = time.monotonic() - started
    left = [pid for pid in family if procfs.running(pid)]
    assert not left and process.returncode == 0, (left, process.returncode, log.read_text()[-2000:])
    assert not re.search(r"Traceback|ERROR", log.read_text()), log.read_text()[-3000:]
    assert took < stop_seconds


BACKUP_UNIT = ROOT / "deploy" / "systemd" / "community-api-backup.service"
BACKUP_TIMER = ROOT / "deploy" / "systemd" / "community-api-backup.timer"
BACKUPS = "/var/lib/community-api-backups"


def test_systemd_accepts_the_backup_service_and_its_timer(tmp_path: Path) -> None:
    if shutil.which("systemd-analyze") is None:
        pytest.fail("systemd-analyze is missing: `make test-deps` installs Debian's systemd package")
    settings = tmp_path / "env"
    settings.write_text(ENV_FILE.read_text())
    for source in (BACKUP_UNIT, BACKUP_TIMER):
        text = source.read_text().replace(INSTALLED, str(ROOT)).replace("/etc/community-api/env", str(settings))
        (tmp_path / source.name).write_text(text)
    units = [str(tmp_path / BACKUP_UNIT.name), str(tmp_path / BACKUP_TIMER.name)]
    checked = subprocess.run(["systemd-analyze", "verify", *units], capture_output=True, text=True, timeout=60)
    said = [line for line in (checked.stdout + checked.stderr).splitlines() if "community-api" in line]
    assert checked.returncode == 0 and not said, said or checked.stderr
    assert dict(directives(BACKUP_TIMER.read_text(), "Timer"))["Persistent"] in ("true", "yes")  # a missed day: made up


def test_what_the_backup_unit_runs_copies_the_database_and_keeps_the_newest(tmp_path: Path) -> None:
    """The backup unit's ExecStart with exactly its environment (as the service's test does), on the
    service's database: a copy named by the time lands in the backups' folder, the oldest copies beyond
    --keep go, and nothing else there is touched."""
    unit = directives(BACKUP_UNIT.read_text(), "Service")
    state, backups = tmp_path / "state", tmp_path / "backups"
    state.mkdir(mode=0o700)
    backups.mkdir(mode=0o700)

    def moved(value: str) -> str:
        return value.replace(INSTALLED, str(ROOT)).replace(BACKUPS, str(backups)).replace(STATE, str(state))

    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    env.update(moved(v).split("=", 1) for n, v in unit if n == "Environment")  # type: ignore[misc]
    settings = env_file(ENV_FILE.read_text())
    settings[f"{PREFIX}SECRET"] = secrets.token_urlsafe(32)
    env.update(settings)
    [exec_start] = [moved(v).split() for n, v in unit if n == "ExecStart"]
    made = subprocess.run(
        [exec_start[0], "accounts", "create", "ops@example.com"], input="a long password\n", env=env, text=True
    )
    assert made.returncode == 0 and (state / "db.sqlite3").exists()
    keep = int(exec_start[exec_start.index("--keep") + 1])
    older = [f"community-api-202601{day:02d}T030000Z.sqlite3" for day in range(1, keep + 3)]  # keep + 2 old copies
    for name in [*older, "notes.txt", "community-api-manual.sqlite3"]:
        (backups / name).write_bytes(b"an older copy")
    ended = subprocess.Popen(["true"])
    ended.wait()
    left = backups / f".community-api-20260101T030000Z.sqlite3.partial-{ended.pid}"  # a killed run's
    left.write_bytes(b"half a copy")
    [dir_line] = [v for n, v in unit if n == "WorkingDirectory"]
    ran = subprocess.run(exec_start, cwd=moved(dir_line), env=env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    copies = sorted(p.name for p in backups.iterdir() if re.fullmatch(r"community-api-\d{8}T\d{6}Z\.sqlite3", p.name))
    assert len(copies) == keep and copies[:-1] == older[3:]  # the three oldest went, the new copy is the last
    assert {"notes.txt", "community-api-manual.sqlite3"} <= {p.name for p in backups.iterdir()}
    assert ran.stdout.count("removed ") == 4 and "beyond the newest 14" in ran.stdout and not left.exists()
    assert f"removed {left}, a partial copy left by a run that was killed" in ran.stdout
    assert stat.S_IMODE((backups / copies[-1]).stat().st_mode) == 0o600
    with sqlite3.connect(backups / copies[-1]) as copy:
        assert copy.execute("SELECT email FROM accounts").fetchall() == [("ops@example.com",)]
