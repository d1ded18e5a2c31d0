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
from bosun.server.services.plan import PlanRequest
from bosun.server.surface import WRITES, lifespan_engine, protocol_errors, tool

PlanMode = Literal["start", "update", "resume", "status"]


@tool(WRITES)
async def plan(
    mode: PlanMode,
    ctx: Context[Engine],
    task_id: Annotated[str, Field(description="task= of the manifest (all modes but start)")] = "",
    seal: Annotated[str, Field(description="your last SEAL; drift is reported against it")] = "",
    based_on_version: Annotated[int, Field(ge=0, description="update: the v= it is based on (0: none)")] = 0,
    objective: Annotated[str, Field(description="start only; immutable")] = "",
    steps: Annotated[tuple[str, ...], Field(description="start: the plan; update: replace it")] = (),
    constraints: Annotated[tuple[str, ...], Field(description="append")] = (),
    decisions: Annotated[tuple[str, ...], Field(description="append; pinned verbatim")] = (),
    start_step: str = "",
    complete: tuple[str, ...] = (),
    lessons: tuple[str, ...] = (),
    memory: Annotated[tuple[dict[str, str], ...], Field(description="[{scope,key,text}]")] = (),
    revise: Annotated[tuple[dict[str, Any], ...],
                      Field(description="rewrite pinned: [{collection,index,text,reason}]")] = (),
    rules: Annotated[str, Field(description="the task's rules (part of the head)")] = "",
    declare: Annotated[dict[str, int] | None, Field(description="known token counts: window,history,...")] = None,
    budget_tokens: Annotated[int, Field(ge=0, description="start: token budget")] = 0,
    close: Literal["done", "failed", "abandoned"] | None = None,
    agent: Annotated[str, Field(description="your agent name")] = "",
) -> dict[str, Any]:
    """Task state with a sealed manifest: start | update | resume | status. Carry the manifest; pass its SEAL."""
    req = PlanRequest(
        task_id=task_id or None, seal=seal or None, based_on_version=based_on_version or None,
        objective=objective or None, steps=list(steps) if steps else None, constraints=list(constraints),
        decisions=list(decisions), start_step=start_step or None, complete=list(complete), lessons=list(lessons),
        memory=list(memory), revise=list(revise), rules=rules or None, declare=declare,
        budget_tokens=budget_tokens or None, close=close, agent=agent or None)
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
