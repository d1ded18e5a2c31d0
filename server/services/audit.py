"""AuditService: the claim audit and the source filter, with the daemon's warm model.

The semantic matcher embeds through ``engine.embed`` (memory and SQLite caches keyed by
content hash), so a repeated chunk is never embedded twice.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from bosun.core.audit.audit import ComplianceViolation, plan_audit, run_audit
from bosun.core.audit.audit import filter_sources as core_filter
from bosun.core.audit.config import config_from_dict, parse_as_of
from bosun.core.embedding import Vectors


class _Embeds(Protocol):
    async def embed(self, texts: list[str]) -> Vectors: ...

    async def model_id(self) -> str: ...


class AuditService:
    """Audits answers and filters sources; the one place the tools and the tests call."""

    def __init__(self, model: _Embeds) -> None:
        self._model = model

    async def report(self, query: str, chunks: Any, response: str, config: dict[str, Any] | None,
                     as_of: str | None = None) -> dict[str, Any]:
        """The trust report; semantic vectors come from the warm model."""
        cfg = config_from_dict(config)
        plan = plan_audit(query, chunks, response, cfg)
        vectors = None
        if cfg.matcher == "semantic":
            texts = plan.texts_to_embed()
            vectors = await self._model.embed(texts) if texts else np.zeros((0, 1), dtype=np.float32)
        report = run_audit(plan, parse_as_of(as_of, "as_of"), vectors)
        if cfg.matcher == "semantic":
            report["matcher_model"] = await self._model.model_id()
        return report

    async def audit(self, query: str, chunks: Any, response: str, config: dict[str, Any] | None,
                    as_of: str | None = None) -> dict[str, Any]:
        """The report, raising ``ComplianceViolation`` when the config enforces and the answer fails."""
        report = await self.report(query, chunks, response, config, as_of)
        if report["raised_on_violation"]:
            raise ComplianceViolation(report)
        return report

    def filter_sources(self, chunks: Any, config: dict[str, Any] | None) -> dict[str, Any]:
        """The chunks the allowlist admits, and why each other one was dropped."""
        return core_filter(chunks, config_from_dict(config))
