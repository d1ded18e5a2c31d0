"""``bosun --help`` and every subcommand's ``--help`` end with one example, and the example parses."""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys

import pytest

from bosun.server.cli import build_parser


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _example(help_text: str) -> str:
    _head, sep, example = help_text.rstrip().rpartition("\nexample:\n  ")
    assert sep and "\n" not in example, help_text[-300:]
    return example


def _argv(example: str) -> list[str]:
    line = re.split(r"\s+#\s", example)[0]  # a trailing comment
    line = line.split(" | ")[-1].split(" < ")[0]  # the bosun part of a pipeline, without its redirect
    argv = shlex.split(line)
    assert argv[0] == "bosun", example
    return argv[1:]


def test_top_level_help_ends_with_an_example() -> None:
    parser = build_parser()
    parser.parse_args(_argv(_example(parser.format_help())))


@pytest.mark.parametrize("name", sorted(_subcommands(build_parser())))
def test_every_subcommand_help_ends_with_an_example_that_parses(name: str) -> None:
    parser = build_parser()
    example = _example(_subcommands(parser)[name].format_help())
    argv = _argv(example)
    assert argv[0] == name, example
    parser.parse_args(argv)  # SystemExit on an example the parser refuses


@pytest.mark.parametrize("command", ["run", "hook"])
def test_the_fast_commands_help_ends_with_the_same_example(command: str) -> None:
    """``bosun run`` and ``bosun hook`` skip the full parser; their own ``--help`` shows the example too."""
    res = subprocess.run([sys.executable, "-m", "bosun", command, "--help"], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    assert _example(res.stdout) == _example(_subcommands(build_parser())[command].format_help())
