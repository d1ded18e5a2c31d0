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
  dense cosine with a TF-IDF cosine over the pool (names and numbers survive);
  goal terms already covered by a pick weigh less (coverage), candidates that
  share rare terms with a pick gain (multi-hop: the bridge entity a pick names);
  similarity to the context beyond a threshold is a penalty (redundancy).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from bosun.core.errors import InvalidInput
from bosun.core.select_lexical import LexicalView

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
    lexical_weight: float = 0.4  # share of TF-IDF cosine in relevance
    coverage: float = 0.5  # how much a covered goal term loses
    hop_weight: float = 0.3  # weight of the lexical link to a pick (multi-hop)
    overlap_threshold: float = 0.8  # dense similarity to context beyond which hybrid penalises
    overlap_penalty: float = 2.0

    def check(self) -> None:
        if not 0.0 <= self.mmr_lambda <= 1.0:
            raise InvalidInput("mmr_lambda", f"{self.mmr_lambda} is out of range", "a number in [0, 1]")
        if not 0.0 < self.redundancy_threshold <= 1.0001:
            raise InvalidInput("redundancy_threshold", f"{self.redundancy_threshold} is out of range", "(0, 1]")
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
    """The forensic view of one selection."""

    strategy: str
    budget_tokens: int
    selected: list[Pick] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    note: str | None = None

    @property
    def tokens_used(self) -> int:
        return sum(p.tokens for p in self.selected)

    @property
    def indices(self) -> list[int]:
        return [p.index for p in self.selected]


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


def select(pool: Pool, budget_tokens: int, strategy: str = DEFAULT_STRATEGY, params: Params | None = None) -> Selection:
    """Pick candidates under ``budget_tokens`` with ``strategy``; see the module doc."""
    params = params or Params()
    params.check()
    if strategy not in STRATEGIES:
        raise InvalidInput("strategy", f"unknown strategy {strategy!r}", ", ".join(STRATEGIES))
    n = int(pool.candidates.shape[0])
    out = Selection(strategy=strategy, budget_tokens=int(budget_tokens))
    if n == 0:
        out.note = "no candidates to select from"
        return out
    return _Run(pool, budget_tokens, strategy, params).run(out)


class _Run:
    """One selection's state: the matrices and the running max-similarity to context."""

    def __init__(self, pool: Pool, budget: int, strategy: str, params: Params) -> None:
        self.pool = pool
        self.p = params
        self.strategy = strategy
        self.budget = int(budget)
        cands = np.asarray(pool.candidates, dtype=np.float32)
        self.n = cands.shape[0]
        self.tokens = np.asarray(pool.tokens, dtype=np.int64)
        self.rel = cands @ np.asarray(pool.goal, dtype=np.float32)
        self.sim = cands @ cands.T  # [n, n]
        labels = list(pool.labels)
        self.names = labels + list(pool.context_labels)
        ctx = pool.context
        if ctx is not None and len(ctx):
            csim = cands @ np.asarray(ctx, dtype=np.float32).T
            self.nearest = (csim.argmax(axis=1) + self.n).astype(np.int64)
            self.maxsim = csim.max(axis=1)
        else:
            self.nearest = np.full(self.n, -1, dtype=np.int64)
            self.maxsim = np.zeros(self.n, dtype=np.float32)
        self.lex: _Lexical | None = None
        if strategy == "hybrid":
            self.lex = _Lexical(pool, params)

    # -- scoring ---------------------------------------------------------------------------
    def relevance(self) -> F32:
        if self.lex is None:
            return self.rel
        return self.lex.relevance(self.rel)

    def novelty(self) -> F32:
        return np.clip(1.0 - self.maxsim, 0.0, 1.0)

    def score(self, rel: F32) -> F32:
        s = self.strategy
        if s == "baseline":
            return rel
        if s == "psi0":
            return np.maximum(rel, 0.0) * self.novelty()
        if s == "mmr":
            lam = self.p.mmr_lambda
            return lam * rel - (1.0 - lam) * np.maximum(self.maxsim, 0.0)
        over = np.maximum(self.maxsim - self.p.overlap_threshold, 0.0)
        return rel - self.p.overlap_penalty * over

    # -- the loop --------------------------------------------------------------------------
    def run(self, out: Selection) -> Selection:
        p = self.p
        avail = np.ones(self.n, dtype=bool)
        reasons: dict[int, tuple[Reason, str, str | None]] = {}
        irrelevant = self.rel < p.min_relevance
        for i in np.flatnonzero(irrelevant):
            reasons[int(i)] = ("irrelevant", f"relevance {self.rel[i]:.2f} < min_relevance {p.min_relevance:.2f}", None)
        avail &= ~irrelevant
        self._drop_duplicates(avail, reasons)
        remaining = self.budget
        last_rel = self.relevance()
        last_score = self.score(last_rel)
        while avail.any():
            if p.max_items is not None and len(out.selected) >= p.max_items:
                break
            rel = self.relevance()
            score = self.score(rel)
            last_rel, last_score = rel, score
            fits = avail & (self.tokens <= remaining)
            if not fits.any():
                break
            masked = np.where(fits, score, -np.inf)
            best = int(masked.argmax())
            if self.strategy != "baseline":
                best = self._near_tie(masked, rel, best)
            # items that beat the pick but do not fit the remaining budget: over budget
            for i in np.flatnonzero(avail & ~fits & (score > score[best])):
                reasons[int(i)] = (
                    "over_budget", f"{self.tokens[i]} tokens, {remaining} left in the budget", None
                )
                avail[i] = False
            novelty = float(self.novelty()[best])
            out.selected.append(
                Pick(int(best), float(rel[best]), novelty, float(score[best]), int(self.tokens[best]),
                     self._why(best, rel, novelty))
            )
            remaining -= int(self.tokens[best])
            avail[best] = False
            self._join(best)
            self._drop_duplicates(avail, reasons)
        for i in np.flatnonzero(avail):
            if self.tokens[i] > remaining:
                reasons[int(i)] = ("over_budget", f"{self.tokens[i]} tokens, {remaining} left in the budget", None)
            elif p.max_items is not None and len(out.selected) >= p.max_items:
                reasons[int(i)] = ("irrelevant", f"ranked below the {p.max_items} selected (max_items)", None)
            else:
                reasons[int(i)] = ("irrelevant", "scored below every selected item", None)
        nov = self.novelty()
        for idx, (reason, why, other) in reasons.items():
            out.rejected.append(
                Rejection(idx, float(self.rel[idx]), float(nov[idx]), float(last_score[idx]),
                          int(self.tokens[idx]), reason, why, other)
            )
        out.rejected.sort(key=lambda r: (-r.relevance, r.index))
        if not out.selected:
            out.note = self._empty_note(out)
        return out

    def _near_tie(self, masked: F32, rel: F32, best: int) -> int:
        """psi-loop's rule: among scores within NEAR_TIE_EPSILON of the best, prefer value."""
        ties = np.flatnonzero(masked >= masked[best] - NEAR_TIE_EPSILON)
        if len(ties) <= 1:
            return best
        return int(ties[np.argmax(rel[ties])])

    def _join(self, i: int) -> None:
        """The pick joins the context: similarities and nearest items update."""
        col = self.sim[:, i]
        closer = col > self.maxsim
        self.maxsim = np.where(closer, col, self.maxsim).astype(np.float32)
        self.nearest = np.where(closer, i, self.nearest)
        if self.lex is not None:
            self.lex.join(i)

    def _drop_duplicates(self, avail: npt.NDArray[np.bool_], reasons: dict[int, tuple[Reason, str, str | None]]) -> None:
        if self.strategy == "baseline":
            return  # the control ranks by similarity alone
        dup = avail & (self.maxsim >= self.p.redundancy_threshold)
        for i in np.flatnonzero(dup):
            other = self.names[int(self.nearest[i])]
            reasons[int(i)] = ("redundant", f"redundant with {other} (similarity {self.maxsim[i]:.2f})", other)
            avail[i] = False

    def _why(self, i: int, rel: F32, novelty: float) -> str:
        parts = [f"relevance {rel[i]:.2f}"]
        if self.lex is not None and self.lex.hop is not None and self.lex.hop_gain[i] > 0.05:
            parts.append(f"linked to {self.names[int(self.lex.hop_from[i])]} ({self.lex.hop_gain[i]:.2f})")
        if self.strategy != "baseline":
            near = int(self.nearest[i])
            parts.append(
                f"novelty {novelty:.2f}" + (f" (nearest {self.names[near]})" if near >= 0 else " (nothing in context)")
            )
        return ", ".join(parts)

    def _empty_note(self, out: Selection) -> str:
        if self.budget <= 0:
            return "budget_tokens is 0: nothing fits"
        if not any(r.reason != "over_budget" for r in out.rejected) and self.tokens.min() > self.budget:
            return f"every candidate is larger than the budget ({int(self.tokens.min())} tokens smallest, budget {self.budget})"
        kinds = sorted({r.reason for r in out.rejected})
        return "nothing selected: every candidate was " + " or ".join(k.replace("_", " ") for k in kinds)


class _Lexical:
    """The hybrid's lexical state: TF-IDF relevance with coverage, and multi-hop links."""

    def __init__(self, pool: Pool, p: Params) -> None:
        texts = pool.candidate_texts
        if texts is None or pool.goal_text is None:
            raise InvalidInput("strategy", "hybrid needs the candidate and goal texts", "pass texts in the Pool")
        self.p = p
        self.view = LexicalView(list(texts))
        q = self.view.query(pool.goal_text)
        self.q_cols = q.indices.copy()
        self.q_vals = q.data.astype(np.float32).copy()
        self.weights = np.ones(len(self.q_cols), dtype=np.float32)
        # [n, |q|] dense slice of the goal's columns: relevance is one small matmul per step
        self.cols = np.asarray(self.view.matrix[:, self.q_cols].toarray(), dtype=np.float32)
        self.lsim = self.view.pairwise() if p.hop_weight > 0 else None
        self.hop: F32 | None = None
        n = self.view.matrix.shape[0]
        self.hop_gain = np.zeros(n, dtype=np.float32)
        self.hop_from = np.full(n, -1, dtype=np.int64)
        for text in pool.context_texts:
            self._cover(self.view.query(text).indices)

    def relevance(self, dense: F32) -> F32:
        w = self.p.lexical_weight
        lex = self.cols @ (self.q_vals * self.weights)
        base = (1.0 - w) * dense + w * lex
        if self.hop is None:
            return base.astype(np.float32)
        return (base + self.p.hop_weight * self.hop).astype(np.float32)

    def join(self, i: int) -> None:
        row = self.view.matrix.getrow(i)
        self._cover(row.indices)
        if self.lsim is not None:
            link = self.lsim[:, i]
            better = link > self.hop_gain
            self.hop_gain = np.where(better, link, self.hop_gain).astype(np.float32)
            self.hop_from = np.where(better, i, self.hop_from)
            self.hop = self.hop_gain

    def _cover(self, cols: npt.NDArray[np.int32]) -> None:
        if self.p.coverage <= 0 or not len(cols):
            return
        hit = np.isin(self.q_cols, cols)
        self.weights[hit] *= 1.0 - self.p.coverage
