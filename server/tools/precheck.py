"""``precheck``: may this action run? allow / warn / block / suggest_alternative, with the reason.

Checked in order: invariants (``.bosun/invariants.toml``), the task's budget, the loop
guard (repeated failure, loop pattern, oscillation, runaway), duplicates (an identical
call whose result is stored is answered with that ref). See ``server/services/precheck.py`` for
where the invariants file is looked for and ``core/guard/loopguard.py`` for what counts as progress.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import ToolAnnotations
from pydantic import Field

from bosun.server.errors import tool_errors
from bosun.server.services.precheck import precheck_of

if TYPE_CHECKING:
    from bosun.server.engine import Engine

log = logging.getLogger("bosun.precheck")


async def on_open(engine: Engine) -> None:
    """Read the invariants file once at start, so a broken file is logged before the first call."""
    svc = precheck_of(engine)
    rules = svc.invariants.current()
    if svc.invariants.error:
        log.error("invariants: %s", svc.invariants.error)
    elif rules.rules:
        log.info("invariants: %d rules from %s", len(rules.rules), svc.invariants.path)


def register(mcp: MCPServer[Any]) -> None:
    from bosun.server.app import engine_of

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True), structured_output=True)
    @tool_errors
    async def precheck(
        task_id: Annotated[str, Field(description="task= of the manifest")],
        tool: Annotated[str, Field(description="the tool you are about to call, e.g. bash, git.commit")],
        ctx: Context[Any],
        args: Annotated[dict[str, Any] | None, Field(description="the arguments you will pass it")] = None,
        seal: Annotated[str | None, Field(description="your last SEAL: drift is reported against it")] = None,
    ) -> dict[str, Any]:
        """Before an action: allow | warn | block | suggest_alternative (reuse the ref), with reasons and rule."""
        return await precheck_of(engine_of(ctx)).check(task_id, tool, args, seal)
