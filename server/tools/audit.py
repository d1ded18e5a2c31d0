"""``audit`` and ``filter_sources``: is each claim of an answer supported by an allowed, fresh source?"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import Field

from bosun.server.engine import Engine
from bosun.server.surface import READ_ONLY, tool

_CHUNKS_DOC = 'list of {content, source_url, metadata?, id?} (dokis shape)'
_CONFIG_DOC = (
    "allowed_domains, min_citation_rate, claim_threshold (probability, default 0.5), extractor "
    "(claimify|regex), matcher (auto|semantic|bm25; auto = semantic with the warm model), enforcement_mode (audit|guardrail|enforce), "
    "max_source_age_days, stale_source_action (warn|fail), source_date_metadata_key, domain, as_of"
)


@tool(READ_ONLY)
async def audit(
    response: Annotated[str, Field(description="the answer to audit")],
    chunks: Annotated[list[dict[str, Any]], Field(description=_CHUNKS_DOC)],
    ctx: Context[Engine],
    query: str = "",
    config: Annotated[dict[str, Any] | None, Field(description=_CONFIG_DOC)] = None,
    as_of: Annotated[str | None, Field(description="YYYY-MM-DD for freshness (default today)")] = None,
) -> dict[str, Any]:
    """Check each claim of an answer against the chunks: supported / partially_supported / contradicted /
    unsupported, with evidence spans, confidence, provenance map, freshness and a pass/fail trust verdict."""
    return await ctx.request_context.lifespan_context.audit.audit(query, chunks, response, config, as_of,
                                                                  progress=ctx.report_progress)


@tool(READ_ONLY)
async def filter_sources(
    chunks: Annotated[list[dict[str, Any]], Field(description=_CHUNKS_DOC)],
    ctx: Context[Engine],
    config: Annotated[dict[str, Any] | None, Field(description="allowed_domains: host, *.host or host/path")] = None,
) -> dict[str, Any]:
    """Keep the chunks whose source the allowlist admits; say why each other one was dropped."""
    return ctx.request_context.lifespan_context.audit.filter_sources(chunks, config)


TOOLS = [audit, filter_sources]
