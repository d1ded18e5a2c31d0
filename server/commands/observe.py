"""``bosun observe``: offload a command's output from a shell pipe (for bash-only agents and harnesses).

    pytest -q 2>&1 | bosun observe --task t_1a2b --command "pytest -q"

Prints the output unchanged when it is small (the pipe is transparent), or the stub (ref, sizes,
outline, recall calls) when it was offloaded; either way the output is scrubbed of secrets,
stored and journaled in the task, exactly as the MCP ``observe`` tool does. Fetch parts later
with ``bosun recall``. Writes to the same database as a running daemon (SQLite WAL, busy wait).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from bosun.server.commands import config_of
from bosun.server.config import Config

NAME = "observe"
HELP = "offload a piped command output into a task (prints it back, or its stub when large)"
EXAMPLE = 'pytest -q 2>&1 | bosun observe --task t_3f9a1c2b7d4e --command "pytest -q"'


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task", required=True, help="the task id (task= of the manifest)")
    parser.add_argument("--command", default="", help="the command that produced the output (journaled, redacted)")
    parser.add_argument("--tool", default="bash", help="tool name (default: bash)")
    parser.add_argument("--failed", action="store_true", help="the command failed (journal a tool_failure)")
    parser.add_argument("--mode", choices=["cache_ttl", "conservative", "balanced", "aggressive"],
                        help="pruning mode for this output (default: the task's, else BOSUN_PRUNE_MODE)")
    parser.add_argument("--home", help="state directory (default $BOSUN_HOME or ~/.bosun)")


async def open_engine(config: Config) -> Any:
    """An Engine on ``config`` without the embedding model (offloading never needs it)."""
    from bosun.core.embedding import HashEmbedder
    from bosun.server.engine import Engine

    engine = Engine(config, embedder_factory=lambda _c: HashEmbedder(8))
    await engine.open(watch_policies=False)
    return engine


async def _observe(args: argparse.Namespace, text: str) -> dict[str, Any]:

    engine = await open_engine(config_of(args))
    try:
        svc = engine.observe
        cmd_args: dict[str, Any] = {"command": args.command} if args.command else {}
        return await svc.observe_output(args.task, args.failed, args.tool, cmd_args, text, mode=args.mode)
    finally:
        await engine.close()


def run(args: argparse.Namespace) -> int:
    import asyncio

    from bosun.core.errors import BosunError

    text = sys.stdin.buffer.read().decode("utf-8", "replace")
    try:
        answer = asyncio.run(_observe(args, text))
    except BosunError as exc:
        sys.stdout.write(text)  # never swallow the output the agent is waiting for
        print(f"bosun observe: {exc}", file=sys.stderr)
        return 2
    if answer.get("offloaded"):
        print(json.dumps(answer, separators=(",", ":"), ensure_ascii=False))
    else:
        sys.stdout.write(text)
    return 0
