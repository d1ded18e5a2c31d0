"""``handoff``: executable delegation contracts between agents (create, accept, complete, status).

The parent creates a contract (objective, input refs, inherited constraints, acceptance
checks, budget); a child accepts it once and completes it with a structured result,
which is checked against the contract and folded back into the parent's journal and seal.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from pydantic import Field

from bosun.server.engine import Engine
from bosun.server.surface import WRITES, tool

HandoffMode = Literal["create", "accept", "complete", "status"]


@tool(WRITES)
async def handoff(
    task_id: Annotated[str, Field(description="the parent task")],
    mode: HandoffMode,
    ctx: Context[Engine],
    handoff_id: Annotated[str | None, Field(description="accept/complete/status")] = None,
    objective: Annotated[str | None, Field(description="create: what the child must achieve")] = None,
    inputs: Annotated[list[str] | None, Field(description="create: refs the child needs")] = None,
    constraints: Annotated[list[str] | None, Field(description="create: extra to the inherited ones")] = None,
    checks: Annotated[list[dict[str, Any]] | None,
                      Field(description="create: [{field, op: present|equals|not_equals|min|max|matches|"
                                        "nonempty|contains|is_ref, value}]")] = None,
    budget: Annotated[dict[str, Any] | None, Field(description="create: {tokens, cost_usd}")] = None,
    to_agent: Annotated[str | None, Field(description="create: only this agent may accept")] = None,
    agent: Annotated[str | None, Field(description="your agent name (accept/complete)")] = None,
    result: Annotated[dict[str, Any] | None, Field(description="complete: your structured result")] = None,
    seal: Annotated[str | None, Field(description="your last SEAL: drift is reported against it")] = None,
) -> dict[str, Any]:
    """Delegate with a checked contract: create | accept | complete (result checked, folded into the parent) | status."""
    return await ctx.request_context.lifespan_context.handoff.run(
        task_id, mode, handoff_id, objective, inputs, constraints, checks, budget, to_agent, agent, result, seal)


TOOLS = [handoff]
