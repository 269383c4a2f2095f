"""The command as an operator first meets it: ``--help`` says what it does, in full, naming every command;
``serve`` warns when strangers would reach gunicorn itself."""

from __future__ import annotations

import argparse
import os
from importlib import metadata
from pathlib import Path

import pytest

from adapters.cli import build_parser, main
from adapters.gunicorn_command import exposure_warning


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


def serve_argv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bind: str, trusted_proxies: str = "") -> list[str]:
    """The gunicorn command ``community-api serve --bind BIND`` would run (``os.execv`` caught)."""
    for name in [name for name in os.environ if name.startswith("COMMUNITY_API_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("COMMUNITY_API_DB", str(tmp_path / "db.sqlite3"))
    monkeypatch.setenv("COMMUNITY_API_SECRET", "w" * 64)
    monkeypatch.setenv("COMMUNITY_API_PLATFORM_URL", "https://www.example-community.com")
    monkeypatch.setenv("COMMUNITY_API_TRUSTED_PROXIES", trusted_proxies)
    started: list[list[str]] = []

    def execv(path: str, argv: list[str]) -> None:
        started.append(argv)
        raise SystemExit(0)

    monkeypatch.setattr(os, "execv", execv)
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
