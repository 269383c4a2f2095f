"""What ``community-api serve --bind`` names, checked before gunicorn starts, and where it listens.

Three forms, gunicorn's own: ``HOST:PORT``; ``unix:PATH`` (nginx on the same box); ``fd://N``, a listening
socket the process was given (a systemd socket unit, a supervisor). gunicorn takes a bad one of the last
two badly: an empty or too long path, or a missing folder, is retried five times over five seconds and ends
in "Can't connect"; a file in the socket's place, a descriptor that is not open or not a socket, end in a
traceback. Each is refused here in one line, before anything starts; so is a ``HOST:PORT`` it cannot bind
(in use, not this host's: five tries over five seconds too), probed as gunicorn will bind it.

With systemd's socket activation (``LISTEN_PID`` this process's, ``LISTEN_FDS=N``) gunicorn serves on the
descriptors systemd passed, 3 to 3+N-1, and not on ``--bind`` (``gunicorn.systemd.listen_fds``; ``serve``
becomes gunicorn in the same process, so the PID is the same): ``serving_on`` says so, and those sockets
are checked and judged like ``fd://N`` binds.

An inherited socket is looked at (``listening_at``) so that the "no proxy" warning and the start-up summary
judge it by what it is: a TCP socket on every address is warned of as ``--bind 0.0.0.0:PORT`` would be; a
unix socket's peer is the proxy, as with ``unix:PATH``.
"""

from __future__ import annotations

import errno
import os
import re
import socket
import stat
from collections.abc import Mapping
from typing import Any

from adapters.settings import SettingsError

# sockaddr_un's sun_path holds 108 bytes on Linux, the last one the terminating NUL.
UNIX_PATH_BYTES = 107

_UNIX = re.compile(r"unix:(//)?")  # gunicorn's rule: ``unix:PATH`` and ``unix://PATH`` alike


def unix_path(bind: str) -> str | None:
    """The socket's path of a ``unix:PATH`` bind (as gunicorn reads it), or None for the other forms."""
    if not _UNIX.match(bind):
        return None
    return _UNIX.split(bind)[-1]


SD_LISTEN_FDS_START = 3  # systemd passes its sockets from descriptor 3 on (sd_listen_fds(3))


def activated_binds(environ: Mapping[str, str], pid: int) -> list[str]:
    """The sockets systemd's socket activation passed to process ``pid``, as ``fd://N`` binds; none when it
    did not (gunicorn's rule). A variable gunicorn could not read as a number is refused in one line (it
    would end in a traceback)."""
    listen_pid = environ.get("LISTEN_PID", "0")
    if not (listen_pid.isascii() and listen_pid.isdigit()):
        raise SettingsError(f"LISTEN_PID is {listen_pid!r}, not a process id (systemd's socket activation sets it)")
    if int(listen_pid) != pid:
        return []
    count = environ.get("LISTEN_FDS", "0")
    if not (count.isascii() and count.isdigit()):
        raise SettingsError(f"LISTEN_FDS is {count!r}, not a number of sockets (systemd's socket activation sets it)")
    return [f"fd://{fd}" for fd in range(SD_LISTEN_FDS_START, SD_LISTEN_FDS_START + int(count))]


def serving_on(bind: str) -> list[str]:
    """What gunicorn will listen on when this process becomes it: the sockets systemd passed, or ``bind``."""
    return activated_binds(os.environ, os.getpid()) or [bind]


def check_bind(bind: str, given_by: str = "--bind") -> None:
    """Refuse, in one line, a ``unix:PATH`` or ``fd://N`` that gunicorn could not listen on. A ``HOST:PORT``'s
    form is checked by the caller (``check_serve_args``), whether it can be listened at by
    ``check_tcp_bind``. ``given_by`` names where it came from in the refusal: ``--bind``, or ``LISTEN_FDS``
    for systemd's sockets."""
    path = unix_path(bind)
    if path is not None:
        _check_unix_path(path)
    elif bind.startswith("fd://"):
        _inherited(bind, given_by)


def bind_refusal(host: str, port: int) -> OSError | None:
    """Why HOST:PORT cannot be listened at, or None. Probed as gunicorn binds (the address family from the
    host's form, ``SO_REUSEADDR``), the socket closed at once: gunicorn would otherwise try five times over
    five seconds, ten lines of errors, before it gave up."""
    bare = host.strip("[]")
    try:
        # (An IPv6 address on a host whose kernel has no IPv6 fails here, EAFNOSUPPORT: said, not raised.)
        probe = socket.socket(socket.AF_INET6 if ":" in bare else socket.AF_INET)
    except OSError as error:
        return error
    with probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((bare, port))
        except OSError as error:  # socket.gaierror too: a name that resolves to nothing
            return error
    return None


_BIND_HINTS = {
    errno.EADDRINUSE: "another program listens there (another serve?): stop it, or choose another port",
    errno.EACCES: "a port below 1024 needs root or CAP_NET_BIND_SERVICE: listen on a higher one, behind nginx",
    errno.EADDRNOTAVAIL: "no interface of this host has that address",
}


def check_tcp_bind(bind: str, host: str, port: int) -> None:
    """Refuse, in one line, a ``HOST:PORT`` that cannot be listened at, saying why."""
    error = bind_refusal(host, port)
    if error is None:
        return
    why = error.strerror or str(error)
    if isinstance(error, socket.gaierror):
        hint = "the host name resolves to no address"
    else:
        hint = _BIND_HINTS.get(error.errno or 0, "")
    raise SettingsError(f"--bind {bind}: cannot listen there ({why})" + (f": {hint}" if hint else ""))


def listening_at(bind: str) -> str:
    """Where the service listens, written as a plain ``--bind``: an ``fd://N`` becomes ``HOST:PORT`` or
    ``unix:PATH`` from the socket itself; any other bind is returned as it is."""
    if not bind.startswith("fd://"):
        return bind
    family, name = _inherited(bind)
    if family == socket.AF_UNIX:
        # An abstract socket's name is bytes starting with NUL; an unbound one's is empty.
        return "unix:" + (name if isinstance(name, str) else "(abstract)")
    host, port = name[0], name[1]
    return f"[{host}]:{port}" if family == socket.AF_INET6 else f"{host}:{port}"


def described(bind: str) -> str:
    """A bind as the start-up line and the warning name it: an ``fd://N`` with what it listens at."""
    where = listening_at(bind)
    return bind if where == bind else f"{bind} ({where})"


def _check_unix_path(path: str) -> None:
    if not path:
        raise SettingsError("--bind unix:PATH needs the socket's path, as in unix:/run/community-api/api.sock")
    size = len(os.fsencode(path))
    if size > UNIX_PATH_BYTES:
        raise SettingsError(
            f"--bind unix:PATH: the path is {size} bytes and a unix socket's holds at most {UNIX_PATH_BYTES}:"
            " choose a shorter one"
        )
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise SettingsError(
            f"--bind unix:PATH: the folder {folder} does not exist: create it first (systemd's RuntimeDirectory=)"
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise SettingsError(f"--bind unix:PATH: this user cannot create a socket in {folder}")
    if os.path.lexists(path) and not stat.S_ISSOCK(os.lstat(path).st_mode):
        # gunicorn removes an old socket at the path, never another file.
        raise SettingsError(f"--bind unix:PATH: {path} exists and is not a socket: choose another path")


def _inherited(bind: str, given_by: str = "--bind") -> tuple[int, str | bytes | tuple[Any, ...]]:
    """The family and bound name of an ``fd://N`` bind's socket; SettingsError when it is not one gunicorn
    can serve on."""
    number = bind.removeprefix("fd://")
    if not (number.isascii() and number.isdigit()):
        raise SettingsError(f"--bind fd://N takes the number of an inherited socket's descriptor, not {bind!r}")
    fd = int(number)
    try:
        mode = os.fstat(fd).st_mode
    except (OSError, OverflowError):
        raise SettingsError(
            f"{given_by} {bind}: descriptor {fd} is not open in this process: start it with the listening socket"
            " passed (a systemd socket unit, a supervisor)"
        ) from None
    if not stat.S_ISSOCK(mode):
        raise SettingsError(f"{given_by} {bind}: descriptor {fd} is not a socket")
    # A duplicate, closed on leaving: the socket itself stays open for gunicorn.
    with socket.socket(fileno=os.dup(fd)) as sock:
        if sock.type != socket.SOCK_STREAM or sock.family not in (socket.AF_UNIX, socket.AF_INET, socket.AF_INET6):
            raise SettingsError(f"{given_by} {bind}: descriptor {fd} is not a TCP or unix stream socket")
        return sock.family, sock.getsockname()
