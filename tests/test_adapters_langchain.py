"""bosun.adapters.langchain: real langchain-core chains over an in-memory retriever, a fake LLM, a real daemon.

Each chain retrieves from ``InMemoryVectorStore`` (deterministic fake embeddings), drops the sources the
allowlist blocks, spends a token budget, writes the answer with ``FakeListLLM`` and audits it, sync and async.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import FakeListLLM
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import PromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore
from pydantic import ValidationError

from bosun import ComplianceViolation, ProvenanceMiddleware
from bosun.adapters.langchain import AnswerAudit, BudgetRetriever, ProvenanceRetriever
from bosun.client import ConnectionFailed
from tests.live_daemon import Counting, closed_url, live_client, live_daemon  # noqa: F401  (the fixtures)

ALLOWED = {"allowed_domains": ["postgresql.org"]}
DOCS = [
    Document("PostgreSQL 16 was released on 14 September 2023. It adds logical replication from standby servers.",
             metadata={"source": "https://www.postgresql.org/about/news/postgresql-16-released-2715/"}),
    Document("PL/Python lets functions and procedures be written in Python. It ships with the core distribution.",
             metadata={"source": "https://www.postgresql.org/docs/16/plpython.html"}),
    Document("PostgreSQL 16 came out in September 2023 and added logical replication from standby servers.",
             metadata={"source": "https://www.postgresql.org/docs/16/release-16.html"}),
    Document("PostgreSQL 16 doubles write throughput on every workload, insiders say.",
             metadata={"source": "https://db-gossip.example.net/secrets"}),
    Document("Top ten database secrets the vendors do not want you to know.", metadata={}),
]
QUESTION = "When was PostgreSQL 16 released?"
TRUE = "PostgreSQL 16 was released on 14 September 2023."
SWAPPED = "PostgreSQL 16 was released on 14 September 2021."  # the year swapped


def in_memory() -> BaseRetriever:
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=64))
    store.add_documents(DOCS)
    return store.as_retriever(search_kwargs={"k": len(DOCS)})


def chain(retriever: BaseRetriever, answer: str, audit: AnswerAudit) -> Runnable[Any, Any]:
    """question -> {question, context, answer, provenance}: retrieve, prompt a fake LLM, audit its answer."""
    prompt = PromptTemplate.from_template("Answer from the context only.\n\n{context}\n\nQuestion: {question}")
    write = (RunnableLambda(lambda x: {"context": "\n\n".join(d.page_content for d in x["context"]),
                                       "question": x["question"]})
             | prompt | FakeListLLM(responses=[answer]) | StrOutputParser())
    return {"context": retriever, "question": RunnablePassthrough()} | RunnablePassthrough.assign(answer=write) | audit


def test_blocked_sources_are_gone_and_counted(live_client: Counting) -> None:  # noqa: F811
    retriever = ProvenanceRetriever(base_retriever=in_memory(), config=ALLOWED, client=live_client)
    live_client.calls.clear()
    docs = retriever.invoke(QUESTION)
    assert live_client.calls == ["filter_sources"]  # one round trip
    assert sorted(d.metadata["source"] for d in docs) == sorted(d.metadata["source"] for d in DOCS[:3])
    info = docs[0].metadata["bosun_provenance"]
    assert info["admitted"] == 3 and info["dropped"] == 2
    assert sorted(info["reasons"]) == ["domain_not_allowlisted", "missing_source_url"]
    assert "bosun_provenance" not in DOCS[0].metadata  # copies: the store's documents are unchanged


def test_the_budget_holds_over_the_admitted_documents(live_client: Counting) -> None:  # noqa: F811
    admitted = ProvenanceRetriever(base_retriever=in_memory(), config=ALLOWED, client=live_client)
    retriever = BudgetRetriever(base_retriever=admitted, budget_tokens=30, client=live_client)
    live_client.calls.clear()
    docs = retriever.invoke(QUESTION)
    assert live_client.calls == ["filter_sources", "select_context"]
    picks = [d.metadata["bosun_selection"] for d in docs]
    assert 0 < len(docs) < 3 and all("db-gossip" not in d.metadata.get("source", "x") for d in docs)
    assert sum(p["tokens"] for p in picks) == picks[0]["tokens_used"] <= 30 == picks[0]["budget_tokens"]
    assert [p["rank"] for p in picks] == list(range(1, len(docs) + 1))


def test_an_answer_with_a_swapped_fact_is_flagged(live_client: Counting) -> None:  # noqa: F811
    mw = ProvenanceMiddleware(ALLOWED, client=live_client)  # one config and connection for both adapters
    retriever = ProvenanceRetriever(base_retriever=in_memory(), middleware=mw)
    good = chain(retriever, TRUE, AnswerAudit(middleware=mw)).invoke(QUESTION)
    assert good["answer"] == TRUE and good["provenance"].trust_passed
    live_client.calls.clear()
    bad = chain(retriever, SWAPPED, AnswerAudit(middleware=mw)).invoke(QUESTION)
    assert live_client.calls == ["filter_sources", "audit"]
    report = bad["provenance"]
    assert not report.trust_passed and report.enforcement_verdict == "guardrail_failed"  # annotated
    assert [c["verdict"] for c in report.claims] == ["contradicted"]
    with pytest.raises(ComplianceViolation, match="enforce mode"):  # raised
        chain(retriever, SWAPPED, AnswerAudit({**ALLOWED, "enforcement_mode": "enforce"}, client=live_client)
              ).invoke(QUESTION)


async def test_the_chain_runs_async(live_client: Counting) -> None:  # noqa: F811
    mw = ProvenanceMiddleware(ALLOWED, client=live_client)
    retriever = BudgetRetriever(base_retriever=ProvenanceRetriever(base_retriever=in_memory(), middleware=mw),
                                budget_tokens=60, middleware=mw)
    out = await chain(retriever, SWAPPED, AnswerAudit(middleware=mw)).ainvoke(QUESTION)
    assert all("bosun_selection" in d.metadata and "postgresql.org" in d.metadata["source"] for d in out["context"])
    assert not out["provenance"].trust_passed
    docs = await ProvenanceRetriever(base_retriever=in_memory(), middleware=mw).ainvoke(QUESTION)
    assert len(docs) == 3


def test_a_daemon_that_is_down_is_a_clear_error() -> None:
    retriever = ProvenanceRetriever(base_retriever=in_memory(),
                                    middleware=ProvenanceMiddleware(ALLOWED, server=closed_url()))
    with pytest.raises(ConnectionFailed, match="bosun serve"):
        retriever.invoke(QUESTION)


def test_a_misspelt_option_is_an_error() -> None:
    with pytest.raises(ValidationError, match="budget_token"):
        BudgetRetriever(base_retriever=in_memory(), budget_token=10)
