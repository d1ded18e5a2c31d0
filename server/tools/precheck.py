"""``precheck``: may this action run? allow / warn / block / suggest_alternative, with the reason.

Checked in order: invariants (``.bosun/invariants.toml``), the task's budget, the loop
guard (repeated failure, loop pattern, oscillation, runaway), duplicates (an identical
call whose result is stored is answered with that ref). See ``server/services/precheck.py`` for
where the invariants file is looked for and ``core/guard/loopguard.py`` for what counts as progress.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context

from bosun.server.engine import Engine
from bosun.server.surface import READ_ONLY, tool


@tool(READ_ONLY)
async def precheck(
    task_id: str,
    tool: str,
    ctx: Context[Engine],
    args: dict[str, Any] | None = None,
    seal: str | None = None,
) -> dict[str, Any]:
    """Before a tool call of yours: allow, warn, block or suggest_alternative, and why.

    Checked in order: the invariants (``.bosun/invariants.toml``), the task's budget, the loop
    guard (the same failure repeated, a loop pattern, oscillation, a runaway) and duplicates (an
    identical call whose result is stored is answered with that ref: reuse it with recall
    instead of running the call again). ``tool`` is the name you are about to call (``bash``,
    ``git.commit``), ``args`` the arguments you will pass it, ``seal`` your last SEAL (drift is
    reported against it). A block names the rule and the action it requires.
    """
    return await ctx.request_context.lifespan_context.precheck.check(task_id, tool, args, seal)


TOOLS = [precheck]
