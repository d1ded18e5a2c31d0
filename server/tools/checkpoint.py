"""``checkpoint``: snapshot, resume, completion report, and reversible compaction plans (nothing is deleted)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from pydantic import Field

from bosun.server.engine import Engine
from bosun.server.surface import WRITES, tool

CheckpointMode = Literal["snapshot", "resume", "report", "compact", "trim", "clear"]


@tool(WRITES)
async def checkpoint(
    task_id: str,
    mode: CheckpointMode,
    ctx: Context[Engine],
    seal: Annotated[str | None, Field(description="your last SEAL")] = None,
    target_tokens: Annotated[int | None, Field(ge=1, description="trim: tokens to free")] = None,
    prune_mode: Literal["cache_ttl", "conservative", "balanced", "aggressive"] | None = None,
    max_tokens: Annotated[int, Field(ge=1, description="bound on resume/report text")] = 1500,
) -> dict[str, Any]:
    """Snapshot | resume | report | compact | trim | clear (plans move history into refs; nothing is deleted)."""
    return await ctx.request_context.lifespan_context.checkpoint.run(
        task_id, mode, seal, target_tokens, prune_mode, max_tokens)


TOOLS = [checkpoint]
