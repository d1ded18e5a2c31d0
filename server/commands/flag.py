"""``bosun flag``: set, clear or list a task's named flags from a shell (a person's review, a CI result).

    bosun flag set t_1a2b review_approved --why "PR #12 approved" --by alice
    bosun flag set t_1a2b env '"staging"' --why "deployed to staging"
    bosun flag clear t_1a2b review_approved --why "new commits after the review" --by bob
    bosun flag list t_1a2b [--json]

The same journal event as ``plan(mode="update", more={"flags": ..., "why": ...})``: who (``--by``)
and why are recorded, the seal moves, and invariants that ``require = {state = NAME}`` see it.
A value is JSON (``true`` by default); flags bosun sets from evidence (tests_passed) are refused.
Exit 1 on bad input or an unknown task (the message names the field).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

NAME = "flag"
HELP = "set, clear or list a task's named flags (review_approved, ...), journaled with who and why"
EXAMPLE = 'bosun flag set t_3f9a1c2b7d4e review_approved --why "PR #12 approved" --by alice'


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["set", "clear", "list"])
    parser.add_argument("task_id", help="the task (task= of its manifest)")
    parser.add_argument("name", nargs="?", help="the flag (set / clear)")
    parser.add_argument("value", nargs="?", default="true", help="set: a JSON value (default true)")
    parser.add_argument("--why", help="the reason (required for set / clear)")
    parser.add_argument("--by", help="who sets it (recorded as the agent)")
    parser.add_argument("--json", action="store_true", help="list: print JSON")
    parser.add_argument("--home", help="state directory (default $BOSUN_HOME or ~/.bosun)")


async def _flag(args: argparse.Namespace) -> dict[str, Any]:
    from bosun.core.errors import InvalidInput
    from bosun.core.task.flags import flag_view
    from bosun.server.commands import config_of
    from bosun.server.commands.observe import open_engine
    from bosun.server.services.plan import PlanRequest

    engine = await open_engine(config_of(args))
    try:
        if args.action == "list":
            return flag_view(await engine.tasks.get(args.task_id))
        if not args.name:
            raise InvalidInput("name", f"is required to {args.action} a flag", "e.g. review_approved")
        value: Any = None
        if args.action == "set":
            try:
                value = json.loads(args.value)
            except ValueError as exc:
                raise InvalidInput("value", f"not JSON: {args.value!r}", "true, false, 3, '\"staging\"'") from exc
        req = PlanRequest(task_id=args.task_id, flags={args.name: value}, why=args.why, agent=args.by)
        out = await engine.plan.run("update", req)
        return {"task_id": out["task_id"], "version": out["version"], "seal": out["seal"],
                "flags": flag_view(await engine.tasks.get(args.task_id))}
    finally:
        await engine.close()


def run(args: argparse.Namespace) -> int:
    import asyncio

    from bosun.core.errors import BosunError

    try:
        out = asyncio.run(_flag(args))
    except BosunError as exc:
        print(f"bosun flag: {exc}", file=sys.stderr)
        return 1
    if args.json or args.action != "list":
        print(json.dumps(out, ensure_ascii=False, sort_keys=True))
        return 0
    for name, item in out.items():
        print(f"{name}={json.dumps(item['value'])}  by={item['by'] or '-'}  source={item['source']}  "
              f"why={item['why'] or '-'}")
    return 0
