"""``recall``: read only the needed part of a stored payload, verified against its hash."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from bosun.core.offload.query import DEFAULT_MAX_TOKENS
from bosun.server.errors import tool_errors
from bosun.server.services.offload import as_result, offload_of, slim_tool
from bosun.store.refs import parse_ref

RecallOp = Literal["raw", "head", "tail", "range", "grep", "outline", "aggregate", "jsonl"]


def register(mcp: MCPServer[Any]) -> None:
    from bosun.server.app import engine_of

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
    @tool_errors
    async def recall(
        ref: Annotated[str, Field(description="mem://sha256:<hex> from observe")],
        ctx: Context[Any],
        op: RecallOp = "head",
        lines: Annotated[int, Field(description="head/tail line count")] = 40,
        start: Annotated[int | None, Field(description="range start: 1-based line, or byte offset")] = None,
        end: Annotated[int | None, Field(description="range end (inclusive line / exclusive byte)")] = None,
        unit: Literal["lines", "bytes"] = "lines",
        pattern: Annotated[str | None, Field(description="grep/aggregate regex")] = None,
        context: int = 0,
        max_matches: int = 50,
        ignore_case: bool = False,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        max_bytes: int = 64_000,
        where: Annotated[dict[str, Any] | None, Field(description="jsonl: {field.path: value}")] = None,
        fields: Annotated[list[str] | None, Field(description="jsonl: fields to keep")] = None,
        path: Annotated[str | None, Field(description="jsonl: list inside a JSON document")] = None,
        task_id: Annotated[str | None, Field(description="count this recall in the task's ledger")] = None,
    ) -> CallToolResult:
        """Read part of a stored payload, verified against its hash: head|tail|range|grep|raw|outline|aggregate|jsonl."""
        out, text = await offload_of(engine_of(ctx)).recall(
            ref, op, task_id, lines=lines, start=start, end=end, unit=unit, pattern=pattern, context=context,
            max_matches=max_matches, ignore_case=ignore_case, max_bytes=max_bytes, max_tokens=max_tokens,
            where=where, fields=fields, path=path,
        )
        return as_result(out, text)

    slim_tool(mcp, "recall")

    @mcp.resource("bosun://ref/{sha256}", mime_type="application/octet-stream")
    async def ref_resource(sha256: str, ctx: Context) -> bytes:  # type: ignore[type-arg]
        """Raw bytes of a stored payload, verified against its hash."""
        engine = engine_of(ctx)
        return await engine.refs.get(parse_ref(sha256, "sha256"))
