"""``checkpoint``: snapshot, resume, completion report, and reversible compaction plans (nothing is deleted)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from pydantic import Field

from bosun.server.engine import Engine
from bosun.server.surface import WRITES, tool

DEFAULT_MAX_TOKENS = 1500  # bound on the resume/report text
CheckpointMode = Literal["snapshot", "resume", "report", "compact", "trim", "clear"]


@tool(WRITES)
async def checkpoint(
    task_id: str,
    mode: CheckpointMode,
    ctx: Context[Engine],
    seal: str | None = None,
    target_tokens: Annotated[int | None, Field(ge=1)] = None,
    prune_mode: Literal["cache_ttl", "conservative", "balanced", "aggressive"] | None = None,
    max_tokens: Annotated[int | None, Field(ge=1)] = None,
) -> dict[str, Any]:
    """Snapshot or resume a task's state, or plan to shrink its context (nothing is deleted).

    Modes: ``snapshot`` journals a checkpoint of the task's state; ``resume`` returns the text to
    continue from after a reset or in a new session; ``report`` the completion report (done,
    open, failures, savings); ``compact``, ``trim`` and ``clear`` return plans that move history
    out of the prompt into refs (recall brings any item back): ``trim`` frees about
    ``target_tokens``, ``prune_mode`` (default: BOSUN_PRUNE_MODE) picks how aggressively.
    ``max_tokens`` bounds the resume/report text (default 1500). ``seal`` is your last SEAL.
    """
    return await ctx.request_context.lifespan_context.checkpoint.run(
        task_id, mode, seal, target_tokens, prune_mode, max_tokens or DEFAULT_MAX_TOKENS)


TOOLS = [checkpoint]
