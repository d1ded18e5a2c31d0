"""Route with the judge: the first stage's top documents, re-read by the cross-encoder with the prompt.

The first stage (``route.score``: lexical + semantic, fused) is good at recall and cheap over thousands of
documents; it is weak at telling the right document from its neighbours, and at telling a prompt that is
about nothing here from one that is, because each text was embedded alone. The judge reads the prompt and
a document's routing surface together, so it re-orders the first stage's top ``depth`` and decides
admission on its own calibrated probability: a document is routed when the judge's relevance clears the
bar, the first at ``admit`` and a second at ``second`` (a second document must be about as clearly
relevant, or a prompt about one thing would get two answers).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from bosun.core.judge import Judge
from bosun.core.routing.corpus import Policy
from bosun.core.routing.route import Hit, PolicyIndex, RouteResult, humanise_name, matched_words, score

DEPTH = 10  # documents the judge re-reads per prompt (its cost grows with this, not with the corpus)
DOC_CHARS = 600  # a routing surface past this is cut: the judge reads 96 tokens of prompt and document


@dataclass(frozen=True)
class JudgePoint:
    """The judge's operating point: probability bars for the first and the second routed document, and the
    first stage's weight in the final order (0: the judge's order alone)."""

    admit: float = 0.5
    second: float = 0.5
    first_stage_weight: float = 0.0


SHIPPED_POINT = JudgePoint()


def document_text(policy: Policy) -> str:
    """What the judge reads of a document: its name in words and its routing surface."""
    return f"{humanise_name(policy.name)}: {policy.surface}"[:DOC_CHARS]


def rerank(index: PolicyIndex, prompt: str, order: Sequence[int], judge: Judge, depth: int = DEPTH
           ) -> tuple[list[int], npt.NDArray[np.float32]]:
    """The first stage's top ``depth`` documents and the judge's relevance for each (same order)."""
    cands = [int(d) for d in order[:depth]]
    if not cands:
        return [], np.zeros(0, np.float32)
    probs = judge.relevance([(prompt, document_text(index.policies[d])) for d in cands])
    return cands, np.asarray(probs, dtype=np.float32)


def final_order(cands: Sequence[int], probs: npt.NDArray[np.float32], point: JudgePoint) -> list[tuple[int, float]]:
    """Candidates best first: the judge's probability, plus the first stage's rank as a small prior."""
    n = len(cands)
    prior = np.array([(n - i) / max(1, n) for i in range(n)], dtype=np.float64)
    key = probs.astype(np.float64) + point.first_stage_weight * prior
    idx = sorted(range(n), key=lambda i: (-key[i], i))
    return [(cands[i], float(probs[i])) for i in idx]


def judged_route(index: PolicyIndex, prompt: str, qvec: npt.NDArray[np.float32] | None, judge: Judge,
                 top_k: int, point: JudgePoint = SHIPPED_POINT, rrf_k: int | None = None,
                 depth: int = DEPTH) -> RouteResult:
    """Rank with the first stage, re-read its top documents with the judge, admit on the judge's bars."""
    if len(index) == 0 or top_k <= 0:
        return RouteResult([], True, 0.0)
    sc = score(index, prompt, qvec) if rrf_k is None else score(index, prompt, qvec, rrf_k)
    cands, probs = rerank(index, prompt, sc.order.tolist(), judge, depth)
    ranked = final_order(cands, probs, point)
    hits: list[Hit] = []
    rejected = 0.0
    for doc, p in ranked:
        bar = point.second if hits else point.admit
        if len(hits) >= top_k or p < bar:
            rejected = max(rejected, p)
            continue
        pol = index.policies[doc]
        why = [f"matched: {', '.join(w)}" for w in [matched_words(index, doc, prompt)] if w]
        why.append(f"judge: relevant ({p:.2f}) on \"{pol.surface[:80]}\"")
        needs = tuple(dict.fromkeys(n for n in (*pol.depends_on, *pol.requires) if n in index.by_name))
        hits.append(Hit(pol.name, p, why, float(sc.lexical[doc]), float(sc.semantic[doc]), needs))
    return RouteResult(hits, not hits, rejected, [d for d, _ in ranked])
