"""``community-api serve`` and where it listens: flags gunicorn would take badly, refused in one line before
anything starts; a socket passed by a supervisor (``--bind fd://N``) or by systemd's socket activation,
served on and named in the start-up line."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from scripts.processes import ROOT, stop, wait_for_http
from tests.integration.cli_support import PLATFORM, SECRET, run


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--workers", "0"), "--workers must be at least 1"),  # before: gunicorn listened, nothing answered
        (("--timeout", "-5"), "--timeout must be 0"),
        (("--timeout", "-1"), "--timeout must be 0"),
        (("--bind", "127.0.0.1:99999"), "--bind takes HOST:PORT (a port from 1 to 65535)"),  # before: a traceback
        (("--bind", "127.0.0.1:65536"), "--bind takes HOST:PORT (a port from 1 to 65535)"),
        (("--bind", "127.0.0.1:0"), "--bind takes HOST:PORT (a port from 1 to 65535)"),  # gunicorn: any free port
        (("--bind", "127.0.0.1:http"), "--bind takes HOST:PORT"),
        (("--bind", "127.0.0.1:"), "--bind takes HOST:PORT (a port from 1 to 65535)"),
        (("--bind", "127.0.0.1:\u00b2"), "--bind takes HOST:PORT"),  # a digit to str.isdigit(), not to int()
        (("--bind", ":8000"), "--bind takes HOST:PORT"),
        (("--bind", "unix:"), "--bind unix:PATH needs the socket's path"),  # before: 5 s of retries
        (("--bind", "unix:/nonexistent-folder/api.sock"), "the folder /nonexistent-folder does not exist"),
        (("--bind", "fd://987"), "descriptor 987 is not open in this process"),  # before: a traceback
        (("--bind", "fd://0"), "descriptor 0 is not a socket"),  # stdin, a pipe: before, a traceback
    ],
)
def test_serve_refuses_what_gunicorn_would_take_badly_in_one_line(
    tmp_path: Path, args: tuple[str, ...], said: str
) -> None:
    env = {"COMMUNITY_API_DB": str(tmp_path / "db.sqlite3"), "COMMUNITY_API_MODE": "test"}
    result = run("serve", *args, env=env)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [result.stderr.strip()] and said in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "db.sqlite3").exists()  # nothing started


@pytest.mark.parametrize(
    ("host", "said"),
    [
        ("127.0.0.1", "cannot listen there (Address already in use): another program listens there"),
        ("192.0.2.1", "cannot listen there (Cannot assign requested address): no interface of this host has"),
    ],
)
def test_serve_refuses_an_address_it_cannot_listen_at_in_one_line(tmp_path: Path, host: str, said: str) -> None:
    """Before session 44, gunicorn tried five times over five seconds, ten lines of errors, then gave up."""
    env = {"COMMUNITY_API_DB": str(tmp_path / "db.sqlite3"), "COMMUNITY_API_MODE": "test"}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run("serve", "--bind", f"{host}:{port}", env=env)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"community-api: --bind {host}:{port}: {said}"), line
    assert not (tmp_path / "db.sqlite3").exists()  # nothing started


def test_serve_listens_on_an_inherited_socket(tmp_path: Path) -> None:
    """``--bind fd://N``: the listening socket a systemd socket unit or a supervisor opened and passed on.
    The start-up line says what it listens at."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("COMMUNITY_API_")}
    env.update({"COMMUNITY_API_DB": str(tmp_path / "db.sqlite3"), "COMMUNITY_API_SECRET": SECRET, **PLATFORM})
    log_path = tmp_path / "serve.log"
    with socket.socket() as listening, open(log_path, "wb") as log:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port, fd = listening.getsockname()[1], listening.fileno()
        process = subprocess.Popen(
            [sys.executable, "-m", "adapters.cli", "serve", "--bind", f"fd://{fd}", "--workers", "1"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            pass_fds=(fd,),
        )
        try:
            wait_for_http(f"http://127.0.0.1:{port}/healthz", process)
            assert requests.get(f"http://127.0.0.1:{port}/v1/whoami", timeout=10).status_code == 401
        finally:
            stop(process)
    summary = log_path.read_text().splitlines()[0]
    assert f"starting in production mode on fd://{fd} (127.0.0.1:{port}), 1 worker" in summary


# What systemd does for a socket unit's service: the socket as descriptor 3, LISTEN_FDS and LISTEN_PID set for
# the process it starts (here, the same process once exec'd, as ``serve`` then becomes gunicorn).
SOCKET_ACTIVATION = """
import os, sys
if sys.argv[1] != "-":  # "-": none passed, as by a unit whose socket is missing
    os.dup2(int(sys.argv[1]), 3)
os.environ.update(LISTEN_FDS="1", LISTEN_PID=str(os.getpid()))
os.execv(sys.executable, [sys.executable, "-m", "adapters.cli", "serve", *sys.argv[2:]])
"""


def test_serve_listens_on_the_socket_systemd_passed(tmp_path: Path) -> None:
    """Socket activation: gunicorn serves on systemd's socket, not on ``--bind``; the start-up line says so."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("COMMUNITY_API_")}
    env.update({"COMMUNITY_API_DB": str(tmp_path / "db.sqlite3"), "COMMUNITY_API_SECRET": SECRET, **PLATFORM})
    log_path = tmp_path / "serve.log"
    with socket.socket() as listening, open(log_path, "wb") as log:
        listening.bind(("0.0.0.0", 0))
        listening.listen()
        port, fd = listening.getsockname()[1], listening.fileno()
        process = subprocess.Popen(
            [sys.executable, "-c", SOCKET_ACTIVATION, str(fd), "--bind", "127.0.0.1:1", "--workers", "1"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            pass_fds=(fd,),
        )
        try:
            wait_for_http(f"http://127.0.0.1:{port}/healthz", process)
            assert requests.get(f"http://127.0.0.1:{port}/v1/whoami", timeout=10).status_code == 401
        finally:
            stop(process)
    summary, warning = log_path.read_text().splitlines()[:2]
    assert f"on systemd's socket fd://3 (0.0.0.0:{port}) (not --bind), 1 worker" in summary
    assert warning.startswith(f"community-api: warning: serving on fd://3 (0.0.0.0:{port}) with no reverse proxy")


def test_a_systemd_socket_that_is_not_there_is_refused_in_one_line(tmp_path: Path) -> None:
    """Named as systemd's, not as ``--bind`` (the operator gave none of it); before: a traceback."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("COMMUNITY_API_")}
    env.update({"COMMUNITY_API_DB": str(tmp_path / "db.sqlite3"), "COMMUNITY_API_MODE": "test"})
    result = subprocess.run(
        [sys.executable, "-c", SOCKET_ACTIVATION, "-"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "community-api: systemd's socket (LISTEN_FDS) fd://3: descriptor 3 is not open in this process: start it"
        " with the listening socket passed (a systemd socket unit, a supervisor)"
    ]


@pytest.mark.parametrize("command", ["demo", "sandbox"])
@pytest.mark.parametrize("port", ["99999", "\u00b2"])
def test_a_port_out_of_range_is_one_line_for_demo_and_sandbox(command: str, port: str) -> None:
    result = run(command, "--bind", f"127.0.0.1:{port}")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "--bind takes HOST:PORT" in result.stderr and "65535" in result.stderr
