"""What the framework adapters cost over doing the same work through ``bosun.client`` by hand.

    python bench/adapters_overhead.py [--rounds 30] [--out bench/results/adapters.md]

One ``bosun serve`` daemon on a temp home (the real model). The same five documents and question as the
adapter tests; for each step, the by-hand call (``Bosun.filter_sources`` / ``select_context`` / ``audit`` on
dicts) and the adapter doing it (LangChain ``ProvenanceRetriever`` / ``BudgetRetriever`` / ``AnswerAudit``,
LlamaIndex ``ProvenancePostprocessor`` / ``BudgetPostprocessor`` / ``ProvenanceQueryEngine``), interleaved,
``--rounds`` times each after one warm-up. Reported: daemon round trips per call (counted at the client) and
the median wall time. The base retriever and the fake LLM are outside both timings (their results are made
once), so the difference is the adapter's own work: converting sources, copying them with metadata.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.helpers_proc import BOSUN, env_for, stop, wait_for_daemon, wait_ready  # noqa: E402
from tests.live_daemon import Counting  # noqa: E402
from tests.test_adapters_llamaindex import QUESTION, TEXTS  # noqa: E402  (the adapter tests' documents)
from tests.test_adapters_llamaindex import SWAPPED as ANSWER  # noqa: E402

CONFIG = {"allowed_domains": ["postgresql.org"]}


def measure(client: Counting, fn: Callable[[], Any], rounds: int) -> tuple[float, float]:
    """(round trips per call, median ms per call)."""
    fn()
    client.calls.clear()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return len(client.calls) / rounds, statistics.median(times)


def steps(client: Counting) -> list[tuple[str, Callable[[], Any], Callable[[], Any]]]:
    """(step, by hand, adapter) for each framework."""
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from llama_index.core.base.base_query_engine import BaseQueryEngine
    from llama_index.core.base.response.schema import Response
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    from bosun import ProvenanceMiddleware
    from bosun.adapters.langchain import AnswerAudit, BudgetRetriever, ProvenanceRetriever
    from bosun.adapters.llamaindex import BudgetPostprocessor, ProvenancePostprocessor, ProvenanceQueryEngine

    docs = [Document(t, metadata={"source": u} if u else {}) for t, u in TEXTS]
    nodes = [NodeWithScore(node=TextNode(text=t, metadata={"source_url": u} if u else {}), score=1.0) for t, u in TEXTS]
    chunks = [{"content": t, **({"source_url": u} if u else {})} for t, u in TEXTS]
    cands = [{"id": str(i), "text": t, **({"source": u} if u else {})} for i, (t, u) in enumerate(TEXTS)]

    class Fixed(BaseRetriever):
        def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
            return docs

    class Answered(BaseQueryEngine):
        def __init__(self) -> None:
            super().__init__(callback_manager=None)

        def _get_prompt_modules(self) -> dict[str, Any]:
            return {}

        def _query(self, query_bundle: QueryBundle) -> Response:
            return Response(ANSWER, list(nodes))

        async def _aquery(self, query_bundle: QueryBundle) -> Response:
            return self._query(query_bundle)

    mw = ProvenanceMiddleware(CONFIG, client=client)
    full = mw.config.to_dict()
    audit_in = {"question": QUESTION, "context": docs, "answer": ANSWER}
    bundle = QueryBundle(QUESTION)
    lc_filter = ProvenanceRetriever(base_retriever=Fixed(), middleware=mw)
    lc_select = BudgetRetriever(base_retriever=Fixed(), budget_tokens=30, middleware=mw)
    lc_audit = AnswerAudit(middleware=mw)
    li_filter = ProvenancePostprocessor(middleware=mw)
    li_select = BudgetPostprocessor(budget_tokens=30, middleware=mw)
    li_audit = ProvenanceQueryEngine(Answered(), middleware=mw)

    def by_hand_filter() -> Any:
        return client.filter_sources(chunks, full)

    def by_hand_select() -> Any:
        return client.select_context(QUESTION, cands, budget_tokens=30, options={"show_rejected": 0})

    def by_hand_audit() -> Any:
        return client.audit(ANSWER, chunks, query=QUESTION, config=full)

    return [
        ("filter (LangChain ProvenanceRetriever)", by_hand_filter, lambda: lc_filter.invoke(QUESTION)),
        ("select (LangChain BudgetRetriever)", by_hand_select, lambda: lc_select.invoke(QUESTION)),
        ("audit (LangChain AnswerAudit)", by_hand_audit, lambda: lc_audit.invoke(audit_in)),
        ("filter (LlamaIndex ProvenancePostprocessor)", by_hand_filter, lambda: li_filter.postprocess_nodes(nodes, bundle)),
        ("select (LlamaIndex BudgetPostprocessor)", by_hand_select, lambda: li_select.postprocess_nodes(nodes, bundle)),
        ("audit (LlamaIndex ProvenanceQueryEngine)", by_hand_audit, lambda: li_audit.query(QUESTION)),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        proc = subprocess.Popen([*BOSUN, "serve", "--port", "0", "--home", str(home)], env=env_for(home),
                                stderr=subprocess.DEVNULL)
        try:
            url = str(wait_for_daemon(home, proc)["url"])
            wait_ready(url)
            with Counting(url) as client:
                rows = []
                for name, by_hand, adapter in steps(client):
                    hand_trips, hand_ms = measure(client, by_hand, args.rounds)
                    ad_trips, ad_ms = measure(client, adapter, args.rounds)
                    rows.append(f"| {name} | {hand_trips:g} | {ad_trips:g} | {hand_ms:.2f} | {ad_ms:.2f} | "
                                f"{ad_ms - hand_ms:+.2f} |")
        finally:
            stop(proc.pid)
            proc.wait(timeout=15)
    text = "\n".join([
        "# Framework adapters: round trips and time over the client by hand",
        "",
        f"`python bench/adapters_overhead.py --rounds {args.rounds}`: one `bosun serve` (real model), the adapter "
        "tests' five documents, medians of the rounds after one warm-up; the base retriever and the LLM are "
        "outside both timings.",
        "",
        "| step | round trips by hand | round trips via adapter | ms by hand | ms via adapter | difference ms |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ])
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
