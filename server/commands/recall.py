"""``bosun recall REF``: read part of an offloaded output from a shell (the CLI twin of the recall tool).

    bosun recall mem://sha256:509ec4305adb4a5c --op grep --pattern '^FAILED' --task t_1a2b

Prints the part under a one-line header, bounded by ``--max-tokens``, verified against the hash.
Exit 1 on a missing or altered ref or bad input (the message names the field).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

NAME = "recall"
HELP = "read part of an offloaded output: head|tail|range|grep|raw|outline|aggregate|jsonl"
EXAMPLE = "bosun recall mem://sha256:94f21c624d08b551 --op grep --pattern ERROR"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ref", help="mem://sha256:<hex> (a 12+ hex prefix is enough)")
    parser.add_argument("--op", default="head",
                        choices=["raw", "head", "tail", "range", "grep", "outline", "aggregate", "jsonl"])
    parser.add_argument("--lines", type=int, default=40, help="head/tail line count")
    parser.add_argument("--start", type=int, help="range start: 1-based line, or byte offset with --unit bytes")
    parser.add_argument("--end", type=int, help="range end")
    parser.add_argument("--unit", choices=["lines", "bytes"], default="lines")
    parser.add_argument("--pattern", help="grep/aggregate regular expression")
    parser.add_argument("--context", type=int, default=0, help="grep context lines")
    parser.add_argument("--max-matches", type=int, default=50)
    parser.add_argument("-i", "--ignore-case", action="store_true")
    parser.add_argument("--where", help='jsonl filter as JSON, e.g. \'{"user.name": "a"}\'')
    parser.add_argument("--fields", help="jsonl fields to keep, comma-separated")
    parser.add_argument("--path", help="jsonl: the list inside a JSON document, e.g. results.items")
    parser.add_argument("--max-tokens", type=int, default=2000)
    parser.add_argument("--task", help="count this recall in the task's ledger")
    parser.add_argument("--home", help="state directory (default $BOSUN_HOME or ~/.bosun)")


async def _recall(args: argparse.Namespace) -> str:
    from bosun.server.commands import config_of
    from bosun.server.commands.observe import open_engine

    where: Any = None
    if args.where:
        try:
            where = json.loads(args.where)
        except ValueError as exc:
            from bosun.core.errors import InvalidInput

            raise InvalidInput("where", f"not JSON: {exc}", '\'{"field.path": "value"}\'') from exc
    fields = [f.strip() for f in args.fields.split(",") if f.strip()] if args.fields else None
    engine = await open_engine(config_of(args))
    try:
        _, text = await engine.recall.recall(
            args.ref, args.op, args.task, lines=args.lines, start=args.start, end=args.end, unit=args.unit,
            pattern=args.pattern, context=args.context, max_matches=args.max_matches, ignore_case=args.ignore_case,
            max_tokens=args.max_tokens, where=where, fields=fields, path=args.path,
        )
        return text
    finally:
        await engine.close()


def run(args: argparse.Namespace) -> int:
    import asyncio

    from bosun.core.errors import BosunError

    try:
        text = asyncio.run(_recall(args))
    except BosunError as exc:
        print(f"bosun recall: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0
