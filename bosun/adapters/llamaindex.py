"""LlamaIndex adapters: provenance and budget node postprocessors, and a query engine that audits its answer.

``pip install 'bosun-mcp[llamaindex]'``. Each is a real ``llama-index-core`` class, sync and async, and makes
one daemon call per use through ``ProvenanceMiddleware``:

- ``ProvenancePostprocessor(config=...)``: the nodes whose source the allowlist admits; each kept node's
  ``metadata["bosun_provenance"]`` counts the dropped ones and names them.
- ``BudgetPostprocessor(budget_tokens=800, strategy="hybrid")``: the nodes worth reading for the query within
  the budget, relevant and not redundant, in the daemon's order; ``metadata["bosun_selection"]`` holds each
  one's rank, score, relevance, novelty and tokens.
- ``ProvenanceQueryEngine(base_engine, config=...)`` (dokis's class of the same name): the base engine's
  response, audited against its source nodes (or the ``chunks`` you give); the trust report is
  ``response.metadata["provenance"]`` and the source nodes the allowlist blocks are taken out of
  ``response.source_nodes``. Under ``enforcement_mode="enforce"`` a failing answer raises ``ComplianceViolation``.

The nodes are copies, and bosun's metadata key is excluded from what the LLM and the embedder read, so the
index's own nodes and the prompts do not change.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

try:
    from llama_index.core.base.base_query_engine import BaseQueryEngine
    from llama_index.core.base.response.schema import RESPONSE_TYPE, AsyncStreamingResponse, Response
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.prompts.mixin import PromptMixinType
    from llama_index.core.schema import NodeWithScore, QueryBundle
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError("bosun.adapters.llamaindex needs llama-index-core: pip install 'bosun-mcp[llamaindex]'") from exc
from bosun.adapters._shared import DaemonFields, mark_kept, mark_picked
from bosun.core.errors import InvalidInput
from bosun.middleware import AuditReport, Client, ConfigLike, ProvenanceMiddleware, as_middleware

__all__ = ["BudgetPostprocessor", "ProvenancePostprocessor", "ProvenanceQueryEngine"]


def _with(item: NodeWithScore, key: str, info: dict[str, Any]) -> NodeWithScore:
    node = item.node.model_copy()
    node.metadata = {**node.metadata, key: info}
    node.excluded_llm_metadata_keys = [*node.excluded_llm_metadata_keys, key]
    node.excluded_embed_metadata_keys = [*node.excluded_embed_metadata_keys, key]
    return NodeWithScore(node=node, score=item.score)


class _DaemonPostprocessor(BaseNodePostprocessor, DaemonFields):
    """A node postprocessor that asks the daemon about the nodes."""

    def model_post_init(self, context: Any, /) -> None:
        super().model_post_init(context)
        self.connect()


class ProvenancePostprocessor(_DaemonPostprocessor):
    """The nodes whose source the allowlist admits; the rest dropped and counted."""

    @classmethod
    def class_name(cls) -> str:
        return "BosunProvenancePostprocessor"

    def _postprocess_nodes(self, nodes: list[NodeWithScore],
                           query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        return mark_kept(self._mw.filter(nodes), _with)

    async def _apostprocess_nodes(self, nodes: list[NodeWithScore],
                                  query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        return mark_kept(await self._mw.afilter(nodes), _with)


class BudgetPostprocessor(_DaemonPostprocessor):
    """The nodes worth reading for the query within ``budget_tokens`` (select_context), in order."""

    budget_tokens: int = 2000
    strategy: str | None = None  # hybrid (the daemon's default) | psi0 | mmr | baseline
    options: dict[str, Any] | None = None  # select_context's options (max_items, min_relevance, ...)

    @classmethod
    def class_name(cls) -> str:
        return "BosunBudgetPostprocessor"

    def _goal(self, query_bundle: QueryBundle | None) -> str:
        if query_bundle is None or not query_bundle.query_str.strip():
            raise InvalidInput("query_bundle", "is missing: the budget is spent on what the query needs",
                               "postprocess_nodes(nodes, query_str=...) or a query engine's query")
        return query_bundle.query_str

    def _postprocess_nodes(self, nodes: list[NodeWithScore],
                           query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        return mark_picked(self._mw.select(self._goal(query_bundle), nodes, budget_tokens=self.budget_tokens,
                                           strategy=self.strategy, options=self.options), _with)

    async def _apostprocess_nodes(self, nodes: list[NodeWithScore],
                                  query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        return mark_picked(await self._mw.aselect(self._goal(query_bundle), nodes, budget_tokens=self.budget_tokens,
                                                  strategy=self.strategy, options=self.options), _with)


class ProvenanceQueryEngine(BaseQueryEngine):
    """``base_engine``'s response, audited against its source nodes (or ``chunks``) by the daemon.

    A streaming response is read whole first: an answer is audited complete.
    """

    def __init__(self, base_engine: BaseQueryEngine, *, chunks: Sequence[Any] | None = None,
                 config: ConfigLike = None, client: Client | None = None,
                 middleware: ProvenanceMiddleware | None = None, url_key: str | None = None,
                 metadata_key: str = "provenance", callback_manager: CallbackManager | None = None) -> None:
        self.base_engine = base_engine
        self.chunks = list(chunks) if chunks is not None else None
        self.middleware = as_middleware(middleware, config, client, url_key)
        self.metadata_key = metadata_key
        super().__init__(callback_manager=callback_manager or base_engine.callback_manager)

    def _get_prompt_modules(self) -> PromptMixinType:
        return {"base_engine": self.base_engine}

    def _sources(self, response: Response) -> list[dict[str, Any]]:
        return self.middleware.chunks(self.chunks if self.chunks is not None else response.source_nodes)

    def _query(self, query_bundle: QueryBundle) -> RESPONSE_TYPE:
        response = _complete(self.base_engine.query(query_bundle))
        chunks = self._sources(response)
        report = self.middleware.audit(response.response or "", chunks, query=query_bundle.query_str)
        return self._annotated(response, chunks, report)

    async def _aquery(self, query_bundle: QueryBundle) -> RESPONSE_TYPE:
        raw = await self.base_engine.aquery(query_bundle)
        response = await raw.get_response() if isinstance(raw, AsyncStreamingResponse) else _complete(raw)
        chunks = self._sources(response)
        report = await self.middleware.aaudit(response.response or "", chunks, query=query_bundle.query_str)
        return self._annotated(response, chunks, report)

    def _annotated(self, response: Response, chunks: list[dict[str, Any]], report: AuditReport) -> Response:
        """The response with the report in its metadata and without the source nodes the allowlist blocks
        (the filter reads only a source's URL, so a blocked URL is blocked wherever it appears)."""
        sources = response.source_nodes
        if self.chunks is None:
            blocked = set(report.blocked_sources)
            sources = [n for n, c in zip(sources, chunks, strict=True) if c.get("source_url") not in blocked]
        return Response(response.response, sources, {**(response.metadata or {}), self.metadata_key: report})


def _complete(response: RESPONSE_TYPE) -> Response:
    """A response with its whole text (a stream is read to its end)."""
    if isinstance(response, Response):
        return response
    if isinstance(response, AsyncStreamingResponse):
        raise InvalidInput("response", "is an async stream", "aquery() for an async streaming engine")
    return response.get_response()
