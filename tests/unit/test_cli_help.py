"""The command as an operator first meets it: ``--help`` says what it does, in full, naming every command;
``serve`` says what it runs with, and warns when strangers would reach gunicorn itself."""

from __future__ import annotations

import argparse
import os
from importlib import metadata
from pathlib import Path

import pytest

from adapters import serve_bind
from adapters.cli import build_parser, main
from adapters.gunicorn_command import exposure_warning, memory_warning, startup_summary
from adapters.platform import memory_room
from adapters.settings import Settings
from adapters.throttle.storage_uri import masked


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (group,) = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    return dict(group.choices)


def test_the_description_names_every_command_and_is_whole() -> None:
    parser = build_parser()
    description = parser.description or ""
    assert description.endswith("."), description  # not cut at the end of the docstring's first line
    assert "``" not in description
    for name, sub in _commands(parser).items():
        assert name in description, name
        nested = [action for action in sub._actions if isinstance(action, argparse._SubParsersAction)]
        for verb in nested[0].choices if nested else ():
            assert verb in description, f"{name} {verb}"


@pytest.mark.parametrize(
    ("bind", "proxies", "warned"),
    [
        ("127.0.0.1:8000", (), False),
        ("localhost:8000", (), False),
        ("LOCALHOST:8000", (), False),  # a host name in any case
        ("[::1]:8000", (), False),
        ("unix:/run/community-api.sock", (), False),
        ("0.0.0.0:8000", (), True),
        ("[::]:8000", (), True),
        ("[::ffff:127.0.0.1]:8000", (), False),  # an IPv6 socket on IPv4's loopback
        ("[::ffff:203.0.113.7]:8000", (), True),
        ("203.0.113.7:8000", (), True),
        ("api.example.com:8000", (), True),
        ("0.0.0.0:8000", ("127.0.0.1",), False),  # a proxy named: it is what strangers reach
    ],
)
def test_serving_where_strangers_reach_gunicorn_itself_is_warned_of(
    bind: str, proxies: tuple[str, ...], warned: bool
) -> None:
    warning = exposure_warning(bind, proxies)
    assert (warning is not None) is warned
    if warning:
        assert bind in warning and "nginx" in warning


def serve_argv(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    bind: str,
    trusted_proxies: str = "",
    available_mib: int = 64 * 1024,
    **settings: str,
) -> list[str]:
    """The gunicorn command ``community-api serve --bind BIND`` would run (``os.execv`` caught)."""
    for name in [name for name in os.environ if name.startswith("COMMUNITY_API_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("COMMUNITY_API_DB", str(tmp_path / "db.sqlite3"))
    monkeypatch.setenv("COMMUNITY_API_SECRET", "w" * 64)
    monkeypatch.setenv("COMMUNITY_API_PLATFORM_URL", "https://www.example-community.com")
    monkeypatch.setenv("COMMUNITY_API_TRUSTED_PROXIES", trusted_proxies)
    for name, value in settings.items():
        monkeypatch.setenv("COMMUNITY_API_" + name, value)
    started: list[list[str]] = []

    def execv(path: str, argv: list[str]) -> None:
        started.append(argv)
        raise SystemExit(0)

    monkeypatch.setattr(os, "execv", execv)
    # The memory this machine has is not the test's: plenty, unless a test says otherwise.
    monkeypatch.setattr(memory_room, "machine_figures", lambda: [available_mib, None])
    # Nor are the ports in use here: a demo left on 127.0.0.1:8000 must not fail the test.
    monkeypatch.setattr(serve_bind, "bind_refusal", lambda host, port: None)
    with pytest.raises(SystemExit):
        main(["serve", "--bind", bind])
    (argv,) = started
    return argv


def test_serve_prints_the_warning_before_gunicorn_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "0.0.0.0:8000" in serve_argv(tmp_path, monkeypatch, "0.0.0.0:8000")
    assert "put nginx in front" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("workers", "pool", "available", "grid", "fit"),
    [
        (2, 4, 3000, False, None),  # 8 x 300 + 600 = 3000: fits exactly
        (2, 4, 2999, False, 7),
        (2, 4, 1900, False, 4),  # a 2 GiB box with the defaults
        (1, 1, 800, False, 0),  # not even one beside the memory kept free (the first starts anyway)
        (2, 4, 500, True, None),  # a Grid's browsers are on its nodes
    ],
)
def test_browsers_that_cannot_fit_the_memory_are_warned_of(
    workers: int, pool: int, available: int, grid: bool, fit: int | None
) -> None:
    settings = Settings(selenium_remote_url="http://grid:4444" if grid else "")
    warning = memory_warning(workers, pool, settings, figures=lambda: [available + 5000, available])
    if fit is None:
        assert warning is None
        return
    assert warning is not None and warning.startswith("community-api: warning: ")
    assert f"{workers * pool * 300} MiB when fresh, and {available} MiB is available here" in warning
    assert f"{workers} worker{'s' if workers != 1 else ''} × {pool} browsers" in warning  # "1 worker", not "1 workers"
    assert f"about {fit} fit beside the 600 MiB kept free" in warning  # the least of the machine and its cgroup
    assert "COMMUNITY_API_BROWSER_POOL_SIZE" in warning and "--workers" in warning


def test_unknown_memory_is_not_warned_of() -> None:
    assert memory_warning(8, 8, Settings(), figures=lambda: [None, None]) is None


def test_serve_warns_when_its_browsers_cannot_fit_the_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    serve_argv(tmp_path, monkeypatch, "127.0.0.1:8000", available_mib=1900)
    summary, warning = capsys.readouterr().err.splitlines()
    assert summary.startswith("community-api: starting in production mode")
    assert warning.startswith("community-api: warning: 2 workers × 4 browsers") and "about 4 fit" in warning


def test_serve_says_what_it_runs_with_and_never_a_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    token = "m" * 40
    serve_argv(
        tmp_path,
        monkeypatch,
        "127.0.0.1:8000",
        PLATFORM_API_URL="https://api2.example-community.com",
        PUBLIC_URL="https://api.example.com",
        BROWSER_POOL_SIZE="3",
        METRICS_TOKEN=token,
    )
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("community-api: starting in production mode on 127.0.0.1:8000, 2 workers of 4 threads;")
    for shown in (
        "platform https://www.example-community.com (API https://api2.example-community.com)",
        f"database {tmp_path / 'db.sqlite3'}",
        f"throttle mmap://{tmp_path / 'db.throttle.mmap'}",
        "browsers: local Chromium, up to 3 per worker, closed after 900 s unused",
        "platform pace 60 reads and 20 writes a minute per platform account",
        "public URL https://api.example.com",
        "trusted proxies none",
        "sign-up closed after the first account",
    ):
        assert shown in line
    assert "w" * 64 not in line and token not in line


def test_the_summary_names_a_grid_a_relative_database_whole_and_no_public_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    settings = Settings(
        db="var/db.sqlite3",
        selenium_remote_url="http://grid.internal:4444",
        browser_idle_seconds=0,
        trusted_proxies=("10.0.0.0/8",),
        signup=True,
        throttle_storage="redis://:hunter2@redis.internal:6379/0",
    )
    args = argparse.Namespace(bind="0.0.0.0:8000", workers=1, worker_class="sync", threads=None)
    line = startup_summary(args, settings)
    assert "1 worker of 1 thread;" in line
    assert f"database {tmp_path / 'var' / 'db.sqlite3'};" in line  # where it is, whatever the working folder
    assert "browsers: a Selenium Grid at http://grid.internal:4444, up to 4 per worker, kept until evicted" in line
    assert "public URL none (absolute URLs from the request's Host" in line
    assert "trusted proxies 10.0.0.0/8;" in line and "sign-up open" in line
    assert "throttle redis://:***@redis.internal:6379/0;" in line and "hunter2" not in line
    assert "previous secret" not in line


def test_the_summary_says_a_unix_sockets_peer_is_trusted() -> None:
    """Its X-Forwarded-For is read whatever TRUSTED_PROXIES holds (``client_address``): the journal says so."""
    args = argparse.Namespace(bind="unix:/run/community-api/api.sock", workers=2, worker_class="gthread", threads=4)
    assert "; trusted proxies the unix socket's peer;" in startup_summary(args, Settings())
    named = Settings(trusted_proxies=("10.0.0.5",))
    assert "; trusted proxies the unix socket's peer, 10.0.0.5;" in startup_summary(args, named)


def test_the_summary_says_a_previous_secret_is_set_and_never_its_value() -> None:
    """A previous secret left set after the change goes on opening what it sealed: the journal says so."""
    settings = Settings(secret="n" * 40, previous_secret="p" * 40)
    args = argparse.Namespace(bind="127.0.0.1:8000", workers=2, worker_class="gthread", threads=4)
    line = startup_summary(args, settings)
    assert line.endswith("; the previous secret still opens platform sessions (`community-api reseal`, then remove it)")
    assert "p" * 40 not in line and "n" * 40 not in line


@pytest.mark.parametrize(
    ("uri", "shown"),
    [
        ("mmap:///var/lib/community-api/db.throttle.mmap?capacity=200", None),
        ("sqlite:///var/lib/community-api/throttle.sqlite3", None),
        ("memory://", None),
        ("redis://redis.internal:6379/0", None),
        ("redis://:hunter2@redis.internal:6379/0", "redis://:***@redis.internal:6379/0"),
        ("redis://default:hunter2@redis.internal", "redis://default:***@redis.internal"),
        ("rediss://hunter2@redis.internal", "rediss://***@redis.internal"),  # a lone name may be the password
        ("redis://u:p%40hunter2@redis.internal", "redis://u:***@redis.internal"),
        ("redis://:hun/ter@2@redis.internal/0", "redis://:***@redis.internal/0"),  # written unencoded
        (
            "redis+sentinel://:hunter2@a:26379,b:26379/main?sentinel_password=hunter2&db=1",
            "redis+sentinel://:***@a:26379,b:26379/main?sentinel_password=***&db=1",
        ),
        ("redis://redis.internal/0?password=hunter2", "redis://redis.internal/0?password=***"),
        ("redis://redis.internal/0?Pass%77ord=hunter2", "redis://redis.internal/0?Pass%77ord=***"),
        ("redis://redis.internal/0?p%61ssword=hunter2", "redis://redis.internal/0?p%61ssword=***"),  # decoded
        ("redis://redis.internal/0?db=1&api_key=hunter2", "redis://redis.internal/0?db=1&api_key=***"),
        ("redis://redis.internal/0?auth_token=hunter2", "redis://redis.internal/0?auth_token=***"),
        ("redis://redis.internal/0?client_secret=hunter2", "redis://redis.internal/0?client_secret=***"),
        ("redis://redis.internal/0?password", None),  # a name alone holds no value to hide
        ("not a uri", None),
    ],
)
def test_a_storage_uri_is_shown_without_its_credentials(uri: str, shown: str | None) -> None:
    assert masked(uri) == (shown or uri)
    assert "hunter2" not in masked(uri) and "hun/ter" not in masked(uri)


@pytest.mark.parametrize(
    ("proxies", "allowed"),
    [
        ("", ""),
        ("127.0.0.1", "127.0.0.1/32,::ffff:127.0.0.1/128"),  # nginx on the box, to a socket bound to ::
        ("10.0.0.0/8, fd00::/8", "10.0.0.0/8,::ffff:10.0.0.0/104,fd00::/8"),
    ],
)
def test_gunicorn_believes_forwarded_headers_from_the_trusted_proxies_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, proxies: str, allowed: str
) -> None:
    argv = serve_argv(tmp_path, monkeypatch, "127.0.0.1:8000", trusted_proxies=proxies)
    assert argv[argv.index("--forwarded-allow-ips") + 1] == allowed


def test_version_says_the_installed_one(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:
        main(["--version"])
    assert ended.value.code == 0
    assert capsys.readouterr().out == f"community-api {metadata.version('community-data-api')}\n"
