"""AuditService: the claim audit and the source filter, with the daemon's warm model.

The default (semantic, hybrid) matcher embeds through ``engine.embed`` (memory and SQLite caches
keyed by content hash), and only the claims and their BM25 candidate sentences, so the cost does
not grow with the number of chunks and a repeated chunk is never embedded twice. The same texts'
contextual word states (the model's ONNX session, cached by digest in align.py) add the token
alignment of each claim with its candidates. While it waits
for the model (the first call after start also loads it), ``progress`` is told so, every few
seconds, so a caller can show that the audit is waiting and why.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol

import numpy as np

from bosun.core.audit.align import TokenEncoder, WordStates, encoder_from_embedder
from bosun.core.audit.audit import ComplianceViolation, plan_audit, resolve_matcher, run_audit
from bosun.core.audit.audit import filter_sources as core_filter
from bosun.core.audit.config import config_from_dict, parse_as_of
from bosun.core.embedding import Vectors

Progress = Callable[[float, float | None, str], Awaitable[None]]
HEARTBEAT_S = 2.0  # how often a caller hears that the audit is still waiting for the model


class _Embeds(Protocol):
    async def embed(self, texts: list[str]) -> Vectors: ...

    async def model_id(self) -> str: ...


class AuditService:
    """Audits answers and filters sources; the one place the tools and the tests call."""

    def __init__(self, model: _Embeds) -> None:
        self._model = model
        self._encoder: TokenEncoder | Literal[False] | None = None  # False: the model has no token states

    async def report(self, query: str, chunks: Any, response: str, config: dict[str, Any] | None,
                     as_of: str | None = None, progress: Progress | None = None) -> dict[str, Any]:
        """The trust report; semantic vectors come from the warm model."""
        cfg = resolve_matcher(config_from_dict(config), True)  # the daemon always has the model
        plan = plan_audit(query, chunks, response, cfg)
        vectors = None
        words: list[WordStates] | None = None
        if cfg.matcher == "semantic":
            texts = plan.texts_to_embed()
            what = (f"embedding {len(plan.claims)} claim(s) and {len(texts) - len(plan.claims)} candidate "
                    f"sentence(s) from {len(plan.admitted)} chunk(s)")
            vectors = (await self._embed_reporting(texts, what, progress) if texts
                       else np.zeros((0, 1), dtype=np.float32))
            words = await self._word_states(texts, progress)
        if progress is not None:
            await progress(1.0, 1.0, f"matching {len(plan.claims)} claim(s)")
        report = run_audit(plan, parse_as_of(as_of, "as_of"), vectors, words)
        if cfg.matcher == "semantic":
            report["matcher_model"] = await self._model.model_id()
        return report

    async def _word_states(self, texts: list[str], progress: Progress | None = None) -> list[WordStates] | None:
        """Contextual word states of the texts from the warm model's ONNX session (called after
        ``embed``, so the model is loaded); None when the model has no such session (a test double)."""
        if not texts:
            return []
        if self._encoder is None:
            embedder = getattr(self._model, "embedder", None)
            if embedder is None:
                return None
            self._encoder = encoder_from_embedder(await embedder()) or False
        if self._encoder is False:
            return None
        if progress is not None:
            await progress(0.5, 1.0, f"token states of {len(texts)} text(s) for the alignment (new texts only)")
        return await asyncio.to_thread(self._encoder.encode, texts)

    async def _embed_reporting(self, texts: list[str], what: str, progress: Progress | None) -> Vectors:
        """Embed, telling ``progress`` what it waits for until the vectors arrive."""
        if progress is None:
            return await self._model.embed(texts)
        await progress(0.0, 1.0, f"{what}; waiting for the embedding model (the first audit after start loads it)")
        started = time.monotonic()
        task = asyncio.ensure_future(self._model.embed(texts))
        while True:
            done, _ = await asyncio.wait({task}, timeout=HEARTBEAT_S)
            if done:
                return task.result()
            waited = time.monotonic() - started
            await progress(0.0, 1.0, f"{what}: still waiting for the embedding model after {waited:.0f} s "
                                     "(loading it, or it is busy with other requests)")

    async def audit(self, query: str, chunks: Any, response: str, config: dict[str, Any] | None,
                    as_of: str | None = None, progress: Progress | None = None) -> dict[str, Any]:
        """The report, raising ``ComplianceViolation`` when the config enforces and the answer fails."""
        report = await self.report(query, chunks, response, config, as_of, progress)
        if report["raised_on_violation"]:
            raise ComplianceViolation(report)
        return report

    def filter_sources(self, chunks: Any, config: dict[str, Any] | None) -> dict[str, Any]:
        """The chunks the allowlist admits, and why each other one was dropped."""
        return core_filter(chunks, config_from_dict(config))
