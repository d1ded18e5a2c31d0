"""``plan``: start, update, resume or inspect a task; returns the sealed manifest.

Also registers the resources ``bosun://task/{task_id}/manifest`` and ``.../status`` and the
prompt ``task-resume``. The logic is ``PlanService`` (server/services/plan.py).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from bosun.server.engine import Engine
from bosun.server.services.plan import MORE_HELP, PlanRequest, apply_more
from bosun.server.surface import WRITES, lifespan_engine, protocol_errors, tool

PlanMode = Literal["start", "update", "resume", "status"]


@tool(WRITES)
async def plan(
    mode: PlanMode,
    ctx: Context[Engine],
    task_id: str | None = None,
    seal: str | None = None,
    based_on_version: int | None = None,
    objective: str | None = None,
    steps: list[str] | None = None,
    constraints: list[str] | None = None,
    decisions: list[str] | None = None,
    start_step: str | None = None,
    budget_tokens: Annotated[int | None, Field(ge=0)] = None,
    agent: str | None = None,
    more: Annotated[dict[str, Any] | None, Field(description=MORE_HELP)] = None,
) -> dict[str, Any]:
    """Task state: start, update as you work, resume after a context reset, status. Carry the manifest; send its SEAL as seal."""
    req = PlanRequest(
        task_id=task_id or None, seal=seal or None, based_on_version=based_on_version or None,
        objective=objective, steps=list(steps) if steps else None, constraints=list(constraints or ()),
        decisions=list(decisions or ()), start_step=start_step or None, budget_tokens=budget_tokens or None,
        agent=agent or None)
    apply_more(req, more)
    return await ctx.request_context.lifespan_context.plan.run(mode, req)


TOOLS = [plan]


def register(mcp: MCPServer[Engine], engine: Engine) -> None:
    @mcp.resource("bosun://task/{task_id}/manifest", mime_type="text/plain")
    @protocol_errors
    async def task_manifest(task_id: str, ctx: Context) -> str:  # type: ignore[type-arg]
        """The sealed manifest of an open task."""
        return await lifespan_engine(ctx).tasks.manifest(task_id)

    @mcp.resource("bosun://task/{task_id}/status", mime_type="application/json")
    @protocol_errors
    async def task_status(task_id: str, ctx: Context) -> str:  # type: ignore[type-arg]
        """Context pressure by zone, budget, plan progress and the zone hashes."""
        return json.dumps(await lifespan_engine(ctx).plan.status(task_id), ensure_ascii=False, sort_keys=True)

    @mcp.prompt(name="task-resume", title="Resume a task")
    @protocol_errors
    async def task_resume(task_id: str, ctx: Context) -> str:  # type: ignore[type-arg]
        """A clean recovery template filled from the task's journal."""
        return await lifespan_engine(ctx).plan.resume_prompt(task_id)
