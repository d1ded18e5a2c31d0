"""``recall``: read only the needed part of a stored payload, verified against its hash."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from bosun.core.offload.query import DEFAULT_MAX_TOKENS
from bosun.server.engine import Engine
from bosun.server.surface import RECORDS, Answer, lifespan_engine, protocol_errors, tool

# defaults applied here, said in the docs: the listing is paid for on every turn
DEFAULT_LINES = 40
DEFAULT_MAX_MATCHES = 50
DEFAULT_MAX_BYTES = 64_000
RecallOp = Literal["raw", "head", "tail", "range", "grep", "outline", "aggregate", "jsonl"]


@tool(RECORDS)
async def recall(
    ref: str,
    ctx: Context[Engine],
    op: RecallOp | None = None,
    lines: Annotated[int | None, Field(ge=1)] = None,
    start: Annotated[int | None, Field(ge=0)] = None,
    end: Annotated[int | None, Field(ge=0)] = None,
    unit: Literal["lines", "bytes"] | None = None,
    pattern: str | None = None,
    context: Annotated[int, Field(ge=0, le=50)] = 0,
    max_matches: Annotated[int | None, Field(ge=1)] = None,
    ignore_case: bool = False,
    max_tokens: Annotated[int | None, Field(ge=1)] = None,
    max_bytes: Annotated[int | None, Field(ge=1)] = None,
    where: dict[str, Any] | None = None,
    fields: list[str] | None = None,
    path: str | None = None,
    task_id: str | None = None,
) -> Answer:
    """Read just the part you need of an output observe stored (its ref).

    Every read is verified against the ref's hash.

    ``ref`` is the ``mem://sha256:<hex>`` observe returned (or its short form). Ops (default ``head``):
    ``head``/``tail``: the first/last ``lines`` lines (default 40). ``range``: ``start``..``end`` counted in
    ``unit`` (``lines``, the default: 1-based, end inclusive; ``bytes``: offset, end exclusive). ``grep``: the lines
    matching the regular expression ``pattern`` (``ignore_case``), with ``context`` lines around
    each, at most ``max_matches`` (default 50). ``raw``: the payload itself, at most ``max_bytes``
    (default 64000).
    ``outline``: its structure (JSON keys, headings, line count). ``aggregate``: how often each
    match of ``pattern`` occurs. ``jsonl``: the records of a JSON Lines payload (or of the list
    at the dotted ``path`` inside one JSON document) that match ``where``
    (``{field.path: value}``), cut to ``fields``. Every answer is bounded by ``max_tokens`` (default 2000).
    ``task_id`` counts the recall in that task's ledger. Examples:
    ``recall(ref, op="grep", pattern="ERROR|FAIL", context=2)``;
    ``recall(ref, op="jsonl", where={"status": "failed"}, fields=["id", "error"])``.
    """
    out, text = await ctx.request_context.lifespan_context.recall.recall(
        ref, op or "head", task_id, lines=lines or DEFAULT_LINES, start=start, end=end, unit=unit or "lines", pattern=pattern,
        context=context,
        max_matches=max_matches or DEFAULT_MAX_MATCHES, ignore_case=ignore_case, max_bytes=max_bytes or DEFAULT_MAX_BYTES,
        max_tokens=max_tokens or DEFAULT_MAX_TOKENS,
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
