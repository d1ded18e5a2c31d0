"""``audit`` and ``filter_sources``: is each claim of an answer supported by an allowed, fresh source?

The semantic matcher uses the daemon's warm model through ``engine.embed`` (memory and
SQLite caches keyed by content hash), so a repeated chunk is never embedded twice.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import ToolAnnotations
from pydantic import Field

from bosun.core.audit.audit import ComplianceViolation, plan_audit, run_audit
from bosun.core.audit.audit import filter_sources as core_filter
from bosun.core.audit.config import config_from_dict, parse_as_of
from bosun.server.errors import tool_errors

_CHUNKS_DOC = 'list of {content, source_url, metadata?, id?} (dokis shape)'
_CONFIG_DOC = (
    "allowed_domains, min_citation_rate, claim_threshold (probability, default 0.5), extractor "
    "(claimify|regex), matcher (bm25|semantic), enforcement_mode (audit|guardrail|enforce), "
    "max_source_age_days, stale_source_action (warn|fail), source_date_metadata_key, domain, as_of"
)


async def audit_report(engine: Any, query: str, chunks: Any, response: str, config: dict[str, Any] | None,
                       as_of: str | None = None) -> dict[str, Any]:
    """The audit as the tool runs it (shared with tests): semantic vectors come from the Engine."""
    cfg = config_from_dict(config)
    plan = plan_audit(query, chunks, response, cfg)
    vectors = None
    if cfg.matcher == "semantic":
        texts = plan.texts_to_embed()
        vectors = await engine.embed(texts) if texts else None
        if vectors is None:
            import numpy as np

            vectors = np.zeros((0, 1), dtype=np.float32)
    report = run_audit(plan, parse_as_of(as_of, "as_of"), vectors)
    if cfg.matcher == "semantic":
        report["matcher_model"] = (await engine.embedder()).model_id()
    return report


def register(mcp: MCPServer[Any]) -> None:
    from bosun.server.app import engine_of

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True), structured_output=True)
    @tool_errors
    async def audit(
        response: Annotated[str, Field(description="the answer to audit")],
        chunks: Annotated[list[dict[str, Any]], Field(description=_CHUNKS_DOC)],
        ctx: Context[Any],
        query: str = "",
        config: Annotated[dict[str, Any] | None, Field(description=_CONFIG_DOC)] = None,
        as_of: Annotated[str | None, Field(description="YYYY-MM-DD for freshness (default today)")] = None,
    ) -> dict[str, Any]:
        """Check each claim of an answer against the chunks: supported / contradicted / unsupported,
        with evidence spans, confidence, provenance map, freshness and a pass/fail trust verdict."""
        report = await audit_report(engine_of(ctx), query, chunks, response, config, as_of)
        if report["raised_on_violation"]:
            raise ComplianceViolation(report)
        return report

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True), structured_output=True)
    @tool_errors
    async def filter_sources(
        chunks: Annotated[list[dict[str, Any]], Field(description=_CHUNKS_DOC)],
        config: Annotated[dict[str, Any] | None, Field(description="allowed_domains: host, *.host or host/path")] = None,
    ) -> dict[str, Any]:
        """Keep the chunks whose source the allowlist admits; say why each other one was dropped."""
        return core_filter(chunks, config_from_dict(config))
