"""Matching one claim to its evidence: BM25 candidates, coverage features, consistency checks.

Every feature is computed over sentences, never over chunks, so how the caller cut its sources
into chunks (one sentence each, a page each) does not move the verdict. BM25 (bm25s) and an
IDF-weighted coverage score rank every sentence in one vectorised pass; only the top few
candidates get the detailed features:

- ``cov1`` / ``cov2`` / ``cov3``: IDF-weighted share of the claim's content words found in the
  best sentence, the best pair, and the best three sentences (greedy);
- ``miss_frac``: share of the claim's words none of those three sentences has; ``miss_max``: how
  rare (IDF, scaled to [0, 1]) the rarest such word is: a missing name matters, a missing "use" not;
- ``clause_min``: coverage of the claim's worst-covered clause ("X, and it also cures Y": the add-on
  clause is what nobody supports);
- ``bigram``: word pairs of the claim that the evidence has in the same order;
- ``num_missing``: a number of the claim that the candidates do not contain;
- ``mismatch``: a consistency check fired (see consistency.py);
- ``specific_cov``: share of the claim's specific words (numbers, capitalised names) those three
  sentences contain: a missing date or name matters more than a missing common word;
- ``log_sentences``: log(1 + sentences in the evidence): the more sentences, the more of a claim's
  words turn up somewhere by chance, so the same coverage means less on a long page;
- with the semantic (hybrid) matcher, ``sem_max`` and ``sem_best``: the embedding cosine of the best
  candidate and of the cited evidence; ``sem_union`` (measured, not in the model): the cosine with
  the mean of the three most similar candidates (support spread over a few sentences).
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from bosun.core.audit.align import aligned_coverage, best_of, budget_coverages
from bosun.core.audit.claims import content_tokens
from bosun.core.audit.consistency import Mismatch, agreeing_numbers, check, overclaim, restated_units
from bosun.core.audit.index import SentenceIndex

TOP_K = 8  # candidate sentences per claim by coverage
TOP_CHUNKS = 4  # chunks per claim by BM25, each adding its best sentence
SMALL_INDEX = 24  # up to this many sentences in all, every sentence is a candidate
GREEDY = 3  # sentences in the greedy cover behind cov3, miss_frac, miss_max and clause_min
PAIR_GAIN = 0.15  # a second sentence must add this much coverage to be cited
CLAUSE_MIN = 0.2  # a clause of a several-clause claim less covered than this is what no evidence supports


def has_uncovered_clause(features: dict[str, float]) -> bool:
    """An add-on clause no evidence covers: the claim is at most partially supported. (Measured and not used:
    clearing a clause whose soft token alignment, ``clause_soft``, reaches 0.5 let an add-on that repeats its
    subject through ("..., which makes Rust programs faster") as often as it rescued a paraphrased clause.)"""
    return features["n_clauses"] > 1 and features["clause_min"] < CLAUSE_MIN


def at_most_partial(features: dict[str, float]) -> bool:
    """The claim says more than its evidence: an uncovered add-on clause, or a universal ("all", "always")
    the cited evidence does not state. Either makes a claim at most partially supported."""
    return has_uncovered_clause(features) or features.get("overclaim", 0.0) > 0


LEXICAL_FEATURES = ("cov1", "cov2", "cov3", "miss_frac", "miss_max", "clause_min", "bigram", "num_missing", "mismatch",
                    "specific_cov", "log_sentences")
SEMANTIC_FEATURES = (*LEXICAL_FEATURES, "sem_max", "sem_best")
# computed and measured (bench/audit_train.py --ablate) but not in the model: it raised one
# cross-validation split on WiCE, yet lost on reshuffled group splits and on ExpertQA -> WiCE transfer
MEASURED_FEATURES = ("sem_union",)
# with contextual word states (align.py): the soft token alignment of the claim with its candidates, without
# ``bigram``: shared word order measures how closely a claim copies its source's phrasing, which is a habit of
# the writer, not support (ExpertQA's answers copy their pages, WiCE's claims paraphrase); once ``align`` gives
# soft coverage, dropping it lifts the worst transfer cell (bench/audit_train.py --ablate --shift, round 5)
# Round 7: ``align_b3``, the alignment with the best three candidates only, replaces ``align`` (every candidate):
# a best cosine over a page's twelve candidates rises by chance, over a claim's two evidence sentences it does not,
# so the same value meant less support on a page than on a short evidence (bench/audit_train.py --shift: every
# CV and transfer cell the same or up, the worst shifted cell 0.659 -> 0.664)
ALIGNED_FEATURES = (*(n for n in SEMANTIC_FEATURES if n != "bigram"), "align_b3")
ROUND6_ALIGNED = (*(n for n in SEMANTIC_FEATURES if n != "bigram"), "align")  # kept for the comparison
# computed and reported, not in the model: the alignment of the claim's worst clause (WiCE CV up,
# ExpertQA CV and transfer down; bench/audit_train.py --ablate), and the budgets of one and two sentences
ALIGN_MEASURED = ("align_min", "align_q25", "align_low", "align_specific", "align_worst", "align_gaps", "align_b1",
                  "align_b2")
SEM_UNION_K = 3  # candidates averaged for sem_union, as many as the greedy cover uses

# a number, or a capitalised word that does not open the claim or a sentence of it: a name or a date
_SPECIFIC = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][\w'-]*|\d[\d.,]*)")

# past tenses only (no "cut", "set", "left", "found": those are nouns, adjectives or presents too)
_IRREGULAR_PAST = frozenset([
    "became", "began", "brought", "built", "bought", "caught", "chose", "came", "did", "drew", "drove", "fell",
    "fought", "fled", "flew", "forgot", "froze", "gave", "got", "grew", "held", "hid", "kept", "knew", "laid",
    "lent", "made", "meant", "met", "oversaw", "paid", "ran", "rang", "rose", "said", "sang", "sank", "sat",
    "sent", "shook", "shot", "slid", "sold", "sought", "spent", "spoke", "stood", "stole", "struck", "swore",
    "swept", "swam", "taught", "tore", "told", "thought", "threw", "took", "underwent", "understood",
    "undertook", "went", "withdrew", "wore", "wrote",
])
_CLAUSE_SPLIT = re.compile(
    r"\s*(?:;|,\s*(?:and|but|while|whereas|which|who|where|so|yet)\b|\b(?:and|but)\s+(?:also|it|they|he|she|this|that)\b"
    r"|\bas well as\b|\band\s+(?=(?:is|are|was|were|has|have|had|can|will|could|would|may|might)\b)"
    # ", also cures X" after an appositive; "..., relieves pain and reverses hair loss": a verb after "and"
    r"|,\s*(?=also\b)|\band\s+(?=[a-z]+(?:es|ed)\b)"
    # an irregular past tense or a sequence word after "and": "... in October 2022 and laid off half its staff"
    r"|\band\s+(?=(?:" + "|".join(sorted(_IRREGULAR_PAST)) + r"|then|later|soon|subsequently|afterwards|eventually)\b)"
    # a past tense that is also a noun or a present ("cut", "set", "put", "hit", "led") followed by what a verb
    # takes: an article, a possessive, or a noun phrase ("... in its first month and cut average commute times")
    r"|\band\s+(?=(?:cut|set|put|hit|led|won|lost)\s+(?:the|a|an|its|their|his|her|our|average|overall|more|"
    r"most|half|nearly|about|\d)\b))\s*",
    re.IGNORECASE,
)


@dataclass
class ClaimMatch:
    """Everything the matcher found for one claim."""

    features: dict[str, float]
    evidence: list[int]  # sentence ids cited (one or two)
    nearest: int | None  # best candidate sentence id, for unsupported claims
    nearest_score: float
    mismatches: list[Mismatch] = field(default_factory=list)
    candidates: list[int] = field(default_factory=list)
    weakest_clause: str | None = None  # the least-covered clause of a claim with several
    universal: str | None = None  # a universal of the claim ("all") the cited evidence does not state


@dataclass(frozen=True)
class ClaimTerms:
    """A claim's content words, their ids in the index and IDF weights."""

    tokens: list[str]
    ids: list[int | None]
    weights: np.ndarray
    total: float


def claim_terms(claim: str, index: SentenceIndex) -> ClaimTerms:
    toks = list(dict.fromkeys(content_tokens(claim)))
    ids = [index.vocab.get(t) for t in toks]
    weights = np.array([index.idf(t) for t in toks], dtype=np.float64)
    return ClaimTerms(toks, ids, weights, float(weights.sum()) or 1.0)


def candidates(terms: ClaimTerms, index: SentenceIndex, cover: np.ndarray | None = None) -> list[int]:
    """The claim's candidate sentences: the TOP_K sentences that cover most of it, then the best
    sentence of each of the TOP_CHUNKS chunks BM25 ranks highest (ties: lowest id first); every
    sentence when there are only a few. ``cover``: the claim's coverage of every sentence, if known."""
    if not index.size:
        return []
    if index.size <= SMALL_INDEX:  # a few sentences: all of them (a paraphrase may share no word)
        return list(range(index.size))
    if not any(t is not None for t in terms.ids):
        return []
    if cover is None:
        cover = index.coverage_all(terms.ids, terms.weights)
    out = _top(cover, TOP_K)
    bm25 = index.bm25_scores(terms.tokens)
    for ci in _top(bm25, TOP_CHUNKS):
        lo, hi = int(index.chunk_start[ci]), int(index.chunk_start[ci + 1])
        if hi > lo:
            best = lo + int(np.argmax(cover[lo:hi]))
            if cover[best] > 0 and best not in out:
                out.append(best)
    return out


def candidates_many(terms: list[ClaimTerms], index: SentenceIndex) -> list[list[int]]:
    """``candidates`` for every claim of an answer, with their coverage in one sparse product."""
    if not terms or index.size <= SMALL_INDEX:
        return [candidates(t, index) for t in terms]
    cover = index.coverage_many([(t.ids, t.weights) for t in terms])
    return [candidates(t, index, cover[:, k]) for k, t in enumerate(terms)]


def _top(scores: np.ndarray, k: int) -> list[int]:
    """Indices of the k highest positive scores, best first, ties by lowest index."""
    k = min(k, len(scores))
    if k <= 0:
        return []
    top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
    top = top[scores[top] > 0]
    return sorted(top.tolist(), key=lambda s: (-float(scores[s]), s))


@lru_cache(maxsize=8192)
def clauses(claim: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The claim's clauses with their content words (a clause of fewer than two content words is
    folded into the previous one: "and it" alone is not a claim)."""
    out: list[tuple[str, tuple[str, ...]]] = []
    for part in _CLAUSE_SPLIT.split(claim):
        toks = tuple(dict.fromkeys(content_tokens(part)))
        if len(toks) >= 2 or not out:
            out.append((part.strip(), toks))
        else:
            out[-1] = (out[-1][0] + " " + part.strip(), out[-1][1] + toks)
    return tuple(c for c in out if c[1])


def match_claim(
    claim_text: str, index: SentenceIndex, contents: list[str],
    claim_vec: np.ndarray | None = None, cand_vecs: dict[int, np.ndarray] | None = None,
    terms: ClaimTerms | None = None, cands: list[int] | None = None,
    aligned: dict[str, float] | None = None, per_sentence: dict[str, np.ndarray] | None = None,
) -> ClaimMatch:
    """Find the claim's best evidence and compute its features (``cand_vecs``: sentence id -> vector;
    ``per_sentence``: each claim token's best cosine against each candidate's word states, see align.py;
    ``aligned``: the best of those over all the candidates, derived from ``per_sentence`` when not given)."""
    if aligned is None and per_sentence is not None:
        aligned = best_of(per_sentence)
    terms = terms or claim_terms(claim_text, index)
    cands = cands if cands is not None else candidates(terms, index)
    w, total = terms.weights, terms.total
    n_tok = len(terms.tokens)
    hits = index.hits(terms.ids, np.array(cands, dtype=np.int64))
    cov = hits @ w / total if cands else np.zeros(0)
    sem = None
    if claim_vec is not None and cand_vecs is not None and cands:
        sem = np.array([float(cand_vecs[s] @ claim_vec) for s in cands])
    if not cands:
        return ClaimMatch(_empty_features(n_tok, index.size), [], None, 0.0)

    rank = cov + (sem if sem is not None else 0.0)
    best_i = int(np.argmax(rank))
    cov1 = float(cov.max())
    union = hits[:, None, :] | hits[None, :, :]
    pair_cov = union @ w / total
    a, b = np.unravel_index(int(np.argmax(pair_cov)), pair_cov.shape)
    cov2 = float(pair_cov[a, b])
    evidence_i = [best_i]
    if a != b and cov2 >= float(cov[best_i]) + PAIR_GAIN:
        evidence_i = sorted({int(a), int(b)})
    covered = np.zeros(n_tok, dtype=bool)
    cover_i: list[int] = []  # the greedy cover's sentences
    for _ in range(GREEDY):
        gain = (hits & ~covered) @ w
        g = int(np.argmax(gain))
        if gain[g] <= 0:
            break
        covered |= hits[g]
        cover_i.append(g)
    cov3 = float(w[covered].sum() / total)
    missing_w = w[~covered]
    miss_max = float(missing_w.max() / index.unseen_idf) if missing_w.size else 0.0
    covered_set = {t for t, c in zip(terms.tokens, covered, strict=True) if c}
    nums = [t for t in terms.tokens if t[0].isdigit()]
    if any(t not in covered_set for t in nums):  # a number restated in another form counts as covered
        covered_set |= agreeing_numbers(claim_text, " ".join(index.sentences[s].text for s in cands))
    specific = _specific_tokens(claim_text).intersection(terms.tokens)
    if any(t not in covered_set for t in specific):  # a unit written as its symbol: "Celsius" for "°C"
        covered_set |= restated_units(claim_text, " ".join(index.sentences[s].text for s in cands))
    clause_cov: list[tuple[float, str]] = []
    weight_of = dict(zip(terms.tokens, w.tolist(), strict=True))
    for text, cl in clauses(claim_text):
        tw = sum(weight_of.get(t, 0.0) for t in cl) or 1.0
        clause_cov.append((sum(weight_of.get(t, 0.0) for t in cl if t in covered_set) / tw, text))
    weakest = min(clause_cov) if len(clause_cov) > 1 else None
    evidence = [cands[i] for i in evidence_i]
    ev_tokens = [t for sid in evidence for t in index.sentences[sid].tokens]
    bigrams = list(itertools.pairwise(terms.tokens))
    ev_bigrams = set(itertools.pairwise(ev_tokens))
    bigram = (sum(1 for bg in bigrams if bg in ev_bigrams) / len(bigrams)) if bigrams else cov1
    mismatches = _mismatches(claim_text, evidence, index, contents, cands, cov)
    # a universal ("all") the evidence states: in the cited sentences or another of the greedy cover (a claim that
    # merges two sentences cites the one that covers most of it, the "all" may be in the other)
    universal = overclaim(claim_text, " ".join(index.sentences[s].text for s in dict.fromkeys(
        [*evidence, *(cands[i] for i in cover_i)])))
    features = {
        "cov1": cov1, "cov2": max(cov1, cov2), "cov3": cov3,
        "miss_frac": float((~covered).sum() / max(1, n_tok)), "miss_max": miss_max,
        "clause_min": min(clause_cov)[0] if clause_cov else cov3, "bigram": bigram,
        "num_missing": 1.0 if any(t not in covered_set for t in nums) else 0.0,
        "mismatch": 1.0 if mismatches else 0.0, "n_clauses": float(len(clause_cov)),
        "overclaim": 1.0 if universal else 0.0,
        "specific_cov": sum(1 for t in specific if t in covered_set) / len(specific) if specific else 1.0,
        "log_sentences": math.log1p(index.size),
        "sem_max": float(sem.max()) if sem is not None else 0.0,
        "sem_best": float(sem[evidence_i[0]]) if sem is not None else 0.0,
        "sem_union": _sem_union(claim_vec, cands, cand_vecs, sem) if sem is not None else 0.0,
    }
    features["align"], features["align_min"] = alignment(claim_text, index, aligned)
    features.update(alignment_extras(claim_text, index, aligned))
    features.update(budget_alignment(index, per_sentence))
    return ClaimMatch(features, evidence, cands[best_i], float(cov[best_i]), mismatches, cands,
                      weakest[1] if weakest is not None else None, universal)


@lru_cache(maxsize=8192)
def _specific_tokens(claim: str) -> frozenset[str]:
    """Tokens of the claim's numbers and capitalised words (names, months, places)."""
    return frozenset(t for m in _SPECIFIC.finditer(claim) for t in content_tokens(m.group(1)))


def _sem_union(claim_vec: np.ndarray | None, cands: list[int], cand_vecs: dict[int, np.ndarray] | None,
               sem: np.ndarray) -> float:
    """Cosine of the claim with the normalised mean of its SEM_UNION_K most similar candidates."""
    if claim_vec is None or cand_vecs is None:
        return 0.0
    top = np.argsort(-sem, kind="stable")[:SEM_UNION_K]
    mean = np.mean([cand_vecs[cands[int(i)]] for i in top], axis=0)
    norm = float(np.linalg.norm(mean))
    return float(mean @ claim_vec) / norm if norm > 0 else 0.0


def alignment(claim: str, index: SentenceIndex, best: dict[str, float] | None) -> tuple[float, float]:
    """Soft (token-state) coverage of the claim by its candidates, and of its worst clause, from each
    claim token's best cosine (``soft_recall``); IDF weights from the call's index."""
    if best is None:
        return 0.0, 0.0
    weights = {t: index.idf(t) for t in best}
    return aligned_coverage(best, weights, [toks for _, toks in clauses(claim)])


BUDGETS = (1, 2, 3)  # sentences the budgeted alignment may use (align_b1 .. align_b3)


def budget_alignment(index: SentenceIndex, per_sentence: dict[str, np.ndarray] | None) -> dict[str, float]:
    """The soft coverage by the best one, two and three candidate sentences (``align.budget_coverage``),
    IDF-weighted: comparable between a claim checked against two sentences and one checked against a page."""
    if not per_sentence:
        return {f"align_b{k}": 0.0 for k in BUDGETS}
    weights = {t: index.idf(t) for t in per_sentence}
    return {f"align_b{k}": v for k, v in zip(BUDGETS, budget_coverages(per_sentence, weights, BUDGETS[-1]), strict=True)}


LOW_COSINE = 0.5  # a claim word whose best token cosine is below this has no counterpart (fixed a priori:
# the same word in two contexts aligns at ~0.8-0.95, a synonym ~0.5, an unrelated word ~0.2-0.35)
LOW_QUANTILE = 0.25  # align_q25: the best cosine below which a quarter of the claim's IDF weight lies


def alignment_extras(claim: str, index: SentenceIndex, best: dict[str, float] | None) -> dict[str, float]:
    """The weak end of the alignment, where a partially supported claim differs from a supported one: the
    IDF-weighted lower quartile of the claim words' best cosines (``align_q25``), the IDF-weighted share of
    words below ``LOW_COSINE`` (``align_low``), and the worst best cosine among the claim's specific words,
    numbers and names (``align_specific``, 1 when it has none)."""
    if not best:
        return {"align_q25": 0.0, "align_low": 1.0 if best is not None else 0.0, "align_specific": 0.0,
                "align_worst": 0.0, "align_gaps": 0.0}
    toks = list(best)
    cos = np.array([best[t] for t in toks])
    w = np.array([index.idf(t) for t in toks])
    total = float(w.sum()) or 1.0
    order = np.argsort(cos, kind="stable")
    reach = np.cumsum(w[order]) / total
    q25 = float(cos[order][int(np.searchsorted(reach, LOW_QUANTILE))]) if len(toks) else 0.0
    specific = [best[t] for t in _specific_tokens(claim) if t in best]
    return {"align_q25": q25, "align_low": float(w[cos < LOW_COSINE].sum() / total),
            "align_specific": min(specific) if specific else 1.0, "align_worst": float(cos.min()),
            "align_gaps": math.log1p(int((cos < LOW_COSINE).sum()))}


def _empty_features(n_tok: int, n_sentences: int) -> dict[str, float]:
    return {"cov1": 0.0, "cov2": 0.0, "cov3": 0.0, "miss_frac": 1.0 if n_tok else 0.0, "miss_max": 1.0 if n_tok else 0.0,
            "clause_min": 0.0, "bigram": 0.0, "num_missing": 0.0, "mismatch": 0.0, "n_clauses": 0.0, "overclaim": 0.0,
            "specific_cov": 0.0, "log_sentences": math.log1p(n_sentences), "sem_max": 0.0, "sem_best": 0.0, "sem_union": 0.0,
            "align": 0.0, "align_min": 0.0, "align_b1": 0.0, "align_b2": 0.0, "align_b3": 0.0,
            "align_q25": 0.0, "align_low": 0.0, "align_specific": 0.0,
            "align_worst": 0.0, "align_gaps": 0.0}


def _mismatches(claim: str, evidence: list[int], index: SentenceIndex, contents: list[str],
                cands: list[int], cov: np.ndarray) -> list[Mismatch]:
    """Mismatches against the evidence; a near-equal candidate that agrees clears them."""
    text = " ".join(index.sentences[s].text for s in evidence)
    context = " ".join(contents[c] for c in sorted({index.sentences[s].chunk for s in evidence}))
    found = check(claim, text, context)
    if not found:
        return []
    top = float(cov[cands.index(evidence[0])])
    for i, sid in enumerate(cands):
        if sid in evidence or float(cov[i]) < top - 0.05:
            continue
        alt = index.sentences[sid]
        if not check(claim, alt.text, contents[alt.chunk]):
            evidence[:] = [sid]
            return []
    return found
