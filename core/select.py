"""select_context: the candidates that fit a token budget, useful and not redundant.

Every strategy is iterative: each pick joins the context before the rest are
re-scored, and packing is in estimated model tokens (the caller passes each
candidate's token count). Similarities are computed once per call as numpy
matrices; an iteration is a few vector operations over the remaining pool.

Strategies
- ``baseline``: similarity to the goal only (the control psi-loop compares against).
- ``psi0``: psi-loop's rule, value x novelty, with its near-tie value priority
  (``NEAR_TIE_EPSILON``). Value is the dense cosine to the goal; novelty is one
  minus the similarity to the *nearest* context or selected item (psi-loop used
  the context centroid, under which a copy of one of many context items still
  looks novel).
- ``mmr``: maximal marginal relevance, ``lambda * relevance - (1 - lambda) * max similarity``.
- ``hybrid`` (the default, measured best in bench/select_eval.py): relevance mixes the
  dense cosine with the IDF-weighted share of the goal's terms a candidate holds
  (names and numbers survive); goal terms already covered by the context or a pick
  weigh less (coverage, a greedy set cover); a candidate whose subject (its first
  distinct terms) a pick names gains (multi-hop: the bridge entity); similarity to
  the context or a pick beyond a threshold is a penalty (redundancy).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from bosun.core.errors import InvalidInput
from bosun.core.select_lexical import view_of

Strategy = Literal["hybrid", "psi0", "mmr", "baseline"]
STRATEGIES: tuple[str, ...] = ("hybrid", "psi0", "mmr", "baseline")
DEFAULT_STRATEGY: Strategy = "hybrid"
NEAR_TIE_EPSILON = 0.01  # psi-loop: scores closer than this are a tie, and the more valuable wins
Reason = Literal["redundant", "over_budget", "irrelevant"]

F32 = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Params:
    """Knobs of the strategies; the defaults are the ones bench/select_eval.py reports."""

    mmr_lambda: float = 0.7
    redundancy_threshold: float = 0.95  # max similarity at or above which an item is a duplicate
    min_relevance: float = 0.0  # relevance below this is irrelevant and never selected
    max_items: int | None = None
    # hybrid
    lexical_weight: float = 0.7  # share of the lexical signal in relevance
    lexical: str = "recall"  # "recall": IDF share of the goal's terms a candidate holds; "cosine": TF-IDF cosine
    coverage: float = 0.8  # how much a covered goal term loses
    hop_weight: float = 0.2  # weight of the link from a pick to a candidate's subject (multi-hop)
    hop_head_terms: int = 3  # a candidate's first distinct terms: what it is about
    overlap_threshold: float = 0.6  # similarity to context beyond which hybrid penalises (and "redundant" is said)
    overlap_penalty: float = 4.0

    @property
    def one_minus_lambda(self) -> float:
        return 1.0 - self.mmr_lambda

    def check(self) -> None:
        if not 0.0 <= self.mmr_lambda <= 1.0:
            raise InvalidInput("mmr_lambda", f"{self.mmr_lambda} is out of range", "a number in [0, 1]")
        if not 0.0 < self.redundancy_threshold <= 1.0001:
            raise InvalidInput("redundancy_threshold", f"{self.redundancy_threshold} is out of range", "(0, 1]")
        if self.lexical not in ("recall", "cosine"):
            raise InvalidInput("lexical", f"unknown lexical signal {self.lexical!r}", "recall, cosine")
        if not -1.0 <= self.min_relevance < 1.0:
            raise InvalidInput("min_relevance", f"{self.min_relevance} is out of range", "[-1, 1)")
        if self.max_items is not None and self.max_items < 1:
            raise InvalidInput("max_items", f"{self.max_items} must be at least 1", "a positive integer or null")


@dataclass
class Pick:
    """One selected item, in selection order, with the numbers behind the choice."""

    index: int
    relevance: float
    novelty: float
    score: float
    tokens: int
    why: str


@dataclass
class Rejection:
    """One candidate left out, and why."""

    index: int
    relevance: float
    novelty: float
    score: float
    tokens: int
    reason: Reason
    why: str
    redundant_with: str | None = None


@dataclass
class Selection:
    """The forensic view of one selection: picks in order, the strongest rejections, counts."""

    strategy: str
    budget_tokens: int
    selected: list[Pick] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)  # the strongest ``explain`` ones
    rejected_counts: dict[str, int] = field(default_factory=dict)
    note: str | None = None

    @property
    def tokens_used(self) -> int:
        return sum(p.tokens for p in self.selected)

    @property
    def indices(self) -> list[int]:
        return [p.index for p in self.selected]

    @property
    def rejected_total(self) -> int:
        return sum(self.rejected_counts.values())


@dataclass
class Pool:
    """What a selection needs, precomputed: vectors, token counts, labels, optional texts.

    ``candidate_texts``/``goal_text`` feed the hybrid's lexical view; the other
    strategies only use the vectors.
    """

    goal: F32  # [d]
    candidates: F32  # [n, d], L2-normalised
    tokens: Sequence[int]
    labels: Sequence[str]  # candidate ids, for "redundant with X"
    context: F32 | None = None  # [m, d]
    context_labels: Sequence[str] = ()
    candidate_texts: Sequence[str] | None = None
    goal_text: str | None = None
    context_texts: Sequence[str] = ()


def select(pool: Pool, budget_tokens: int, strategy: str = DEFAULT_STRATEGY, params: Params | None = None,
           explain: int = 10) -> Selection:
    """Pick candidates under ``budget_tokens`` with ``strategy``; see the module doc.

    ``explain`` bounds how many rejections get a written reason (the strongest by
    relevance); every rejection is counted in ``rejected_counts``.
    """
    params = params or Params()
    params.check()
    if strategy not in STRATEGIES:
        raise InvalidInput("strategy", f"unknown strategy {strategy!r}", ", ".join(STRATEGIES))
    n = int(pool.candidates.shape[0])
    out = Selection(strategy=strategy, budget_tokens=int(budget_tokens))
    if n == 0:
        out.note = "no candidates to select from"
        return out
    return _Run(pool, budget_tokens, strategy, params).run(out, explain)


_NONE, _IRRELEVANT, _REDUNDANT, _OVER = 0, 1, 2, 3
_REASONS: dict[int, Reason] = {_IRRELEVANT: "irrelevant", _REDUNDANT: "redundant", _OVER: "over_budget"}


class _Run:
    """One selection's state. An iteration is a few vector operations over the pool;
    nearest items and reasons are only written out for what the answer shows."""

    def __init__(self, pool: Pool, budget: int, strategy: str, params: Params) -> None:
        self.pool = pool
        self.p = params
        self.strategy = strategy
        self.budget = int(budget)
        cands = np.asarray(pool.candidates, dtype=np.float32)
        self.cands = cands
        self.n = cands.shape[0]
        self.tokens = np.asarray(pool.tokens, dtype=np.int64)
        self.rel = cands @ np.asarray(pool.goal, dtype=np.float32)
        self.relpos = np.maximum(self.rel, 0.0)
        self.lamrel = params.mmr_lambda * self.rel
        self.names = list(pool.labels) + list(pool.context_labels)
        ctx = pool.context
        self.ctx = np.asarray(ctx, dtype=np.float32) if ctx is not None and len(ctx) else None
        self.maxsim = (np.maximum((cands @ self.ctx.T).max(axis=1), 0.0) if self.ctx is not None
                       else np.zeros(self.n, np.float32))  # clipped at 0: only closeness counts
        self.picked: list[int] = []
        self.lex = _Lexical(pool, params) if strategy == "hybrid" else None
        self.code = np.zeros(self.n, dtype=np.int8)
        self.red_with = np.full(self.n, -1, dtype=np.int64)  # for context duplicates: filled lazily
        self.left_at = np.zeros(self.n, dtype=np.int64)

    # -- scoring ---------------------------------------------------------------------------
    def relevance(self) -> F32:
        return self.rel if self.lex is None else self.lex.relevance(self.rel)

    def score(self, rel: F32) -> F32:
        s = self.strategy
        if s == "baseline":
            return rel
        if s == "psi0":
            return self.relpos * (1.0 - self.maxsim)
        if s == "mmr":
            return self.lamrel - self.p.one_minus_lambda * self.maxsim
        over = np.maximum(self.maxsim - self.p.overlap_threshold, 0.0)
        return rel - self.p.overlap_penalty * over

    # -- the loop --------------------------------------------------------------------------
    def run(self, out: Selection, explain: int) -> Selection:
        p = self.p
        code = self.code
        code[self.rel < p.min_relevance] = _IRRELEVANT
        if self.strategy != "baseline":
            code[(code == _NONE) & (self.maxsim >= p.redundancy_threshold)] = _REDUNDANT
        avail = code == _NONE
        dead = np.where(avail, 0.0, -np.inf).astype(np.float32)  # -inf for anything no longer available
        remaining = self.budget
        scores: list[float] = []
        rels: list[float] = []
        novs: list[float] = []
        tie = self.strategy in ("psi0", "hybrid")  # psi-loop's near-tie rule belongs to its scores
        dedup = self.strategy != "baseline"  # novelty strategies drop near-duplicates
        while True:
            if p.max_items is not None and len(self.picked) >= p.max_items:
                break
            rel = self.relevance()
            masked = self.score(rel) + dead
            while True:  # the best that fits; a better one that does not fit is over budget
                best = int(masked.argmax())
                if masked[best] == -np.inf or self.tokens[best] <= remaining:
                    break
                code[best], self.left_at[best], avail[best], masked[best] = _OVER, remaining, False, -np.inf
                dead[best] = -np.inf
            if masked[best] == -np.inf:
                break
            if tie:  # psi-loop's near-tie rule: among scores within epsilon, prefer value
                ties = np.flatnonzero(masked >= masked[best] - NEAR_TIE_EPSILON)
                if len(ties) > 1:
                    ties = ties[self.tokens[ties] <= remaining]
                    best = int(ties[np.argmax(rel[ties])])
            scores.append(float(masked[best]))
            rels.append(float(rel[best]))
            novs.append(float(max(0.0, 1.0 - self.maxsim[best])))
            remaining -= int(self.tokens[best])
            avail[best] = False
            dead[best] = -np.inf
            self.picked.append(best)
            col = self.cands @ self.cands[best]  # one column per pick: no n x n matrix
            np.maximum(self.maxsim, col, out=self.maxsim)
            if self.lex is not None:
                self.lex.join(best)
            if dedup:
                col[best] = -1.0
                hits = col >= p.redundancy_threshold
                if hits.any():
                    dup = avail & hits
                    code[dup], self.red_with[dup], avail[dup], dead[dup] = _REDUNDANT, best, False, -np.inf
        if dedup and rels:
            # more relevant than a pick and close to something chosen or given: its lack of
            # novelty is what kept it out, whatever the budget did afterwards
            lost = ((avail | (code == _OVER)) & (self.relevance() > min(rels))
                    & (self.maxsim >= p.overlap_threshold))
            code[lost] = _REDUNDANT
            avail[lost] = False
        leftover = np.flatnonzero(avail)
        over = leftover[self.tokens[leftover] > remaining]
        code[over], self.left_at[over] = _OVER, remaining
        code[avail & (code == _NONE)] = _IRRELEVANT  # fits, but ranked below the picks (max_items)
        near, _ = self._nearest(self.picked, before=True)
        for rank, i in enumerate(self.picked):
            out.selected.append(Pick(i, rels[rank], novs[rank], scores[rank], int(self.tokens[i]),
                                     self._why(i, rels[rank], novs[rank], int(near[rank]))))
        self._explain(out, explain, remaining)
        if not out.selected:
            out.note = self._empty_note(out)
        return out

    def _nearest(self, idx: Sequence[int], before: bool = False) -> tuple[npt.NDArray[np.int64], F32]:
        """For each candidate in ``idx``, the most similar context or selected item and the similarity.

        ``before``: ``idx`` are the picks in order, and each is compared with the context
        and the picks made before it. One matrix product for all of them.
        """
        k = len(self.picked)
        refs = self.cands[self.picked] if k else np.zeros((0, self.cands.shape[1]), np.float32)
        if self.ctx is not None:
            refs = np.vstack([refs, self.ctx])
        if not len(refs) or not len(idx):
            return np.full(len(idx), -1, dtype=np.int64), np.full(len(idx), -2.0, dtype=np.float32)
        sims = self.cands[list(idx)] @ refs.T
        if before:
            sims[:, :k][np.triu_indices(len(idx), 0, k)] = -np.inf
        j = sims.argmax(axis=1)
        best = sims[np.arange(len(idx)), j].astype(np.float32)
        labels = np.concatenate([np.asarray(self.picked, dtype=np.int64), np.arange(len(refs) - k) + self.n])
        near = np.where(np.isfinite(best), labels[j], -1)
        return near, best

    def _explain(self, out: Selection, explain: int, remaining: int) -> None:
        rejected = np.flatnonzero(self.code != _NONE)  # picks keep code _NONE
        counts = np.bincount(self.code[rejected], minlength=4)
        for c, name in _REASONS.items():
            if counts[c]:
                out.rejected_counts[name] = int(counts[c])
        if explain <= 0 or not len(rejected):
            return
        rel = self.relevance()
        top = rejected[np.argsort(-rel[rejected], kind="stable")[:explain]]
        final = self.score(rel)
        nears, sims = self._nearest(top.tolist())
        for i, near, sim in zip(top.tolist(), nears.tolist(), sims.tolist(), strict=True):
            c = int(self.code[i])
            nov = float(min(1.0, max(0.0, 1.0 - sim))) if near >= 0 else 1.0
            other = None
            if c == _IRRELEVANT and self.rel[i] < self.p.min_relevance:
                why = f"relevance {self.rel[i]:.2f} < min_relevance {self.p.min_relevance:.2f}"
            elif c == _IRRELEVANT:
                why = (f"ranked below the {self.p.max_items} selected (max_items)" if self.p.max_items
                       else "scored below every selected item")
            elif c == _REDUNDANT:
                other = self.names[near]
                why = f"redundant with {other} (similarity {sim:.2f})"
            else:
                why = f"{self.tokens[i]} tokens, {self.left_at[i]} left in the budget"
            out.rejected.append(Rejection(i, float(rel[i]), nov, float(final[i]), int(self.tokens[i]),
                                          _REASONS[c], why, other))

    def _why(self, i: int, rel: float, novelty: float, near: int) -> str:
        parts = [f"relevance {rel:.2f}"]
        if self.lex is not None and self.lex.hop_gain_at.get(i, 0.0) > 0.05:
            src = self.lex.hop_src_at[i]
            parts.append(f"linked to {self.names[src]} ({self.lex.hop_gain_at[i]:.2f})")
        if self.strategy != "baseline":
            parts.append(f"novelty {novelty:.2f}" + (f" (nearest {self.names[near]})" if near >= 0
                                                     else " (nothing in context)"))
        return ", ".join(parts)

    def _empty_note(self, out: Selection) -> str:
        if self.budget <= 0:
            return "budget_tokens is 0: nothing fits"
        if int(self.tokens.min()) > self.budget:
            return (f"every candidate is larger than the budget ({int(self.tokens.min())} tokens smallest, "
                    f"budget {self.budget})")
        kinds = sorted(out.rejected_counts)
        return "nothing selected: every candidate was " + " or ".join(k.replace("_", " ") for k in kinds)


class _Lexical:
    """The hybrid's lexical state: TF-IDF relevance with coverage, and multi-hop links."""

    def __init__(self, pool: Pool, p: Params) -> None:
        texts = pool.candidate_texts
        if texts is None or pool.goal_text is None:
            raise InvalidInput("strategy", "hybrid needs the candidate and goal texts", "pass texts in the Pool")
        self.p = p
        self.view = view_of(texts, head_terms=p.hop_head_terms)
        self.q_cols, self.q_vals = self.view.query(pool.goal_text)
        self.weights = np.ones(len(self.q_cols), dtype=np.float32)
        # [n, |q|] dense slice of the goal's columns: relevance is one small matmul per step
        self.cols = self.view.columns(self.q_cols, binary=p.lexical == "recall")
        if p.lexical == "recall":
            # the share of the goal's (IDF-weighted) terms a candidate contains: long or short,
            # a candidate that holds more of what the goal asks about is worth more
            idf = self.view.idf[self.q_cols]
            self.q_vals = (idf / idf.sum()).astype(np.float32) if len(idf) else self.q_vals
        self.head = self.view.head_weights(self.q_cols) if p.hop_weight > 0 else None
        n = self.view.n
        self.hop_gain = np.zeros(n, dtype=np.float32)
        self.hop_from = np.full(n, -1, dtype=np.int64)
        self.hop_gain_at: dict[int, float] = {}  # the link each pick had when it was picked
        self.hop_src_at: dict[int, int] = {}
        self._present = np.zeros(self.view.v, dtype=np.float32)  # reused term mask
        self._dense: F32 | None = None
        self._lex = np.zeros(n, dtype=np.float32)
        self._rel: F32 | None = None
        for text in pool.context_texts:
            self._mark(self.view.query(text)[0])
            self._cover()
            self._unmark(self.view.query(text)[0])
        self._update_lex()

    def _mark(self, cols: npt.NDArray[np.int64]) -> None:
        self._present[cols] = 1.0

    def _unmark(self, cols: npt.NDArray[np.int64]) -> None:
        self._present[cols] = 0.0

    def _update_lex(self) -> None:
        self._lex = (self.p.lexical_weight * (self.cols @ (self.q_vals * self.weights))).astype(np.float32)

    def relevance(self, dense: F32) -> F32:
        """Dense and lexical relevance, plus the multi-hop link; changes only when a pick joins."""
        if self._rel is None:
            if self._dense is None:
                self._dense = ((1.0 - self.p.lexical_weight) * dense).astype(np.float32)
            self._rel = self._dense + self._lex
            if self.head is not None:
                self._rel += self.p.hop_weight * self.hop_gain
        return self._rel

    def join(self, i: int) -> None:
        self.hop_gain_at[i] = float(self.hop_gain[i]) * self.p.hop_weight
        self.hop_src_at[i] = int(self.hop_from[i])
        terms = self.view.row_terms(i)
        self._mark(terms)
        if self._cover():
            self._update_lex()
        if self.head is not None:
            link = self.view.links_to(self.head, self._present, i)
            better = link > self.hop_gain
            self.hop_from[better] = i
            np.maximum(self.hop_gain, link, out=self.hop_gain)
        self._unmark(terms)
        self._rel = None

    def _cover(self) -> bool:
        """Goal terms the marked text holds lose weight; True if any did."""
        if self.p.coverage <= 0 or not len(self.q_cols):
            return False
        hit = self._present[self.q_cols] > 0
        if not hit.any():
            return False
        self.weights[hit] *= 1.0 - self.p.coverage
        return True
