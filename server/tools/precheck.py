"""``precheck``: may this action run? allow / warn / block / suggest_alternative, with the reason.

Checked in order: invariants (``.bosun/invariants.toml``), the task's budget, the loop
guard (repeated failure, loop pattern, oscillation, runaway), duplicates (an identical
call whose result is stored is answered with that ref). See ``server/services/precheck.py`` for
where the invariants file is looked for and ``core/guard/loopguard.py`` for what counts as progress.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import Field

from bosun.server.engine import Engine
from bosun.server.surface import READ_ONLY, tool


@tool(READ_ONLY)
async def precheck(
    task_id: Annotated[str, Field(description="task= of the manifest")],
    tool: Annotated[str, Field(description="the tool you are about to call, e.g. bash, git.commit")],
    ctx: Context[Engine],
    args: Annotated[dict[str, Any] | None, Field(description="the arguments you will pass it")] = None,
    seal: Annotated[str | None, Field(description="your last SEAL: drift is reported against it")] = None,
) -> dict[str, Any]:
    """Before an action: allow | warn | block | suggest_alternative (reuse the ref), with reasons and rule."""
    return await ctx.request_context.lifespan_context.precheck.check(task_id, tool, args, seal)


TOOLS = [precheck]
