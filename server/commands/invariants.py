"""``bosun invariants``: validate a rules file, append a rule, or show where the daemon looks.

    bosun invariants check FILE
    bosun invariants add --id no-test-edit --path-glob 'tests/**' --message "..." [--file FILE]
    bosun invariants path
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from bosun.server.commands import config_of

NAME = "invariants"
HELP = "check or extend the precheck guard rails (.bosun/invariants.toml)"
EXAMPLE = "bosun invariants check .bosun/invariants.toml"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    check = sub.add_parser("check", help="validate a rules file (exit 1 with the line and field on error)")
    check.add_argument("file", help="the TOML file")
    add = sub.add_parser("add", help="append one validated rule (the file is created if missing)")
    add.add_argument("--file", help="rules file (default: where the daemon looks; see `bosun invariants path`)")
    add.add_argument("--home", help="state directory (default $BOSUN_HOME or ~/.bosun)")
    add.add_argument("--id", required=True, help="unique rule id, e.g. tests-before-commit")
    add.add_argument("--message", required=True, help="what the agent is told when the rule fires")
    add.add_argument("--tool", action="append", default=[], help="tool name or glob (repeatable)")
    add.add_argument("--path-glob", action="append", default=[], help="path glob (repeatable)")
    add.add_argument("--access", choices=["write", "any"], default=None, help="path_glob matches writes only (default) or any access")
    add.add_argument("--arg", action="append", default=[], metavar="NAME=PATTERN",
                     help="argument glob, or re:<regex> (repeatable)")
    add.add_argument("--require-state", help="task flag that must be true (e.g. tests_passed)")
    add.add_argument("--require-value", help="JSON value the flag must equal (default: truthy)")
    add.add_argument("--require-step", help="plan step that must be completed")
    add.add_argument("--verdict", choices=["block", "warn"], default="block")
    path = sub.add_parser("path", help="print the rules file the daemon reads")
    path.add_argument("--home", help="state directory (default $BOSUN_HOME or ~/.bosun)")


def run(args: argparse.Namespace) -> int:
    from bosun.core.errors import BosunError
    from bosun.core.guard.invariants import parse_rules

    if args.action == "path":
        print(config_of(args).invariants_path)
        return 0
    if args.action == "check":
        path = Path(args.file)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            print(f"error: cannot read {path}: {exc}", file=sys.stderr)
            return 1
        try:
            rules = parse_rules(text, str(path))
        except BosunError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"ok: {len(rules.rules)} rules in {path}: " + ", ".join(r.id for r in rules.rules))
        return 0
    return _add(args)


def _add(args: argparse.Namespace) -> int:
    import tomli_w

    from bosun.core.errors import BosunError
    from bosun.core.guard.invariants import Rule, parse_rules

    path = Path(args.file).expanduser() if args.file else config_of(args).invariants_path
    arg_patterns: list[tuple[str, str]] = []
    for item in args.arg or ():
        name, sep, pattern = item.partition("=")
        if not sep or not name:
            print(f"error: --arg {item!r}: expected NAME=PATTERN", file=sys.stderr)
            return 2
        arg_patterns.append((name, pattern))
    value: object = None
    if args.require_value is not None:
        try:
            value = json.loads(args.require_value)
        except json.JSONDecodeError:
            value = args.require_value
    rule = Rule(
        id=args.id, message=args.message, verdict=args.verdict, tools=tuple(args.tool or ()),
        path_globs=tuple(args.path_glob or ()), access=args.access or "write", arg_patterns=tuple(arg_patterns),
        require_state=args.require_state, require_value=value, has_value=args.require_value is not None,
        require_step=args.require_step,
    ).to_toml_dict()  # parse_rules below validates it exactly as the daemon will
    try:
        existing = path.read_text(encoding="utf-8") if path.exists() else ""
    except (OSError, UnicodeDecodeError) as exc:
        print(f"error: cannot read {path}: {exc}", file=sys.stderr)
        return 1
    block = tomli_w.dumps({"invariant": [rule]})
    joined = existing + ("\n" if existing and not existing.endswith("\n") else "") + ("\n" if existing else "") + block
    try:
        parse_rules(existing, str(path))
    except BosunError as exc:
        print(f"error: the existing file is invalid, fix it first: {exc}", file=sys.stderr)
        return 1
    try:
        rules = parse_rules(joined, str(path))
    except BosunError as exc:
        print(f"error: the new rule is invalid: {exc}", file=sys.stderr)
        return 1
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".invariants.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(joined)
        os.replace(tmp, path)  # atomic: the daemon never reads a half-written file
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        print(f"error: cannot write {path}: {exc}", file=sys.stderr)
        return 1
    print(f"added {args.id} to {path} ({len(rules.rules)} rules)")
    return 0
