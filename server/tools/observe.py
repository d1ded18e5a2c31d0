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

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult
from pydantic import Field

from bosun.core.errors import InvalidInput
from bosun.server.errors import tool_errors
from bosun.server.services.offload import as_result, offload_of, slim_tool
from bosun.server.services.tasks import check_task_id, tasks_of

ObserveKind = Literal["result", "failure", "dropped", "file", "decision", "constraint", "head", "contract"]
PruneModeName = Literal["cache_ttl", "conservative", "balanced", "aggressive"]


def register(mcp: MCPServer[Any]) -> None:
    from bosun.server.app import engine_of

    @mcp.tool()
    @tool_errors
    async def observe(
        task_id: str,
        kind: ObserveKind,
        ctx: Context[Any],
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
    ) -> CallToolResult:
        """Log an action. Big results come back as a stub (ref + outline); fetch parts with recall."""
        engine = engine_of(ctx)
        svc = offload_of(engine)
        task_id = check_task_id(task_id)
        drift = await tasks_of(engine).check_seal(task_id, seal) if seal else None
        if kind in ("result", "failure"):
            out = await svc.observe_output(task_id, kind == "failure", tool, args, result, mode, offload, agent)
        elif kind == "dropped":
            items = list(refs or []) + ([result] if result else [])
            out = await svc.drop(task_id, items, agent)
        elif kind == "file":
            if path is None:
                raise InvalidInput("path", "kind='file' needs the path of the file read")
            out = await svc.observe_file(task_id, path, agent)
        else:
            out = await svc.observe_text(task_id, kind, text if text is not None else result, agent)
        if drift is not None:  # lean when intact: the full block only when something drifted
            out["drift"] = "ok" if drift.get("verdict") == "ok" else drift
        return as_result(out)

    slim_tool(mcp, "observe")
