"""`bosun invariants check|add|path`."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from bosun.core.guard.invariants import parse_rules
from bosun.server.commands import invariants as cmd


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cmd.add_arguments(parser)
    return parser.parse_args(argv)


def test_check_ok_and_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    example = Path(__file__).resolve().parents[1] / "invariants.example.toml"
    assert cmd.run(parse(["check", str(example)])) == 0
    assert "tests-before-commit" in capsys.readouterr().out
    bad = tmp_path / "bad.toml"
    bad.write_text('[[invariant]]\nid = "a"\nwhen = { path_glob = "src/[x" }\nmessage = "m"\n')
    assert cmd.run(parse(["check", str(bad)])) == 1
    err = capsys.readouterr().err
    assert "bad.toml:3" in err and "when.path_glob" in err and "unclosed" in err


def test_add_appends_a_validated_rule_and_keeps_comments(tmp_path: Path) -> None:
    path = tmp_path / ".bosun" / "invariants.toml"
    assert cmd.run(parse(["add", "--file", str(path), "--id", "no-test-edit", "--path-glob", "tests/**",
                          "--message", "ask first"])) == 0
    path.write_text("# keep me\n" + path.read_text())
    assert cmd.run(parse(["add", "--file", str(path), "--id", "commit-needs-tests", "--tool", "bash",
                          "--arg", r"command=re:\bgit\s+commit\b", "--require-state", "tests_passed",
                          "--verdict", "warn", "--message", "run tests"])) == 0
    text = path.read_text()
    assert text.startswith("# keep me")
    rules = parse_rules(text)
    assert [r.id for r in rules.rules] == ["no-test-edit", "commit-needs-tests"]
    assert rules.rules[1].require_state == "tests_passed" and rules.rules[1].verdict == "warn"
    # invalid additions leave the file untouched
    assert cmd.run(parse(["add", "--file", str(path), "--id", "no-test-edit", "--tool", "x",
                          "--message", "dup"])) == 1
    assert cmd.run(parse(["add", "--file", str(path), "--id", "g", "--tool", "x[", "--message", "m"])) == 1
    assert path.read_text() == text


def test_path_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("BOSUN_INVARIANTS", raising=False)
    monkeypatch.setenv("BOSUN_ROOTS", f"{tmp_path / 'proj'};{tmp_path / 'other'}")
    assert cmd.run(parse(["path", "--home", str(tmp_path / "home")])) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "proj" / ".bosun" / "invariants.toml")
    monkeypatch.delenv("BOSUN_ROOTS")
    assert cmd.run(parse(["path", "--home", str(tmp_path / "home")])) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "home" / "invariants.toml")


def test_registered_in_the_cli(tmp_path: Path) -> None:
    import subprocess
    import sys

    from bosun.server.cli import build_parser

    example = Path(__file__).resolve().parents[1] / "invariants.example.toml"
    args = build_parser().parse_args(["invariants", "check", str(example)])
    assert args.func(args) == 0
    bad = tmp_path / "bad.toml"
    bad.write_text('[[invariant]]\nid = "a"\n')
    proc = subprocess.run([sys.executable, "-m", "bosun", "invariants", "check", str(bad)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1, proc.stderr
    assert "bad.toml:1" in proc.stderr and "message" in proc.stderr
