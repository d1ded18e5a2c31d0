"""LangChain adapters: provenance and budget retrievers, and an answer audit, on the warm daemon.

``pip install 'bosun-mcp[langchain]'``. Each is a real ``langchain-core`` class (``BaseRetriever`` or
``Runnable``), sync and async, and makes one daemon call per invocation through ``ProvenanceMiddleware``:

- ``ProvenanceRetriever(base_retriever=..., config=...)``: the base retriever's documents that the allowlist
  admits (dokis's class of the same name); each kept document's ``metadata["bosun_provenance"]`` counts the
  dropped ones and names them.
- ``BudgetRetriever(base_retriever=..., budget_tokens=800, strategy="hybrid")``: the documents worth reading
  within the budget, relevant and not redundant, in the daemon's order; ``metadata["bosun_selection"]`` holds
  each one's rank, score, relevance, novelty and tokens.
- ``AnswerAudit(config=...)``: a runnable for the end of a chain. It reads ``answer``, ``context`` (the
  documents) and ``question`` from its input dict and adds ``provenance``, the trust report; in
  ``enforcement_mode="enforce"`` a failing answer raises ``ComplianceViolation`` instead.

The documents are copies: the base retriever's objects are not changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

try:
    from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import Runnable, RunnableConfig
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError("bosun.adapters.langchain needs langchain-core: pip install 'bosun-mcp[langchain]'") from exc
from bosun.adapters._shared import DaemonFields, mark_kept, mark_picked
from bosun.core.errors import InvalidInput
from bosun.middleware import AuditReport, Client, ConfigLike, ProvenanceMiddleware, answer_text, as_middleware

__all__ = ["AnswerAudit", "BudgetRetriever", "ProvenanceRetriever"]


def _with(doc: Document, key: str, info: dict[str, Any]) -> Document:
    return doc.model_copy(update={"metadata": {**doc.metadata, key: info}})


class _DaemonRetriever(BaseRetriever, DaemonFields):
    """A retriever over ``base_retriever`` that asks the daemon about its documents."""

    base_retriever: BaseRetriever

    def model_post_init(self, context: Any, /) -> None:
        super().model_post_init(context)
        self.connect()

    def _base(self, query: str, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return self.base_retriever.invoke(query, config={"callbacks": run_manager.get_child()})

    async def _abase(self, query: str, run_manager: AsyncCallbackManagerForRetrieverRun) -> list[Document]:
        return await self.base_retriever.ainvoke(query, config={"callbacks": run_manager.get_child()})


class ProvenanceRetriever(_DaemonRetriever):
    """The base retriever's documents whose source the allowlist admits; the rest dropped and counted."""

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return mark_kept(self._mw.filter(self._base(query, run_manager)), _with)

    async def _aget_relevant_documents(self, query: str, *,
                                       run_manager: AsyncCallbackManagerForRetrieverRun) -> list[Document]:
        return mark_kept(await self._mw.afilter(await self._abase(query, run_manager)), _with)


class BudgetRetriever(_DaemonRetriever):
    """The base retriever's documents worth reading within ``budget_tokens`` (select_context), in order."""

    budget_tokens: int = 2000
    strategy: str | None = None  # hybrid (the daemon's default) | psi0 | mmr | baseline
    options: dict[str, Any] | None = None  # select_context's options (max_items, min_relevance, ...)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        docs = self._base(query, run_manager)
        return mark_picked(self._mw.select(query, docs, budget_tokens=self.budget_tokens, strategy=self.strategy,
                                           options=self.options), _with)

    async def _aget_relevant_documents(self, query: str, *,
                                       run_manager: AsyncCallbackManagerForRetrieverRun) -> list[Document]:
        docs = await self._abase(query, run_manager)
        return mark_picked(await self._mw.aselect(query, docs, budget_tokens=self.budget_tokens,
                                                  strategy=self.strategy, options=self.options), _with)


class AnswerAudit(Runnable[Mapping[str, Any], dict[str, Any]]):
    """The last step of a chain: audit ``input[answer_key]`` against the documents in ``input[context_key]``.

    Returns the input with ``output_key`` (default ``provenance``) set to the trust report, whose
    ``trust_passed`` says whether the answer holds. Under ``enforcement_mode="enforce"`` a failing answer raises
    ``bosun.middleware.ComplianceViolation``; ``audit`` and ``guardrail`` annotate.
    """

    def __init__(self, config: ConfigLike = None, *, client: Client | None = None,
                 middleware: ProvenanceMiddleware | None = None, url_key: str | None = None,
                 answer_key: str = "answer", context_key: str = "context", question_key: str = "question",
                 output_key: str = "provenance") -> None:
        self.middleware = as_middleware(middleware, config, client, url_key)
        self.answer_key, self.context_key, self.question_key = answer_key, context_key, question_key
        self.output_key = output_key

    def _parts(self, data: Mapping[str, Any]) -> tuple[str, list[Any], str | None]:
        if not isinstance(data, Mapping):
            raise InvalidInput("input", f"is a {type(data).__name__}",
                               f"a dict with {self.answer_key!r} and {self.context_key!r}")
        for key in (self.answer_key, self.context_key):
            if key not in data:
                raise InvalidInput(f"input.{key}", "is missing", f"the keys {self.answer_key!r} and {self.context_key!r}")
        question = data.get(self.question_key)
        return answer_text(data[self.answer_key]), list(data[self.context_key]), \
            question if isinstance(question, str) else None

    def _audit(self, data: Mapping[str, Any]) -> dict[str, Any]:
        answer, docs, question = self._parts(data)
        return self._out(data, self.middleware.audit(answer, docs, query=question))

    async def _aaudit(self, data: Mapping[str, Any]) -> dict[str, Any]:
        answer, docs, question = self._parts(data)
        return self._out(data, await self.middleware.aaudit(answer, docs, query=question))

    def _out(self, data: Mapping[str, Any], report: AuditReport) -> dict[str, Any]:
        return {**data, self.output_key: report}

    def invoke(self, input: Mapping[str, Any], config: RunnableConfig | None = None, **kwargs: Any) -> dict[str, Any]:
        return self._call_with_config(self._audit, input, config)

    async def ainvoke(self, input: Mapping[str, Any], config: RunnableConfig | None = None,
                      **kwargs: Any) -> dict[str, Any]:
        return await self._acall_with_config(self._aaudit, input, config)
