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

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal, cast

import numpy as np
import numpy.typing as npt

from bosun.core.errors import InvalidInput
from bosun.core.selection.lexical import view_of

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
    # relative floor: a candidate whose relevance is below this share of the pool's best is irrelevant,
    # however much budget is left (fitted on the HotpotQA tune split, bench/select_floor.py)
    relevance_floor: float = 0.1
    iterative: bool = True  # False: score once against the context, then pack in that order (no re-scoring)
    # hybrid
    lexical_weight: float = 0.7  # share of the lexical signal in relevance
    lexical: str = "recall"  # "recall": IDF share of the goal's terms a candidate holds; "cosine": TF-IDF cosine
    coverage: float = 0.8  # how much a covered goal term loses
    hop_weight: float = 0.2  # weight of the link from a pick to a candidate's subject (multi-hop)
    hop_head_terms: int = 3  # a candidate's first distinct terms: what it is about
    overlap_threshold: float = 0.6  # similarity to context beyond which hybrid penalises (and "redundant" is said)
    overlap_penalty: float = 4.0
    # hybrid: when the best candidate leaves room for a useful second pick, the first pick is chosen among
    # this many best-scoring candidates by its score plus the best score a second pick would then have
    # (a one-step look-ahead: the pair that fits the budget and answers the goal together, e.g. a multi-hop
    # question's bridge passage); 0: plain greedy (the default: +1.7 points on HotpotQA tune, within the
    # noise, for ~0.5 ms more per call at 200 candidates; bench/select_multihop.py)
    lookahead: int = 0
    # hybrid: a candidate a pick names (its subject is in the pick's text, the multi-hop link) is not
    # redundant with that pick: the overlap penalty shrinks by the link's strength (1 = fully named)
    linked_not_redundant: bool = True
    # hybrid: the goal links like a pick: a titled candidate whose heading the goal names (the IDF-weighted
    # share of its heading's terms the goal holds) starts with that link (weight ``hop_weight``), and is not
    # redundant with what else the goal names (two documents a comparison question names are both needed)
    goal_links: bool = True

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
        if not 0.0 <= self.relevance_floor < 1.0:
            raise InvalidInput("relevance_floor", f"{self.relevance_floor} is out of range", "[0, 1)")
        if self.lookahead < 0:
            raise InvalidInput("lookahead", f"{self.lookahead} is negative", "a count >= 0")
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
    rejected_counts: dict[str, int] = field(default_factory=dict)
    note: str | None = None
    # the rejections are written out when first read (a caller that shows none pays for none)
    _rejected: list[Rejection] | None = field(default=None, repr=False, compare=False)
    _explain_later: Callable[[], list[Rejection]] | None = field(default=None, repr=False, compare=False)

    @property
    def rejected(self) -> list[Rejection]:
        """The strongest ``explain`` rejections, by relevance, each with its reason."""
        if self._rejected is None:
            later, self._explain_later = self._explain_later, None
            self._rejected = later() if later is not None else []
        return self._rejected

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


_LATER: dict[int, npt.NDArray[np.bool_]] = {}


def _later(k: int) -> npt.NDArray[np.bool_]:
    """[k, k]: True where column s >= row t (pick t itself and the picks after it); the same for every call."""
    mask = _LATER.get(k)
    if mask is None:
        mask = np.arange(k) >= np.arange(k)[:, None]
        mask.flags.writeable = False
        if k <= 256:
            _LATER[k] = mask
    return mask


_NONE, _IRRELEVANT, _REDUNDANT, _OVER = 0, 1, 2, 3
# up to this many candidates, numpy's call overhead is what a pick costs, not memory traffic: the hybrid's
# rel and unlinked are one stacked array, and each pick's similarity column is kept for the write-out
_SMALL_POOL = 2048
_REASONS: dict[int, Reason] = {_IRRELEVANT: "irrelevant", _REDUNDANT: "redundant", _OVER: "over_budget"}


class _Run:
    """One selection's state. An iteration is a few in-place vector operations over the
    pool (numpy call overhead, not arithmetic, is what a 200-candidate pool costs); nearest
    items and reasons are only written out for what the answer shows."""

    def __init__(self, pool: Pool, budget: int, strategy: str, params: Params) -> None:
        self.pool = pool
        self.params = params
        self.strategy = strategy
        self.budget = int(budget)
        cands = np.asarray(pool.candidates, dtype=np.float32)
        self.cands = cands
        self.n = n = cands.shape[0]
        self.token_counts = pool.tokens  # scalar reads: a Python sequence is faster than numpy scalars (self.tokens)
        self.rel = cands @ np.asarray(pool.goal, dtype=np.float32)
        # only what the strategy's score reads
        self.relpos = np.maximum(self.rel, 0.0) if strategy == "psi0" else self.rel
        self.weighted_rel = params.mmr_lambda * self.rel if strategy == "mmr" else self.rel
        ctx = pool.context
        self.ctx = np.asarray(ctx, dtype=np.float32) if ctx is not None and len(ctx) else None
        self.maxsim = (np.maximum((cands @ self.ctx.T).max(axis=1), 0.0) if self.ctx is not None
                       else np.zeros(n, np.float32))  # clipped at 0: only closeness counts
        self.picked: list[int] = []
        self.lex = _Lexical(pool, params, self.rel) if strategy == "hybrid" else None
        self.code = np.zeros(n, dtype=np.int8)
        self.left_at = np.zeros(n, dtype=np.int64)
        self._refs: tuple[F32, npt.NDArray[np.int64]] | None = None
        self.floor = 0.0
        self.start_rel: F32 = np.zeros(n, dtype=np.float32)
        self.floored = np.zeros(n, dtype=bool)
        self.exhausted = False

    @cached_property
    def tokens(self) -> npt.NDArray[np.int64]:
        """The token counts as an array, built when a comparison over the pool needs them (once the budget
        holds the largest candidate, the loop needs none)."""
        return np.asarray(self.pool.tokens, dtype=np.int64)

    def name(self, j: int) -> str:
        """The label of candidate ``j`` (or of context item ``j - n``)."""
        return str(self.pool.labels[j]) if j < self.n else str(self.pool.context_labels[j - self.n])

    # -- scoring ---------------------------------------------------------------------------
    def relevance(self) -> F32:
        return self.rel if self.lex is None else self.lex.rel

    def score(self, rel: F32, out: F32 | None = None, idx: npt.NDArray[np.int64] | None = None) -> F32:
        """The strategy's score; ``idx``: only for those candidates (``rel`` is then theirs).

        Written in place into ``out`` with the same float32 operations, in the same order,
        as the plain expressions in the comments (so the numbers are bit-identical).
        """
        s = self.strategy
        maxsim = self.maxsim if idx is None else self.maxsim[idx]
        if s == "baseline":  # rel
            if out is None:
                return rel
            np.copyto(out, rel)
            return out
        if s == "psi0":  # relpos * (1 - maxsim)
            buf = np.subtract(1.0, maxsim, out=out)
            return np.multiply(self.relpos if idx is None else self.relpos[idx], buf, out=buf)
        if s == "mmr":  # weighted_rel - (1 - lambda) * maxsim
            buf = np.multiply(self.params.one_minus_lambda, maxsim, out=out)
            return np.subtract(self.weighted_rel if idx is None else self.weighted_rel[idx], buf, out=buf)
        # hybrid: rel - penalty * max(maxsim - threshold, 0) (x unlinked: a candidate a pick names)
        buf = np.subtract(maxsim, self.params.overlap_threshold, out=out)
        np.maximum(buf, 0.0, out=buf)
        np.multiply(self.params.overlap_penalty, buf, out=buf)
        if self.lex is not None and self.lex.unlinked is not None:
            np.multiply(buf, self.lex.unlinked if idx is None else self.lex.unlinked[idx], out=buf)
        return np.subtract(rel, buf, out=buf)

    # -- the loop --------------------------------------------------------------------------
    def run(self, out: Selection, explain: int) -> Selection:
        p = self.params
        code = self.code
        tok = self.token_counts
        maxsim = self.maxsim
        cands = self.cands
        strategy = self.strategy
        code[self.rel < p.min_relevance] = _IRRELEVANT
        start_rel = self.relevance().copy()  # the hybrid's is updated in place by each pick
        self.start_rel = start_rel
        best_rel = max(float(start_rel.max()), 0.0)
        self.floor = p.relevance_floor * best_rel
        self.floored = (code == _NONE) & (start_rel < self.floor)
        code[self.floored] = _IRRELEVANT
        if strategy != "baseline" and self.ctx is not None:  # without context maxsim is 0
            code[(code == _NONE) & (maxsim >= p.redundancy_threshold)] = _REDUNDANT
        avail = code == _NONE
        hybrid = strategy == "hybrid"
        othr, open_ = p.overlap_threshold, p.overlap_penalty
        # without context maxsim is 0, so the hybrid's penalty, penalty * max(maxsim - threshold, 0), is 0
        no_overlap = hybrid and self.ctx is None and othr >= 0.0 and math.isfinite(open_)
        # each score against the goal and the given context alone (without context: the relevance itself)
        ctx_only = start_rel if no_overlap else self.score(self.relevance().copy())
        remaining = self.budget
        max_tok = int(max(tok))  # once the budget holds the largest, nothing is over it
        scores: list[float] = []
        rels: list[float] = []
        near_sims: list[np.float32] = []  # each pick's maxsim when picked (its novelty is worked out at the end)
        picked = self.picked
        tie = strategy in ("psi0", "hybrid")  # psi-loop's near-tie rule belongs to its scores
        dedup = strategy != "baseline"  # novelty strategies drop near-duplicates
        thr = p.redundancy_threshold
        max_items = p.max_items
        neg_inf = -np.inf
        masked = np.empty(self.n, dtype=np.float32)
        lex = self.lex
        rel = self.rel if lex is None else lex.rel  # the hybrid's is updated in place by each pick
        # strategy constants, read once (the expressions are those of ``score``)
        relpos, weighted_rel, olam = self.relpos, self.weighted_rel, p.one_minus_lambda
        if no_overlap:  # +inf marks anything no longer available (the penalty is 0 everywhere else)
            pen = dead = np.where(avail, np.float32(0.0), np.float32(np.inf))
        else:
            dead = np.where(avail, np.float32(0.0), np.float32(-np.inf))  # -inf for anything no longer available
            pen = dead
            if hybrid:
                # hybrid's penalty, penalty * max(maxsim - threshold, 0), is monotone in maxsim, so it
                # is kept up to date with a maximum when a pick has a neighbour past the threshold,
                # rather than recomputed every step; +inf marks anything no longer available
                pen = np.subtract(maxsim, othr)
                np.maximum(pen, 0.0, out=pen)
                np.multiply(open_, pen, out=pen)
                pen -= dead
        # a candidate a pick names is not redundant with it: its penalty is scaled by ``lex.unlinked``
        unlinked = lex.unlinked if hybrid and lex is not None else None
        kill, gone = (pen, np.inf) if hybrid else (dead, neg_inf)  # where a pick or a loss is struck off
        limit = self.n if max_items is None else max_items
        look = hybrid and p.lookahead > 1 and p.iterative and limit > 1
        iterative = p.iterative
        # bound once: numpy's call overhead, not arithmetic, is what a 200-candidate pool costs per pick
        argmax, multiply, subtract, maximum = masked.argmax, np.multiply, np.subtract, np.maximum
        ties_at = np.empty(self.n, dtype=bool)
        if hybrid:  # the penalty's constants as 0-d float32 arrays: a Python scalar operand costs numpy a
            # conversion per call (it is cast to float32 all the same, so the numbers do not change)
            othr_n, zero_n, open_n = (np.array(c, dtype=np.float32) for c in (othr, 0.0, open_))
        left_at, join = self.left_at, (lex.join if lex is not None else None)
        overs = False  # any candidate found over the budget
        # row r: the r-th pick's similarity to every candidate (the picks' nearest are read from them); a large
        # pool's columns are not kept (fresh memory per pick costs more than one small product at the end)
        columns = np.empty((min(limit, 32), self.n), dtype=np.float32) if self.n <= _SMALL_POOL else None
        while len(picked) < limit:
            if unlinked is not None:  # rel - unlinked x penalty (+inf x a factor > 0 stays +inf: unavailable)
                multiply(unlinked, pen, out=masked)
                subtract(rel, masked, out=masked)
            elif hybrid:  # rel - penalty * max(maxsim - threshold, 0), -inf when unavailable
                subtract(rel, pen, out=masked)
            elif strategy == "psi0":  # relpos * (1 - maxsim)
                subtract(1.0, maxsim, out=masked)
                multiply(relpos, masked, out=masked)
            elif strategy == "mmr":  # weighted_rel - (1 - lambda) * maxsim
                multiply(olam, maxsim, out=masked)
                subtract(weighted_rel, masked, out=masked)
            else:
                np.copyto(masked, rel)
            if not hybrid:
                masked += dead
            while True:  # the best that fits; a better one that does not fit is over budget
                best = int(argmax())
                top = masked[best]
                if tok[best] <= remaining or top == neg_inf:
                    break
                code[best], left_at[best], avail[best], masked[best] = _OVER, remaining, False, neg_inf
                kill[best] = gone
                overs = True
            if top == neg_inf:
                break
            if top <= 0.0 and (ctx_only[best] <= 0.0 or rel[best] <= 0.0):
                # nothing left adds anything: irrelevant, or no more than the caller's context holds (an item
                # that only overlaps earlier picks is still packed: it may carry the goal's other half)
                self.exhausted = True
                break
            if look and not picked:
                best = self._look_ahead(masked, pen, remaining)
                top = masked[best]
            elif tie:  # psi-loop's near-tie rule: among scores within epsilon, prefer value
                ties = np.greater_equal(masked, top - NEAR_TIE_EPSILON, out=ties_at).nonzero()[0]
                if len(ties) > 1:
                    if max_tok > remaining:
                        ties = ties[self.tokens[ties] <= remaining]
                    best = int(ties[rel[ties].argmax()])
                    top = masked[best]
            scores.append(float(top) + 0.0)  # + 0.0: the score is never -0.0
            rels.append(float(rel[best]))
            near_sims.append(maxsim[best])
            remaining -= int(tok[best])
            avail[best] = False
            kill[best] = gone
            picked.append(best)
            if not iterative:  # one-shot: the scores stay those against the context alone
                continue
            if columns is None:
                col = cands @ cands[best]  # one column per pick: no n x n matrix
            else:
                if len(picked) > len(columns):
                    columns = np.concatenate([columns, np.empty_like(columns)])
                col = np.matmul(cands, cands[best], out=columns[len(picked) - 1])
            maximum(maxsim, col, out=maxsim)
            if join is not None:
                join(best)
            if dedup:
                col[best] = -1.0
                near = col[col.argmax()]
                if near >= thr:
                    dup = avail & (col >= thr)
                    code[dup], avail[dup], kill[dup] = _REDUNDANT, False, gone  # "redundant with" is found at the end
                if hybrid and near > othr:  # below the threshold the penalty of ``col`` is 0
                    subtract(col, othr_n, out=masked)
                    maximum(masked, zero_n, out=masked)
                    multiply(open_n, masked, out=masked)
                    maximum(pen, masked, out=pen)
        if dedup and rels:
            # more relevant than a pick and close to something chosen or given: its lack of
            # novelty is what kept it out, whatever the budget did afterwards
            lost = ((avail | (code == _OVER)) if overs else avail) & (self.relevance() > min(rels))
            lost &= maxsim >= p.overlap_threshold
            code[lost] = _REDUNDANT
            avail[lost] = False
        fits = max_tok <= remaining  # the budget left holds every candidate: no comparison of token counts
        if self.exhausted:  # stopped because no score was positive: what the context already holds is redundant
            close = avail & (maxsim >= p.overlap_threshold)
            if not fits:
                close &= self.tokens <= remaining
            code[close], avail[close] = _REDUNDANT, False
        if fits:  # what is left fits, but ranked below the picks (max_items, or its score)
            code[avail] = _IRRELEVANT
        else:
            leftover = avail.nonzero()[0]
            if len(leftover):
                over = leftover[self.tokens[leftover] > remaining]
                code[over], self.left_at[over] = _OVER, remaining
                code[avail & (code == _NONE)] = _IRRELEVANT  # fits, but ranked below the picks (max_items)
        near = self._nearest_picks(columns[: len(picked)] if iterative and columns is not None else None)
        src, gain = lex.sources(picked) if lex is not None and lex.head is not None else ([], [])
        name, why, selected = self.name, self._why, out.selected
        # novelty, 1 - maxsim in float32 (as the scalar expression), clipped at 0
        novs = [max(0.0, v) for v in np.subtract(1.0, np.array(near_sims, dtype=np.float32)).tolist()]
        for rank, (i, j, r, nov, score) in enumerate(zip(picked, near, rels, novs, scores, strict=True)):
            link = None
            if gain and gain[rank] > 0.05:
                link = (name(picked[src[rank]]) if src[rank] >= 0 else None, gain[rank])
            selected.append(Pick(i, r, nov, score, int(tok[i]), why(r, nov, j, link)))
        self._explain(out, explain, remaining)
        if not out.selected:
            out.note = self._empty_note(out)
        return out

    def _look_ahead(self, masked: F32, pen: F32, remaining: int) -> int:
        """The first pick: among the ``lookahead`` best that fit, the one whose score plus the best
        positive score a second pick would then have is highest (the second must fit what is left).

        A pick's follow-up is scored as the loop would score it after the pick joins (coverage, links,
        the overlap penalty, near-duplicates dropped), for all the first candidates in one batch.
        """
        lex = self.lex
        assert lex is not None
        p = self.params
        fits = np.where(self.tokens <= remaining, masked, -np.inf)
        k = min(p.lookahead, int(np.isfinite(fits).sum()))
        best = int(fits.argmax())
        if k < 2:
            return best
        firsts = np.argpartition(-fits, k - 1)[:k]
        firsts = firsts[np.argsort(-fits[firsts], kind="stable")]  # best first: ties keep the greedy choice
        cols = self.cands @ self.cands[firsts].T  # [n, k]
        after, unlinked = lex.peek(firsts)  # [n, k]: relevance (and penalty scale) once each first has joined
        np.subtract(cols, p.overlap_threshold, out=cols)
        np.maximum(cols, 0.0, out=cols)
        penalty = np.maximum(pen[:, None], p.overlap_penalty * cols)
        if unlinked is not None:
            penalty *= unlinked
        follow = after - penalty
        dup = cols >= p.redundancy_threshold - p.overlap_threshold
        left = remaining - self.tokens[firsts]
        follow[dup | (self.tokens[:, None] > left[None, :])] = -np.inf
        follow[firsts, np.arange(k)] = -np.inf
        nxt = follow.max(axis=0)
        if not nxt[0] > 0.0:
            # the greedy choice fills the budget (or nothing useful follows it): a pair is not traded for it,
            # or two short items would always beat one that answers alone (WiCE 1x lost 12 points that way)
            return int(firsts[0])
        value = fits[firsts] + np.maximum(nxt, 0.0)
        return int(firsts[int(value.argmax())])

    def _nearest(self, idx: Sequence[int] | npt.NDArray[np.int64], before: bool = False) -> tuple[npt.NDArray[np.int64], F32]:
        """For each candidate in ``idx``, the most similar context or selected item and the similarity.

        ``before``: ``idx`` are the picks in order, and each is compared with the context
        and the picks made before it. One matrix product for all of them.
        """
        k = len(self.picked)
        if self._refs is None:  # the picks and the context, and their labels: the same for both calls
            labels = np.asarray(self.picked, dtype=np.int64)
            refs = self.cands[labels]
            if self.ctx is not None:
                refs = np.vstack([refs, self.ctx])
                labels = np.concatenate([labels, np.arange(len(self.ctx)) + self.n])
            self._refs = (refs, labels)
        refs, labels = self._refs
        if not len(refs) or not len(idx):
            return np.full(len(idx), -1, dtype=np.int64), np.full(len(idx), -2.0, dtype=np.float32)
        # the picks in order against the picks (and the context): the gathered rows serve both sides
        sims = (refs[:k] if before else self.cands[idx]) @ refs.T
        if before:
            later = _later(k) if len(idx) == k else np.arange(k) >= np.arange(len(idx))[:, None]
            np.copyto(sims[:, :k], -np.inf, where=later)  # itself and later picks
        j = sims.argmax(axis=1)
        best = sims[np.arange(len(idx)), j].astype(np.float32)
        near = np.where(np.isfinite(best), labels[j], -1)
        return near, best

    def _nearest_picks(self, columns: F32 | None) -> list[int]:
        """For each pick in order, the most similar context item or earlier pick (-1: none).

        Without context (in a small pool), read from the similarity columns the loop computed for
        each pick (its similarity to every candidate), else one matrix product (``_nearest``).
        """
        k = len(self.picked)
        # (a pick made twice, which only NaN scores allow, would meet its own column's entry, set to -1)
        if self.ctx is not None or columns is None or not k or len(set(self.picked)) < k:
            return cast(list[int], self._nearest(self.picked, before=True)[0].tolist())
        picks = np.asarray(self.picked, dtype=np.int64)
        sims = columns[:, picks]  # [s, t]: pick s's similarity to pick t
        np.copyto(sims, -np.inf, where=_later(k).T)  # only earlier picks
        j = sims.argmax(axis=0)
        return cast(list[int], np.where(np.isfinite(sims.max(axis=0)), picks[j], -1).tolist())

    def _explain(self, out: Selection, explain: int, remaining: int) -> None:
        counts = np.bincount(self.code, minlength=4).tolist()  # picks keep code _NONE (0)
        for c, name in _REASONS.items():
            if counts[c]:
                out.rejected_counts[name] = counts[c]
        if explain > 0 and any(counts[1:]):  # the rejected are found when the answer is read
            out._explain_later = lambda: self._rejections(np.flatnonzero(self.code), explain)

    def _rejections(self, rejected: npt.NDArray[np.int64], explain: int) -> list[Rejection]:
        """The strongest ``explain`` of ``rejected`` with their reasons (when the answer is read)."""
        out: list[Rejection] = []
        rel = self.relevance()
        neg = -rel[rejected]
        if len(rejected) > explain:  # the same order as a stable sort of all, for a fraction of the cost
            kth = np.partition(neg, explain - 1)[explain - 1]
            sub = np.flatnonzero(neg <= kth)
            top = rejected[sub[np.argsort(neg[sub], kind="stable")[:explain]]]
        else:
            top = rejected[np.argsort(neg, kind="stable")]
        final = self.score(rel[top], idx=top)
        nears, sims = self._nearest(top)
        min_rel = self.params.min_relevance
        low = (self.rel[top] < min_rel).tolist()  # compared as the loop did: in float32
        rows = zip(top.tolist(), self.code[top].tolist(), self.rel[top].tolist(), low, rel[top].tolist(),
                   final.tolist(), self.tokens[top].tolist(), self.left_at[top].tolist(), nears.tolist(),
                   sims.tolist(), strict=True)
        for i, c, dense, below, r, f, t, left, near, sim in rows:
            nov = float(min(1.0, max(0.0, 1.0 - sim))) if near >= 0 else 1.0
            other = None
            if c == _IRRELEVANT and below:
                why = f"relevance {dense:.2f} < min_relevance {min_rel:.2f}"
            elif c == _IRRELEVANT and self.floored[i]:
                why = (f"relevance {float(self.start_rel[i]):.2f} below the floor {self.floor:.2f} "
                       f"({self.params.relevance_floor:g} x the best candidate's)")
            elif c == _IRRELEVANT and self.exhausted and not self.params.max_items:
                why = "adds nothing: its score is not positive"
            elif c == _IRRELEVANT:
                why = (f"ranked below the {self.params.max_items} selected (max_items)" if self.params.max_items
                       else "scored below every selected item")
            elif c == _REDUNDANT:
                other = self.name(near)
                why = f"redundant with {other} (similarity {sim:.2f})"
            else:
                why = f"{t} tokens, {left} left in the budget"
            out.append(Rejection(i, r, nov, f, t, _REASONS[c], why, other))
        return out

    def _why(self, rel: float, novelty: float, near: int, link: tuple[str | None, float] | None) -> str:
        why = f"relevance {rel:.2f}"
        if link is not None and link[0] is None:
            why = f"{why}, named by the goal ({link[1]:.2f})"
        elif link is not None:
            why = f"{why}, linked to {link[0]} ({link[1]:.2f})"
        if self.strategy == "baseline":
            return why
        if near >= 0:
            return f"{why}, novelty {novelty:.2f} (nearest {self.name(near)})"
        return f"{why}, novelty {novelty:.2f} (nothing in context)"

    def _empty_note(self, out: Selection) -> str:
        if self.budget <= 0:
            return "budget_tokens is 0: nothing fits"
        if int(self.tokens.min()) > self.budget:
            return (f"every candidate is larger than the budget ({int(self.tokens.min())} tokens smallest, "
                    f"budget {self.budget})")
        kinds = sorted(out.rejected_counts)
        return "nothing selected: every candidate was " + " or ".join(k.replace("_", " ") for k in kinds)


class _Lexical:
    """The hybrid's lexical state: TF-IDF relevance with coverage, and multi-hop links.

    ``rel`` = (dense share + lexical share) + hop weight x link, updated in place by
    ``join`` from per-candidate arrays built once per call: which goal terms each
    candidate holds (coverage) and its head-term weights (links).
    """

    def __init__(self, pool: Pool, p: Params, dense: F32) -> None:
        texts = pool.candidate_texts
        if texts is None or pool.goal_text is None:
            raise InvalidInput("strategy", "hybrid needs the candidate and goal texts", "pass texts in the Pool")
        self.params = p
        self.view = view_of(texts, head_terms=p.hop_head_terms)
        if p.lexical == "recall":
            # the share of the goal's (IDF-weighted) terms a candidate contains: long or short,
            # a candidate that holds more of what the goal asks about is worth more (the goal's own
            # TF-IDF weights are not needed)
            self.q_cols = self.view.query_columns(pool.goal_text)
            idf = self.view.idf[self.q_cols]
            self.q_vals = (idf / idf.sum()).astype(np.float32, copy=False) if len(idf) else np.zeros(0, np.float32)
        else:
            self.q_cols, self.q_vals = self.view.query(pool.goal_text)
        self.weights = np.ones(len(self.q_cols), dtype=np.float32)
        # [n, |q|] dense slice of the goal's columns: relevance is one small matmul per step
        self.cols = self.view.columns(self.q_cols, binary=p.lexical == "recall")
        # per candidate, what picking it does to each goal term's weight: x (1 - coverage)
        # where it holds the term (every stored weight is positive), x 1 elsewhere
        self.covers: F32 | None = None
        self.covers_any: npt.NDArray[np.bool_] | None = None
        if p.coverage > 0 and len(self.q_cols):
            hold = self.cols > 0
            self.covers = np.where(hold, np.float32(1.0 - p.coverage), np.float32(1.0))
            # read per pick: does it hold any goal term (the weights are all 1 here; a product is cheaper
            # than ``any`` along a short axis, and a sum of non-negative weights is > 0 just when one is)
            self.covers_any = cast("npt.NDArray[np.bool_]", (self.cols @ self.weights) > 0)
        self.head = self.view.head_grid_weights(self.q_cols) if p.hop_weight > 0 else None
        n = self.view.n
        self.hop_gain = np.zeros(n, dtype=np.float32)
        self._present = np.zeros(self.view.v + 1, dtype=np.float32)  # reused term mask (+ padding column)
        if self.head is not None and p.goal_links and len(self.q_cols):
            # the goal is the first source of links: the titled candidates it names
            self._present[self.q_cols] = 1.0
            self.hop_gain = self.view.named_by(self._present)
            self._present[self.q_cols] = 0.0
        self.named: F32 = self.hop_gain.copy()  # the goal's links, read by ``sources`` (the answer's why)
        # 1 - link for a titled candidate (its subject is its heading), 1 otherwise; floored above 0 so that
        # the +inf penalty of an unavailable candidate stays +inf
        self._titled = self.view.titled_weight
        self.links = np.empty((min(n, 32), n), np.float32)  # row r: the links of the r-th pick
        # what ``join`` reads on every pick, bound once
        self._indices, self._indptr, self._grid = self.view.indices, self.view.indptr_list, self.view.head_grid
        self._held = self.view.held_rows
        self._cells = np.empty_like(self.head) if self.head is not None and self._held is not None else None
        self._lexbuf = np.empty(n, np.float32)
        self.k = 0  # picks joined
        for text in pool.context_texts:
            self._mark(self.view.query(text)[0])
            self._cover()
            self._unmark(self.view.query(text)[0])
        # the lexical signal is lexm @ weights: one product per pick that covers a goal term
        self.lexm: F32 = (p.lexical_weight * (self.cols * self.q_vals)).astype(np.float32, copy=False)
        self._dense = ((1.0 - p.lexical_weight) * dense).astype(np.float32, copy=False)
        self.unlinked: F32 | None = None
        self._pair: tuple[F32, F32, F32, F32] | None = None
        if self.head is not None and p.linked_not_redundant and n <= _SMALL_POOL:
            # rel and unlinked are the two rows of one array, [base; 1] - hop x [-weight; titled], so a pick
            # updates both with one product and one difference (the same float32 numbers as
            # base + weight x hop and 1 - hop x titled: a - (-b) is a + b exactly); in a large pool the
            # arithmetic, not the call, is what counts, and four operations with scalars move less memory
            left = np.empty((2, n), np.float32)
            left[1] = 1.0
            scale = np.stack([np.full(n, -p.hop_weight, np.float32), self._titled])
            pair, prod = np.empty((2, n), np.float32), np.empty((2, n), np.float32)
            self._pair = (left, scale, prod, pair)
            self._base: F32 = left[0]  # dense + lexical: changes only when coverage does
            np.add(self._dense, self._lexical(), out=self._base)
            np.subtract(left, np.multiply(self.hop_gain, scale, out=prod), out=pair)
            self.rel: F32 = pair[0]
            self.unlinked = pair[1]
        else:
            self._base = self._dense + self._lexical()
            self.rel = self._base if self.head is None else np.add(self._base, p.hop_weight * self.hop_gain)
            if self.head is not None and p.linked_not_redundant:
                self.unlinked = np.subtract(1.0, self.hop_gain * self._titled)

    def _mark(self, cols: npt.NDArray[np.int64]) -> None:
        self._present[cols] = 1.0

    def _unmark(self, cols: npt.NDArray[np.int64]) -> None:
        self._present[cols] = 0.0

    def _lexical(self) -> F32:
        return cast(F32, self.lexm @ self.weights)

    def join(self, i: int) -> None:
        """Pick ``i`` joins the context: its goal terms count less, its links count, ``rel`` follows.

        Called once per pick: the arrays it reads are bound at construction, and the link is
        ``LexicalView.grid_links`` written out in place (the same float32 operations).
        """
        covers = self.covers
        if covers is not None and self.covers_any is not None and self.covers_any[i]:
            # goal terms the pick holds lose weight (a greedy set cover)
            weights = self.weights
            weights *= covers[i]
            np.add(self._dense, np.matmul(self.lexm, weights, out=self._lexbuf), out=self._base)
        head = self.head
        if head is not None:
            k = self.k
            if k == len(self.links):
                self.links = np.concatenate([self.links, np.empty_like(self.links)])
            kept = self._held
            held = kept.get(i) if kept is not None else None
            if held is None:
                terms = self._indices[self._indptr[i] : self._indptr[i + 1]]
                present = self._present
                present[terms] = 1.0
                held = present[self._grid]  # [head_terms, n]: which of each text's head terms the pick holds
                present[terms] = 0.0
                held[:, i] = 0.0  # not its own
                if kept is not None:  # a small pool keeps it for the next selection (it is the same for any goal)
                    held.flags.writeable = False
                    kept[i] = held
            link = self.links[k]
            # a kept row is read-only; a large pool's row is its own (multiplied in place)
            cells = np.multiply(held, head, out=self._cells if kept is not None else held)
            np.add.reduce(cells, axis=0, out=link)
            hop = self.hop_gain
            np.maximum(hop, link, out=hop)
            if self._pair is not None:  # [rel; unlinked] = [base; 1] - hop x [-weight; titled]
                left, scale, prod, pair = self._pair
                np.subtract(left, np.multiply(hop, scale, out=prod), out=pair)
            else:
                rel = self.rel
                np.multiply(self.params.hop_weight, hop, out=rel)  # (dense + lexical) + weight x link
                np.add(self._base, rel, out=rel)
                unlinked = self.unlinked
                if unlinked is not None:
                    np.multiply(hop, self._titled, out=unlinked)
                    np.subtract(1.0, unlinked, out=unlinked)
        self.k += 1

    def peek(self, firsts: npt.NDArray[np.int64]) -> tuple[F32, F32 | None]:
        """[n, len(firsts)]: ``rel`` (and ``unlinked``) as they would be after each of ``firsts`` joined
        (nothing changes)."""
        p = self.params
        k = len(firsts)
        if self.covers is not None:
            base = self.lexm @ (self.weights * self.covers[firsts]).T  # [n, k]
            base += self._dense[:, None]
        else:
            base = np.repeat(self._base[:, None], k, axis=1)
        if self.head is None:
            return base, None
        view = self.view
        starts, ends = view.indptr[firsts], view.indptr[firsts + 1]
        lens = ends - starts
        at = np.repeat(starts - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
        present = np.zeros((k, view.v + 1), dtype=np.float32)  # row r: the terms first pick r holds
        present[np.repeat(np.arange(k), lens), view.indices[at]] = 1.0
        # hop[c, r]: the weighted share of c's head terms that first pick r holds
        hop = np.einsum("hn,khn->nk", self.head, present[:, view.head_grid])
        hop[firsts, np.arange(k)] = 0.0
        np.maximum(hop, self.hop_gain[:, None], out=hop)
        unlinked = None if self.unlinked is None else 1.0 - hop * self._titled[:, None]
        hop *= p.hop_weight
        base += hop
        return base, unlinked

    def sources(self, picked: Sequence[int]) -> tuple[list[int], list[float]]:
        """For each pick: the rank of the earliest earlier pick whose link to it is the strongest
        (-1: the goal's, when the goal names it at least as strongly), and the weighted link it had
        when it was picked.

        Worked out once at the end from the stored links (only the answer's ``why`` needs
        them): the running maximum held max(goal's link, earlier links), reached first by that source.
        """
        k = self.k
        if not k:
            return [], []
        to_picks = self.links[:k, picked]  # [rank of source, rank of pick]
        later = _later(k).T if len(picked) == k else np.arange(k)[:, None] >= np.arange(len(picked))
        np.copyto(to_picks, -np.inf, where=later)  # only earlier picks
        from_picks = np.maximum(np.maximum.reduce(to_picks, axis=0, initial=-np.inf), 0.0).tolist()
        src = to_picks.argmax(axis=0).tolist()
        goal = self.named[list(picked)].tolist()
        w = self.params.hop_weight
        return ([-1 if g >= h else r for r, g, h in zip(src, goal, from_picks, strict=True)],
                [max(g, h) * w for g, h in zip(goal, from_picks, strict=True)])

    def _cover(self) -> bool:
        """Goal terms the marked text holds lose weight; True if any did."""
        if self.params.coverage <= 0 or not len(self.q_cols):
            return False
        hit = self._present[self.q_cols] > 0
        if not hit.any():
            return False
        self.weights[hit] *= 1.0 - self.params.coverage
        return True
