"""``audit`` and ``filter_sources``: is each claim of an answer supported by an allowed, fresh source?"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import Field

from bosun.server.engine import Engine
from bosun.server.protocol.progress import progress_reporter
from bosun.server.surface import READ_ONLY, tool

_CHUNKS_DOC = "[{content, source_url}]"


@tool(READ_ONLY)
async def audit(
    response: str,
    chunks: Annotated[list[dict[str, Any]], Field(description=_CHUNKS_DOC)],
    ctx: Context[Engine],
    query: str = "",
    config: dict[str, Any] | None = None,
    as_of: str | None = None,
) -> dict[str, Any]:
    """Check an answer's claims against its source chunks: verdicts, evidence, pass/fail.

    ``response`` is the answer to audit, ``chunks`` the sources it was written from (dokis
    shape: ``{content, source_url, metadata?, id?}``), ``query`` the question. Each claim gets
    ``supported``, ``partially_supported``, ``contradicted`` or ``unsupported``, with evidence
    spans, a confidence and its source; the report adds the provenance map, freshness and the
    compliance rate against ``min_citation_rate``. ``as_of`` (YYYY-MM-DD, default today) dates
    freshness. ``config`` keys: ``allowed_domains`` (host, ``*.host`` or ``host/path``),
    ``min_citation_rate``, ``claim_threshold`` (probability, default 0.5), ``extractor``
    (``claimify`` | ``regex``), ``matcher`` (``auto`` | ``semantic`` | ``bm25``; auto = semantic
    with the warm model), ``enforcement_mode`` (``audit`` reports, ``guardrail`` fails the
    verdict, ``enforce`` also withholds), ``max_source_age_days``, ``stale_source_action``
    (``warn`` | ``fail``), ``source_date_metadata_key``, ``domain``, ``as_of``. Progress is
    reported while the model loads and embeds when the call carries a progress token.
    """
    return await ctx.request_context.lifespan_context.audit.audit(query, chunks, response, config, as_of,
                                                                  progress=progress_reporter(ctx))


@tool(READ_ONLY)
async def filter_sources(
    chunks: Annotated[list[dict[str, Any]], Field(description=_CHUNKS_DOC)],
    ctx: Context[Engine],
    config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Keep the chunks an allowlist of sources admits; say why others were dropped.

    ``chunks`` as for audit (``{content, source_url, metadata?, id?}``). ``config.allowed_domains`` lists
    what is admitted: ``host``, ``*.host`` (subdomains) or
    ``host/path`` (a path prefix); the other ``config`` keys are audit's.
    """
    return ctx.request_context.lifespan_context.audit.filter_sources(chunks, config)


TOOLS = [audit, filter_sources]
