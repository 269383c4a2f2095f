"""``community-api --help`` says what the command does, in full, naming every command it has."""

from __future__ import annotations

import argparse

from adapters.cli import build_parser


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
