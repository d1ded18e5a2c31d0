"""AuditService: the claim audit and the source filter, with the daemon's warm model.

The default (semantic, hybrid) matcher embeds through ``engine.embed`` (memory and SQLite caches
keyed by content hash), and only the claims and their BM25 candidate sentences, so the cost does
not grow with the number of chunks and a repeated chunk is never embedded twice. One model run per new
text gives both its contextual word states (cached by digest in align.py; the token alignment of each
claim with its candidates) and its sentence vector (put into the embedding cache, so ``embed`` finds
it). While it waits
for the model (the first call after start also loads it), ``progress`` is told so, every few
seconds, so a caller can show that the audit is waiting and why.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol, TypeVar

import anyio
import numpy as np

from bosun.core.audit.align import TokenEncoder, WordStates, encoder_from_embedder, seed_pooled
from bosun.core.audit.audit import ComplianceViolation, plan_audit, resolve_matcher, run_audit
from bosun.core.audit.audit import filter_sources as core_filter
from bosun.core.audit.config import config_from_dict, parse_as_of
from bosun.core.embedding import CachingEmbedder, Vectors
from bosun.core.judge import Judge

Progress = Callable[[float, float | None, str], Awaitable[None]]
HEARTBEAT_S = 2.0  # how often a caller hears that the audit is still waiting for the model
T = TypeVar("T")


class _Embeds(Protocol):
    async def embed(self, texts: list[str]) -> Vectors: ...

    async def model_id(self) -> str: ...

    async def embedder(self) -> Any: ...

    async def judge(self) -> Judge | None: ...

    def judge_notice(self) -> str | None: ...


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
            vectors, words = await self._reporting(self._vectors_and_words(texts), what, progress)
        judge = await self._model.judge()
        if judge is not None and not getattr(judge, "has_claims", True):
            judge = None  # a relevance-only reranker: the rules decide
        if progress is not None:
            await progress(1.0, 1.0, f"matching {len(plan.claims)} claim(s)"
                           + (" and reading each with the judge" if judge is not None else ""))
        day = parse_as_of(as_of, "as_of")
        if judge is None:
            report = run_audit(plan, day, vectors, words)
        else:  # the judge's model run would hold the event loop: a worker thread runs it
            report = await anyio.to_thread.run_sync(lambda: run_audit(plan, day, vectors, words, judge))
        notice = self._model.judge_notice()
        if notice:
            report.setdefault("notices", []).append(notice)
        if cfg.matcher == "semantic":
            report["matcher_model"] = await self._model.model_id()
        return report

    async def _vectors_and_words(self, texts: list[str]) -> tuple[Vectors, list[WordStates] | None]:
        """The texts' sentence vectors and word states; with token states the model runs once per new text."""
        words = await self._word_states(texts)
        vectors = await self._model.embed(texts) if texts else np.zeros((0, 1), dtype=np.float32)
        return vectors, words

    async def _word_states(self, texts: list[str]) -> list[WordStates] | None:
        """Contextual word states of the texts from the warm model, in one model run per new text that also
        gives its sentence vector, which goes into the embedding cache (so ``embed`` after this runs
        nothing). None when the model has no token states (another model, a test double)."""
        embedder = await self._model.embedder()  # waits for the model load
        if self._encoder is None:
            self._encoder = encoder_from_embedder(embedder) or False
        if self._encoder is False or not texts:
            return None if self._encoder is False else []
        fresh: list[int] = []
        words = await asyncio.to_thread(self._encoder.encode, texts, fresh)
        if fresh and isinstance(embedder, CachingEmbedder):  # here, on the event loop, as engine.embed fills it
            seed_pooled(embedder, [texts[i] for i in fresh], [words[i] for i in fresh])
        return words

    async def _reporting(self, work: Awaitable[T], what: str, progress: Progress | None) -> T:
        """Await ``work``, telling ``progress`` what it waits for until it is done."""
        if progress is None:
            return await work
        await progress(0.0, 1.0, f"{what}; waiting for the embedding model (the first audit after start loads it)")
        started = time.monotonic()
        task = asyncio.ensure_future(work)
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
