"""``recall``: read only the needed part of a stored payload, verified against its hash."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from bosun.core.offload.query import DEFAULT_MAX_TOKENS
from bosun.server.engine import Engine
from bosun.server.surface import RECORDS, Answer, lifespan_engine, protocol_errors, tool

RecallOp = Literal["raw", "head", "tail", "range", "grep", "outline", "aggregate", "jsonl"]


@tool(RECORDS)
async def recall(
    ref: Annotated[str, Field(description="mem://sha256:<hex> from observe")],
    ctx: Context[Engine],
    op: RecallOp = "head",
    lines: Annotated[int, Field(ge=1, description="head/tail line count")] = 40,
    start: Annotated[int | None, Field(ge=0, description="range start: 1-based line, or byte offset")] = None,
    end: Annotated[int | None, Field(ge=0, description="range end (inclusive line / exclusive byte)")] = None,
    unit: Literal["lines", "bytes"] = "lines",
    pattern: Annotated[str | None, Field(description="grep/aggregate regex")] = None,
    context: Annotated[int, Field(ge=0, le=50)] = 0,
    max_matches: Annotated[int, Field(ge=1)] = 50,
    ignore_case: bool = False,
    max_tokens: Annotated[int, Field(ge=1)] = DEFAULT_MAX_TOKENS,
    max_bytes: Annotated[int, Field(ge=1)] = 64_000,
    where: Annotated[dict[str, Any] | None, Field(description="jsonl: {field.path: value}")] = None,
    fields: Annotated[list[str] | None, Field(description="jsonl: fields to keep")] = None,
    path: Annotated[str | None, Field(description="jsonl: list inside a JSON document")] = None,
    task_id: Annotated[str | None, Field(description="count this recall in the task's ledger")] = None,
) -> Answer:
    """Read part of a stored payload, verified against its hash: head|tail|range|grep|raw|outline|aggregate|jsonl."""
    out, text = await ctx.request_context.lifespan_context.recall.recall(
        ref, op, task_id, lines=lines, start=start, end=end, unit=unit, pattern=pattern, context=context,
        max_matches=max_matches, ignore_case=ignore_case, max_bytes=max_bytes, max_tokens=max_tokens,
        where=where, fields=fields, path=path,
    )
    return Answer(out, text)


TOOLS = [recall]


def register(mcp: MCPServer[Engine], engine: Engine) -> None:
    @mcp.resource("bosun://ref/{sha256}", mime_type="application/octet-stream")
    @protocol_errors
    async def ref_resource(sha256: str, ctx: Context) -> bytes:  # type: ignore[type-arg]
        """Raw bytes of a stored payload (full or short ref, as observe shows it), verified against its hash."""
        engine = lifespan_engine(ctx)
        return await engine.refs.get(await engine.recall.resolver.resolve(sha256, "sha256"))
