"""``serve --bind`` with a unix socket's path or an inherited socket: what gunicorn could not listen on is
refused in one line, and an inherited socket is judged by what it listens at."""

from __future__ import annotations

import argparse
import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.gunicorn_command import (
    check_can_listen,
    check_serve_args,
    exposure_warning,
    gunicorn_argv,
    startup_summary,
    threads,
)
from adapters.serve_bind import activated_binds, check_bind, check_tcp_bind, listening_at, serving_on, unix_path
from adapters.settings import Settings, SettingsError


def serve_args(bind: str, **flags: object) -> argparse.Namespace:
    """``serve``'s parsed flags: two gthread workers of four threads, ``flags`` changing any."""
    defaults = {"bind": bind, "workers": 2, "worker_class": "gthread", "threads": 4, "timeout": 120, "preload": False}
    return argparse.Namespace(**{**defaults, **flags})


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A folder with a short path: pytest's own may be longer than a unix socket's path can be."""
    with tempfile.TemporaryDirectory(dir="/tmp") as folder:
        yield Path(folder)


@pytest.mark.parametrize(
    ("bind", "path"),
    [
        ("unix:/run/api.sock", "/run/api.sock"),
        ("unix:///run/api.sock", "/run/api.sock"),  # gunicorn takes unix://PATH too
        ("unix:api.sock", "api.sock"),
        ("unix:", ""),
        ("127.0.0.1:8000", None),
        ("fd://3", None),
    ],
)
def test_the_unix_path_is_read_as_gunicorn_reads_it(bind: str, path: str | None) -> None:
    assert unix_path(bind) == path


def test_a_new_socket_in_an_existing_folder_and_an_old_socket_are_accepted(short_tmp: Path) -> None:
    check_bind(f"unix:{short_tmp / 'api.sock'}")
    old = short_tmp / "old.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(old))
    check_bind(f"unix:{old}")  # gunicorn removes an old socket and binds afresh
    check_serve_args(serve_args(f"unix://{old}"))


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("", "--bind unix:PATH needs the socket's path"),  # before: 5 s of retries, then "Can't connect to"
        ("a" * 120, "the path is 1"),  # before: 5 s of "AF_UNIX path too long"
        ("missing/api.sock", "the folder"),  # before: 5 s of "No such file or directory"
        ("a-file", "exists and is not a socket"),  # before: a traceback
        ("a-folder", "exists and is not a socket"),
        ("a-dangling-link", "exists and is not a socket"),  # gunicorn sees no file; its bind: "in use"
    ],
)
def test_a_unix_path_gunicorn_cannot_listen_on_is_refused_in_one_line(short_tmp: Path, name: str, said: str) -> None:
    (short_tmp / "a-file").write_text("not a socket")
    (short_tmp / "a-folder").mkdir()
    (short_tmp / "a-dangling-link").symlink_to(short_tmp / "nothing-here")
    bind = f"unix:{short_tmp / name}" if name else "unix:"
    with pytest.raises(SettingsError) as refused:
        check_serve_args(serve_args(bind))
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_the_path_limit_is_counted_in_bytes(short_tmp: Path) -> None:
    fits = short_tmp / ("é" * ((107 - len(str(short_tmp)) - 1) // 2))
    check_bind(f"unix:{fits}")
    with pytest.raises(SettingsError, match="at most 107"):
        check_bind(f"unix:{fits}é")


def test_a_folder_this_user_cannot_write_is_refused(short_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # As root the permission bits are not enforced: the check asked of the system is what is replaced.
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    with pytest.raises(SettingsError, match=f"this user cannot create a socket in {short_tmp}$"):
        check_bind(f"unix:{short_tmp / 'api.sock'}")


@pytest.fixture
def listening() -> Iterator[socket.socket]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("0.0.0.0", 0))
        sock.listen()
        yield sock


def test_an_inherited_tcp_socket_is_warned_of_as_its_address_would_be(listening: socket.socket) -> None:
    bind = f"fd://{listening.fileno()}"
    port = listening.getsockname()[1]
    check_serve_args(serve_args(bind))
    assert listening_at(bind) == f"0.0.0.0:{port}"
    warning = exposure_warning(bind, ())
    assert warning is not None and f"serving on {bind} (0.0.0.0:{port}) with no reverse proxy" in warning
    assert exposure_warning(bind, ("10.0.0.5",)) is None
    summary = startup_summary(serve_args(bind), Settings())
    assert f"on {bind} (0.0.0.0:{port}), 2 workers" in summary and "; trusted proxies none;" in summary
    os.fstat(listening.fileno())  # still open for gunicorn


def test_an_inherited_loopback_socket_is_not_warned_of() -> None:
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
        sock.bind(("::1", 0))
        bind = f"fd://{sock.fileno()}"
        assert listening_at(bind) == f"[::1]:{sock.getsockname()[1]}"
        assert exposure_warning(bind, ()) is None


def test_an_inherited_unix_socket_trusts_its_peer_as_unix_path_does(short_tmp: Path) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(short_tmp / "api.sock"))
        bind = f"fd://{sock.fileno()}"
        assert listening_at(bind) == f"unix:{short_tmp / 'api.sock'}"
        assert exposure_warning(bind, ()) is None
        assert "; trusted proxies the unix socket's peer;" in startup_summary(serve_args(bind), Settings())


def test_an_inherited_abstract_unix_socket_is_a_unix_socket() -> None:
    """Linux's abstract namespace: no path, a name starting with NUL (systemd's ListenStream=@name)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(f"\0community-api-test-{os.getpid()}")
        bind = f"fd://{sock.fileno()}"
        assert listening_at(bind) == "unix:(abstract)"
        assert exposure_warning(bind, ()) is None


@pytest.mark.parametrize(
    ("number", "said"),
    [
        ("abc", "takes the number of an inherited socket's descriptor"),
        ("", "takes the number"),
        ("-1", "takes the number"),
        ("\u00b3", "takes the number"),  # a digit to str.isdigit(), not to int()
        ("987", "descriptor 987 is not open in this process"),  # before: a traceback
        ("99999999999999999999", "is not open in this process"),
    ],
)
def test_an_fd_that_is_no_open_descriptor_is_refused_in_one_line(number: str, said: str) -> None:
    with pytest.raises(SettingsError, match=said):
        check_serve_args(serve_args(f"fd://{number}"))


def test_an_fd_that_is_no_stream_socket_is_refused(tmp_path: Path) -> None:
    with open(tmp_path / "a-file", "w") as file, pytest.raises(SettingsError, match="is not a socket$"):
        check_bind(f"fd://{file.fileno()}")  # before: a traceback ("Socket operation on non-socket")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        with pytest.raises(SettingsError, match="is not a TCP or unix stream socket$"):
            check_bind(f"fd://{udp.fileno()}")
        os.fstat(udp.fileno())  # looked at through a duplicate: still open


@pytest.mark.parametrize(
    ("environ", "binds"),
    [
        ({}, []),
        ({"LISTEN_PID": "4242", "LISTEN_FDS": "1"}, ["fd://3"]),
        ({"LISTEN_PID": "4242", "LISTEN_FDS": "2"}, ["fd://3", "fd://4"]),
        ({"LISTEN_PID": "4242", "LISTEN_FDS": "0"}, []),
        ({"LISTEN_PID": "4242"}, []),
        ({"LISTEN_PID": "1", "LISTEN_FDS": "1"}, []),  # another process's, left in the environment
        ({"LISTEN_PID": "1", "LISTEN_FDS": "many"}, []),  # gunicorn reads LISTEN_FDS only for its own PID
    ],
)
def test_systemds_sockets_are_served_on_when_passed_to_this_process(environ: dict[str, str], binds: list[str]) -> None:
    """gunicorn's rule (``gunicorn.systemd.listen_fds``): then it serves on them, not on ``--bind``."""
    assert activated_binds(environ, 4242) == binds


@pytest.mark.parametrize(
    ("environ", "said"),
    [
        ({"LISTEN_PID": "systemd"}, "LISTEN_PID is 'systemd', not a process id"),  # before: a traceback
        ({"LISTEN_PID": "4242", "LISTEN_FDS": "-1"}, "LISTEN_FDS is '-1', not a number of sockets"),
        ({"LISTEN_PID": "4242", "LISTEN_FDS": "one"}, "LISTEN_FDS is 'one'"),
        # Digits to str.isdigit, not to int(): a superscript two was a traceback.
        ({"LISTEN_PID": "\u00b2"}, "LISTEN_PID is '\u00b2', not a process id"),
        ({"LISTEN_PID": "4242", "LISTEN_FDS": "\u00b2"}, "LISTEN_FDS is '\u00b2', not a number of sockets"),
    ],
)
def test_activation_variables_gunicorn_cannot_read_are_refused(environ: dict[str, str], said: str) -> None:
    with pytest.raises(SettingsError, match=said):
        activated_binds(environ, 4242)


def test_without_activation_the_bind_is_served_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LISTEN_PID", raising=False)
    assert serving_on("unix:/run/api.sock") == ["unix:/run/api.sock"]
    monkeypatch.setenv("LISTEN_PID", str(os.getpid()))
    monkeypatch.setenv("LISTEN_FDS", "1")
    assert serving_on("unix:/run/api.sock") == ["fd://3"]


def test_an_address_in_use_or_not_of_this_host_is_refused_saying_why() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(SettingsError, match=r"\(Address already in use\): another program listens there"):
            check_tcp_bind(f"127.0.0.1:{port}", "127.0.0.1", port)
    check_tcp_bind(f"127.0.0.1:{port}", "127.0.0.1", port)  # free again: nothing to say
    with pytest.raises(SettingsError, match="no interface of this host has that address"):
        check_tcp_bind("192.0.2.1:8000", "192.0.2.1", 8000)  # TEST-NET-1: no host's address


def test_an_ipv6_address_is_probed_as_an_address() -> None:
    """``[2001:db8::1]:8000`` (the documentation prefix: no host's) is an IPv6 address to bind, in its
    family and without its brackets, not a host name to look up; a host without IPv6 says so in one line."""
    with pytest.raises(SettingsError, match=r"^--bind \[2001:db8::1\]:8000: cannot listen there") as refused:
        check_tcp_bind("[2001:db8::1]:8000", "[2001:db8::1]", 8000)
    assert "resolves to no address" not in str(refused.value)


def test_an_ipv6_address_alone_is_served_on_gunicorns_default_port() -> None:
    check_serve_args(serve_args("[::1]"))  # the address, with no port: not "[:" and a port "1]"


def test_a_host_alone_is_probed_on_gunicorns_default_port_8000() -> None:
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            taken.bind(("127.0.0.1", 8000))
            taken.listen()
        except OSError:  # another program holds it already: taken all the same
            pass
        with pytest.raises(SettingsError, match="--bind 127.0.0.1: cannot listen there"):
            check_can_listen("127.0.0.1")


def test_under_socket_activation_the_unused_bind_is_not_probed(monkeypatch: pytest.MonkeyPatch) -> None:
    """gunicorn serves on systemd's sockets then, not on ``--bind``: a port in use there stops nothing."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setenv("LISTEN_PID", str(os.getpid()))
        monkeypatch.setenv("LISTEN_FDS", "1")
        check_can_listen(f"127.0.0.1:{port}")


@pytest.mark.parametrize(
    ("worker_class", "given", "served"), [("sync", None, 1), ("sync", 1, 1), ("gthread", None, 4), ("gthread", 1, 1)]
)
def test_threads_per_worker(worker_class: str, given: int | None, served: int) -> None:
    assert threads(serve_args("127.0.0.1:8000", worker_class=worker_class, threads=given)) == served


@pytest.mark.parametrize(
    ("worker_class", "given", "said"),
    [("sync", 2, "--threads applies to gthread workers"), ("gthread", 0, "--threads must be at least 1")],
)
def test_threads_gunicorn_would_take_badly_are_refused(worker_class: str, given: int, said: str) -> None:
    with pytest.raises(SettingsError, match=said):
        threads(serve_args("127.0.0.1:8000", worker_class=worker_class, threads=given))


@pytest.mark.parametrize("timeout", [45, 0])  # 0: gunicorn never restarts a silent worker
def test_the_timeout_given_is_the_one_gunicorn_runs_with(timeout: int) -> None:
    args = serve_args("127.0.0.1:8000", timeout=timeout)
    check_serve_args(args)  # taken, 0 included
    argv = gunicorn_argv(args, Settings())
    assert argv[argv.index("--timeout") + 1] == str(timeout)


def test_serve_run_as_typed_restarts_a_silent_worker_after_120_s_and_loads_the_app_in_each_worker() -> None:
    """``community-api serve`` with no flags, as docs/deployment.md describes it: gunicorn's ``--timeout``
    120 s, well above the platform's own time-outs; new workers load the code afresh unless ``--preload``."""
    from adapters.cli import build_parser

    typed = gunicorn_argv(build_parser().parse_args(["serve"]), Settings())
    assert typed[typed.index("--timeout") + 1] == "120"
    assert "--preload" not in typed
    assert "--preload" in gunicorn_argv(build_parser().parse_args(["serve", "--preload"]), Settings())
