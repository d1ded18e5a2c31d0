"""bosun.adapters.llamaindex: real llama-index-core query engines over an in-memory index, MockLLM, a real daemon.

The index is a ``SummaryIndex`` (every node retrieved, no embedding model); the engine's node postprocessors
drop the sources the allowlist blocks and spend a token budget; ``MockLLM`` writes the answer (its
``completion_to_prompt`` hook returns the canned text) and ``ProvenanceQueryEngine`` audits it, sync and async.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from llama_index.core import Document, SummaryIndex
from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.llms import MockLLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from pydantic import ValidationError

from bosun import ComplianceViolation, ProvenanceMiddleware
from bosun.adapters.llamaindex import BudgetPostprocessor, ProvenancePostprocessor, ProvenanceQueryEngine
from bosun.client import ConnectionFailed
from tests.live_daemon import Counting, closed_url, live_client, live_daemon  # noqa: F401  (the fixtures)

ALLOWED = {"allowed_domains": ["postgresql.org"]}
TEXTS = [
    ("PostgreSQL 16 was released on 14 September 2023. It adds logical replication from standby servers.",
     "https://www.postgresql.org/about/news/postgresql-16-released-2715/"),
    ("PL/Python lets functions and procedures be written in Python. It ships with the core distribution.",
     "https://www.postgresql.org/docs/16/plpython.html"),
    ("PostgreSQL 16 came out in September 2023 and added logical replication from standby servers.",
     "https://www.postgresql.org/docs/16/release-16.html"),
    ("PostgreSQL 16 doubles write throughput on every workload, insiders say.", "https://db-gossip.example.net/secrets"),
    ("Top ten database secrets the vendors do not want you to know.", None),
]
QUESTION = "When was PostgreSQL 16 released?"
TRUE = "PostgreSQL 16 was released on 14 September 2023."
SWAPPED = "PostgreSQL 16 was released on 14 September 2021."  # the year swapped


def index() -> SummaryIndex:
    docs = [Document(text=text, metadata={"source_url": url} if url else {}) for text, url in TEXTS]
    return SummaryIndex.from_documents(docs)


def engine(answer: str, postprocessors: Sequence[BaseNodePostprocessor]) -> BaseQueryEngine:
    llm = MockLLM(completion_to_prompt=lambda _prompt: answer)  # MockLLM echoes its prompt: the canned answer
    return index().as_query_engine(llm=llm, node_postprocessors=list(postprocessors))


def urls(nodes: Sequence[Any]) -> list[str]:
    return [n.node.metadata.get("source_url", "") for n in nodes]


def test_blocked_sources_are_gone_and_counted(live_client: Counting) -> None:  # noqa: F811
    live_client.calls.clear()
    response = engine(TRUE, [ProvenancePostprocessor(config=ALLOWED, client=live_client)]).query(QUESTION)
    assert live_client.calls == ["filter_sources"]
    assert str(response) == TRUE
    assert sorted(urls(response.source_nodes)) == sorted(url for _, url in TEXTS[:3] if url)
    info = response.source_nodes[0].node.metadata["bosun_provenance"]
    assert info["admitted"] == 3 and info["dropped"] == 2
    assert "bosun_provenance" in response.source_nodes[0].node.excluded_llm_metadata_keys  # not in the prompt


def test_the_budget_holds_over_the_admitted_nodes(live_client: Counting) -> None:  # noqa: F811
    mw = ProvenanceMiddleware(ALLOWED, client=live_client)
    live_client.calls.clear()
    response = engine(TRUE, [ProvenancePostprocessor(middleware=mw),
                             BudgetPostprocessor(budget_tokens=30, middleware=mw)]).query(QUESTION)
    assert live_client.calls == ["filter_sources", "select_context"]
    picks = [n.node.metadata["bosun_selection"] for n in response.source_nodes]
    assert 0 < len(picks) < 3 and all("postgresql.org" in u for u in urls(response.source_nodes))
    assert sum(p["tokens"] for p in picks) == picks[0]["tokens_used"] <= 30
    assert [p["rank"] for p in picks] == list(range(1, len(picks) + 1))


def test_an_answer_with_a_swapped_fact_is_flagged(live_client: Counting) -> None:  # noqa: F811
    mw = ProvenanceMiddleware(ALLOWED, client=live_client)
    good = ProvenanceQueryEngine(engine(TRUE, []), middleware=mw).query(QUESTION)
    assert good.metadata["provenance"].trust_passed
    assert len(good.source_nodes) == 3  # the engine's own nodes: the two the allowlist blocks are taken out
    live_client.calls.clear()
    bad = ProvenanceQueryEngine(engine(SWAPPED, []), middleware=mw).query(QUESTION)
    assert live_client.calls == ["audit"]
    report = bad.metadata["provenance"]
    assert str(bad) == SWAPPED and not report.trust_passed  # annotated
    assert [c["verdict"] for c in report.claims] == ["contradicted"]
    with pytest.raises(ComplianceViolation, match="enforce mode"):  # raised
        ProvenanceQueryEngine(engine(SWAPPED, []), config={**ALLOWED, "enforcement_mode": "enforce"},
                              client=live_client).query(QUESTION)


async def test_the_query_engine_runs_async(live_client: Counting) -> None:  # noqa: F811
    mw = ProvenanceMiddleware(ALLOWED, client=live_client)
    base = engine(SWAPPED, [ProvenancePostprocessor(middleware=mw), BudgetPostprocessor(budget_tokens=60, middleware=mw)])
    response = await ProvenanceQueryEngine(base, middleware=mw).aquery(QUESTION)
    assert all("bosun_selection" in n.node.metadata for n in response.source_nodes)
    assert not response.metadata["provenance"].trust_passed


def test_a_daemon_that_is_down_is_a_clear_error() -> None:
    mw = ProvenanceMiddleware(ALLOWED, server=closed_url())
    with pytest.raises(ConnectionFailed, match="bosun serve"):
        engine(TRUE, [ProvenancePostprocessor(middleware=mw)]).query(QUESTION)


def test_a_misspelt_option_is_an_error() -> None:
    with pytest.raises(ValidationError, match="budget_token"):
        BudgetPostprocessor(budget_token=10)
