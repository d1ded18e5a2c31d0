"""``observe``: log an action and its outcome; large results leave the prompt behind a stub.

kind=result|failure: the output is scrubbed of secrets, stored (verified ref),
journaled, and either passed through (small: the agent keeps it, bosun answers
in ~10 tokens) or replaced by a stub (ref, sizes, outline, recall calls).
kind=dropped: the drop receipt that credits savings. kind=file: path, sha256,
mtime, size of a file under BOSUN_ROOTS. kind=decision|constraint: appended to
the task. kind=head|contract: the system head / tool contract, checked for
cache-busting volatile tokens.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from pydantic import Field

from bosun.server.engine import Engine
from bosun.server.surface import WRITES, tool

ObserveKind = Literal["result", "failure", "dropped", "file", "decision", "constraint", "head", "contract"]
PruneModeName = Literal["cache_ttl", "conservative", "balanced", "aggressive"]


@tool(WRITES)
async def observe(
    task_id: str,
    kind: ObserveKind,
    ctx: Context[Engine],
    tool: Annotated[str | None, Field(description="result/failure: tool name")] = None,
    args: Annotated[Any, Field(description="result/failure: the tool's arguments")] = None,
    result: Annotated[Any, Field(description="output (text, or JSON); dropped: the ref")] = None,
    seal: Annotated[str | None, Field(description="your last SEAL")] = None,
    path: Annotated[str | None, Field(description="file: path under BOSUN_ROOTS")] = None,
    text: Annotated[str | None, Field(description="decision/constraint/head/contract text")] = None,
    refs: Annotated[list[str] | None, Field(description="dropped: refs evicted")] = None,
    mode: Annotated[PruneModeName | None, Field(description="pruning mode for this call")] = None,
    offload: Annotated[bool | None, Field(description="force offload (true) or pass-through (false)")] = None,
    agent: str | None = None,
) -> dict[str, Any]:
    """Log an action. Big results come back as a stub (ref + outline); fetch parts with recall."""
    return await ctx.request_context.lifespan_context.observe.run(
        task_id, kind, tool, args, result, seal, path, text, refs, mode, offload, agent)


TOOLS = [observe]
