"""Rank policies for a prompt: lexical + semantic scorers over the routing surface, fused by rank.

Two scorers rank every document by its routing surface (the trigger line or
description, plus its title and name):

* lexical: TF-IDF cosine over stemmed content words (stop-words removed), so
  ``deploying`` meets ``deployment``;
* semantic: cosine between the prompt and the surface, taking the best of the
  whole surface and each of its phrases (a trigger line usually lists several
  situations; a prompt matches one of them, and the whole-line vector dilutes it).

The rankings are fused by reciprocal rank (``1 / (k + rank)``), which is
scale-free: TF-IDF and embedding cosines share no scale. Whether to route at
all is NOT decided here: ``bosun.core.routing.abstain`` decides it from the raw scores.

Evidence (``why``) is what a person can dismiss at a glance: the prompt's
content words that matched the surface, and the nearest surface phrase.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from bosun.core.embedding import Embedder, Vectors
from bosun.core.routing.abstain import SHIPPED, OperatingPoint, admissible, candidate_features, probability
from bosun.core.routing.adapter import QueryAdapter, for_index
from bosun.core.routing.background import BACKGROUND
from bosun.core.routing.calibrate import ROUTE_LEVELS, SelfCalibration, from_null, leave_one_out_z
from bosun.core.routing.clauses import clauses
from bosun.core.routing.corpus import Policy
from bosun.core.routing.stopwords import ENGLISH_STOP_WORDS
from bosun.core.routing.tfidf import Sparse, Tfidf, fit
from bosun.core.text import stem  # the project's one stemmer (measured: same MetaTool quality, see docs)

RRF_K = 60

# prompt filler that carries no topic: requests, modal verbs, pronoun-ish words
_EXTRA_STOP = {
    "please", "want", "wants", "need", "needs", "help", "make", "use", "using", "used", "like", "just", "ok",
    "okay", "let", "lets", "going", "gonna", "sure", "thing", "things", "way", "ways", "know", "tell", "think",
    "really", "good", "new", "trying", "try", "able", "also", "hey", "hi", "thanks", "thank", "im",
    "ive", "dont", "doesnt", "youre", "whats", "hows", "best", "right", "work", "working", "look", "looking",
    "doing", "did", "does", "got", "getting", "set", "lot", "bit", "stuff", "should", "would", "could",
    "can", "will", "shall", "may", "might", "must", "agent", "agents", "when", "before", "after",
}


@functools.cache
def stop_words() -> frozenset[str]:
    """scikit-learn's English stop words (a copy: routing imports no scikit-learn) plus the prompt filler."""
    return ENGLISH_STOP_WORDS | frozenset(_EXTRA_STOP)


def __getattr__(name: str) -> Any:
    """``STOP_WORDS`` stays importable as a module constant, computed on first access."""
    if name == "STOP_WORDS":
        return stop_words()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_WORD = re.compile(r"[a-z0-9][a-z0-9+#]*(?:'[a-z]+)?")
_PHRASE_SPLIT = re.compile(r"\s*(?:[;,:!?()]|\.\s|\s[-\u2013\u2014]\s)\s*")


# engineering shorthand a prompt uses and a policy spells out (lexical side only; the model knows them)
ABBREVIATIONS = {
    "prod": ("production",), "pr": ("pull", "request"), "prs": ("pull", "requests"), "db": ("database",),
    "dbs": ("databases",), "repo": ("repository",), "repos": ("repositories",), "config": ("configuration",),
    "env": ("environment",), "envs": ("environments",), "deps": ("dependencies",), "dep": ("dependency",),
    "auth": ("authentication",), "k8s": ("kubernetes",), "infra": ("infrastructure",), "perf": ("performance",),
    "creds": ("credentials",), "pwd": ("password",), "ui": ("user", "interface"), "a11y": ("accessibility",),
    "pii": ("personal", "data"), "iam": ("identity", "access"),
}


def content_words(text: str) -> list[tuple[str, str]]:
    """(original word, stem) pairs for the words that carry topic (shorthand expanded)."""
    return list(_content_words(text))


@functools.lru_cache(maxsize=4096)
def _content_words(text: str) -> tuple[tuple[str, str], ...]:
    """content_words, memoised: one route analyses the same prompt for five lists (~0.4 ms at 10,000 docs)."""
    out = []
    stop = stop_words()
    for m in _WORD.finditer(text.lower()):
        word = m.group(0).replace("'", "")
        if word in stop or len(word) < 2 or word.isdigit():
            continue
        out.append((word, stem(word)))
        for full in ABBREVIATIONS.get(word, ()):
            if full != word and full not in stop:
                out.append((word, stem(full)))
    return tuple(out)


def analyze(text: str) -> list[str]:
    """The TF-IDF analyzer: stemmed content words."""
    return [s for _, s in content_words(text)]


def humanise_name(name: str) -> str:
    """'deploy-policy' -> 'deploy policy'; CamelCase split too, an acronym kept whole ('AIAppBuilder')."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", name)
    return re.sub(r"[-_.]+", " ", spaced).strip()


def surface_phrases(policy: Policy) -> list[str]:
    """The phrases the semantic scorer compares against: whole surface, its parts, the title (else the name)."""
    phrases = [policy.surface]
    parts = [p.strip() for p in _PHRASE_SPLIT.split(policy.surface) if p and p.strip()]
    parts = [p for p in parts if len(analyze(p)) >= 2]  # one-word fragments are poor evidence
    if len(parts) > 1:
        phrases.extend(parts)
    # the document's label: its title, or (a tool list has none) its name split into words, which names
    # the tool's subject when the blurb does not ("AusSurfReport": "Get today's report for any break")
    label = policy.title or humanise_name(policy.name)
    if label and label.lower() != policy.surface.lower():
        phrases.append(label)
    seen: set[str] = set()
    unique = []
    for p in phrases:
        key = p.lower()
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique[:32]


def lexical_text(policy: Policy) -> str:
    return f"{policy.surface} {policy.title} {humanise_name(policy.name)}"


_META_LINE = re.compile(r"^\s*[-*]?\s*\*\*[A-Za-z][A-Za-z -]*:?\*\*:?")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
MAX_CHUNKS = 40


def body_chunks(policy: Policy) -> list[str]:
    """The body's paragraphs and list items (metadata, title and bare headings dropped), capped."""
    from bosun.core.routing.corpus import split_front_matter

    _, body = split_front_matter(policy.text)
    surface = " ".join(policy.surface.lower().split())
    chunks: list[str] = []
    current: list[str] = []

    def flush() -> None:
        if current:
            text = " ".join(" ".join(current).split())
            if text and len(analyze(text)) >= 2 and text.lower() not in surface:
                chunks.append(text[:400])
            current.clear()

    for line in body.split("\n"):
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or stripped.startswith("```") or _META_LINE.match(stripped):
            flush()
            continue
        if _ITEM.match(stripped):
            flush()
            stripped = _ITEM.sub("", stripped)
        current.append(stripped)
    flush()
    return list(dict.fromkeys(chunks))[:MAX_CHUNKS]


def clause_texts(prompt: str) -> list[str]:
    """The prompt's clauses to embed beside it for ``route(..., clause_vecs=...)`` ([] for one intent)."""
    return clauses(prompt, analyze)


def texts_to_embed(policies: Sequence[Policy]) -> list[str]:
    """Every text whose vector the index needs (the server embeds them through its cache)."""
    out: list[str] = []
    for p in policies:
        out.extend(surface_phrases(p))
        out.extend(body_chunks(p))
    if policies:
        out.extend(BACKGROUND)  # scored once per build: each document's background (see background.py)
    return out


@dataclass
class Rows:
    """Vectors of many short texts, each owned by one document (grouped by owner)."""

    vecs: Vectors
    text: list[str]
    owner: npt.NDArray[np.int64]
    docs: npt.NDArray[np.int64]  # docs with at least one row, ascending
    starts: npt.NDArray[np.int64]  # first row of each of those docs

    @classmethod
    def build(cls, groups: list[list[str]], vectors: dict[str, npt.NDArray[np.float32]], dim: int) -> Rows:
        text: list[str] = []
        owner: list[int] = []
        docs: list[int] = []
        starts: list[int] = []
        for i, group in enumerate(groups):
            if group:
                docs.append(i)
                starts.append(len(text))
            for t in group:
                text.append(t)
                owner.append(i)
        vecs = np.vstack([vectors[t] for t in text]).astype(np.float32) if text else np.zeros((0, dim), np.float32)
        return cls(vecs, text, np.asarray(owner, np.int64), np.asarray(docs, np.int64), np.asarray(starts, np.int64))

    def best_of(self, row_scores: npt.NDArray[np.float32], n_docs: int) -> npt.NDArray[np.float32]:
        """Per doc: the best of its rows' scores (0 for docs without rows)."""
        best = np.zeros(n_docs, np.float32)
        if row_scores.shape[0]:
            best[self.docs] = np.maximum.reduceat(row_scores, self.starts)
        return best

    def best(self, qvec: npt.NDArray[np.float32], n_docs: int,
             candidates: npt.NDArray[np.int64] | None = None) -> npt.NDArray[np.float32]:
        """Per doc: the best row cosine (0 for docs without rows).

        ``candidates`` (doc indices) restricts the product to those documents' rows: the first stage
        of a large corpus; other documents get 0.
        """
        best = np.zeros(n_docs, np.float32)
        if self.vecs.shape[0] == 0:
            return best
        q = qvec.astype(np.float32).ravel()
        if candidates is None:
            best[self.docs] = np.maximum.reduceat(self.vecs @ q, self.starts)
            return best
        pos = np.searchsorted(self.docs, candidates)
        pos = pos[(pos < len(self.docs)) & (self.docs[np.minimum(pos, len(self.docs) - 1)] == candidates)]
        if pos.size == 0:
            return best
        lo = self.starts[pos]
        hi = np.append(self.starts, len(self.text))[pos + 1]
        counts = hi - lo
        rows = np.repeat(lo - np.cumsum(np.append(0, counts[:-1])), counts) + np.arange(int(counts.sum()))
        offsets = np.append(0, np.cumsum(counts)[:-1])
        best[self.docs[pos]] = np.maximum.reduceat(self.vecs[rows] @ q, offsets)
        return best

    def nearest(self, qvec: npt.NDArray[np.float32], doc: int) -> int:
        """The row of ``doc`` closest to the prompt (-1 when the doc has none): evidence for one hit."""
        i = int(np.searchsorted(self.docs, doc))
        if i >= len(self.docs) or int(self.docs[i]) != doc:
            return -1
        lo = int(self.starts[i])
        hi = int(self.starts[i + 1]) if i + 1 < len(self.starts) else len(self.text)
        return lo + int(np.argmax(self.vecs[lo:hi] @ qvec.astype(np.float32).ravel()))


Matrix = tuple[Sparse, Sparse]  # a TF-IDF matrix by document (evidence) and by term (scoring)


def _fit_tfidf(docs: list[str]) -> tuple[Tfidf | None, Matrix | None]:
    """The fitted model and (rows for evidence, columns for scoring); (None, None) when no text has a term."""
    model = fit(docs, analyze)
    return (model, (model.rows, model.columns)) if model is not None else (None, None)


@dataclass
class PolicyIndex:
    """The warm index over one corpus: built once, scored per prompt in a few ms."""

    policies: list[Policy]
    vectorizer: Tfidf | None
    lex_matrix: Matrix | None  # the [n_docs, vocab] TF-IDF by row and by column, rows L2-normalised
    body_vectorizer: Tfidf | None
    body_matrix: Matrix | None
    phrases: Rows  # surface phrases; each doc's first row is its whole surface
    chunks: Rows  # body paragraphs and list items
    model_id: str
    # TF-IDF over single body chunks: ranks by the best-matching paragraph, whatever the body's length
    chunk_vectorizer: Tfidf | None = None
    chunk_matrix: Matrix | None = None
    # each document's semantic score over BACKGROUND prompts: mean and spread (bg_z reads them)
    bg_mean: npt.NDArray[np.float32] | None = None
    bg_sd: npt.NDArray[np.float32] | None = None
    bg_vecs: npt.NDArray[np.float32] | None = None  # the background prompts themselves [n_background, dim]
    bg_texts: list[str] = field(default_factory=list)  # the prompts of bg_vecs, in order
    calibration: SelfCalibration | None = None  # the decision fitted to this corpus (see calibrate.py)
    surface_matrix: Vectors | None = None  # [n_docs, dim] whole-surface vectors, built once (surface_vectors)
    adapter: QueryAdapter | None = None  # the map every prompt vector takes before scoring (adapter.py)
    by_name: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.by_name = {p.name: i for i, p in enumerate(self.policies)}

    def __len__(self) -> int:
        return len(self.policies)

    def surface_vectors(self) -> Vectors:
        """One vector per document: its whole routing surface (a contiguous copy made once per build)."""
        if self.surface_matrix is None:
            n = len(self)
            mat = np.zeros((n, self.phrases.vecs.shape[1]), np.float32)
            if self.phrases.vecs.shape[0]:
                mat[self.phrases.docs] = self.phrases.vecs[self.phrases.starts]
            self.surface_matrix = np.ascontiguousarray(mat)
        return self.surface_matrix


def build_index(policies: Sequence[Policy], vectors: dict[str, npt.NDArray[np.float32]], model_id: str,
                op: OperatingPoint = SHIPPED, adapter: QueryAdapter | bool = True) -> PolicyIndex:
    """Fit TF-IDF and gather vectors (``vectors`` maps each text of ``texts_to_embed``).

    ``adapter``: True uses the package's prompt adapter for ``model_id`` when ``vectors`` show it is that
    model (``adapter.for_index``); False none; an instance that one (the benches compare them).
    """
    pols = list(policies)
    dim = next(iter(vectors.values())).shape[0] if vectors else 1
    phrases = Rows.build([[t for t in surface_phrases(p) if t in vectors] for p in pols], vectors, dim)
    # a text without a vector is left out: the first build serves from surfaces while bodies embed
    raw_chunks = [body_chunks(p) for p in pols]
    chunk_groups = [[c for c in group if c in vectors] for group in raw_chunks]
    chunks = Rows.build(chunk_groups, vectors, dim)
    vectorizer, matrix = _fit_tfidf([lexical_text(p) for p in pols])
    body_vectorizer, body_matrix = _fit_tfidf([" ".join(g) for g in chunk_groups])
    chunk_vectorizer, chunk_matrix = _fit_tfidf(chunks.text)
    index = PolicyIndex(pols, vectorizer, matrix, body_vectorizer, body_matrix, phrases, chunks, model_id,
                        chunk_vectorizer, chunk_matrix)
    index.adapter = (for_index(model_id, vectors) if adapter is True
                     else adapter if isinstance(adapter, QueryAdapter) else None)
    bg_texts = [t for t in BACKGROUND if t in vectors]
    bg = [vectors[t] for t in bg_texts]
    if pols and bg:
        bg_mat = np.vstack(bg).astype(np.float32)
        if index.adapter is not None:  # background prompts are prompts: the null is measured in the same space
            bg_mat = index.adapter.apply(bg_mat)
        sims = background_scores(index, bg_mat)  # [n_background, n_docs]
        index.bg_mean = sims.mean(axis=0).astype(np.float32)
        # a floor on the spread: a document that every background prompt scores alike must not
        # turn a small lift into a huge z
        index.bg_sd = np.maximum(sims.std(axis=0), BG_SD_FLOOR).astype(np.float32)
        index.bg_vecs = bg_mat
        index.bg_texts = bg_texts
        # bodiless (a tool list): the semantic channel may admit too; decided on the texts, not on which
        # are embedded yet (a first build serves a policy corpus from its surfaces while bodies embed)
        index.calibration = self_calibrate(index, op, sims, has_body=any(raw_chunks))
    return index


def self_calibrate(index: PolicyIndex, op: OperatingPoint, sims: npt.NDArray[np.float32],
                   has_body: bool = True) -> SelfCalibration:
    """Score every background prompt as a real prompt; the null distribution sets the decision.

    ``sims`` is ``background_scores`` (computed once for the background statistics); each prompt's
    bg_z is taken against the other prompts only, so it is not measured against itself. A corpus without
    bodies (``has_body`` False) also hands over the best candidate's semantic scores: its semantic channel.
    """
    assert index.bg_vecs is not None
    z_loo = leave_one_out_z(sims, BG_SD_FLOOR)
    null_p, top = null_probabilities(index, op, sims)
    rows = np.arange(len(top))
    null_sem = None if has_body else sims[rows, top].astype(np.float64).tolist()
    return from_null(null_p.tolist(), z_loo[rows, top].tolist(), ROUTE_LEVELS, null_sem)


def _tfidf_matrix(vectorizer: Tfidf | None, texts: list[str], n: int) -> npt.NDArray[np.float32]:
    """[len(texts), n] TF-IDF cosines of many prompts (``_tfidf_scores`` for each: a prompt reads its postings)."""
    if vectorizer is None or n == 0 or not texts:
        return np.zeros((len(texts), n), np.float32)
    return np.vstack([_tfidf_scores(vectorizer, t, n) for t in texts])


def _z_rows(x: npt.NDArray[np.float32], cols: npt.NDArray[np.int64] | None = None) -> npt.NDArray[np.float64]:
    """``_z`` for every row of a [prompts, docs] matrix (``cols``: only those documents carry the list)."""
    out = np.zeros(x.shape, np.float64)
    v = x.astype(np.float64) if cols is None else x[:, cols].astype(np.float64)
    if v.shape[1] < 2:
        return out
    sd = v.std(axis=1, keepdims=True)
    zs = np.where(sd < 1e-9, 0.0, (v - v.mean(axis=1, keepdims=True)) / np.where(sd < 1e-9, 1.0, sd))
    if cols is None:
        return zs
    out[:, cols] = zs
    return out


def null_probabilities(index: PolicyIndex, op: OperatingPoint, sims: npt.NDArray[np.float32]
                       ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """Every background prompt scored as ``score`` + ``probability`` would score it, as matrix products.

    Returns each prompt's best document (``score``'s order) and that document's relevance probability.
    Only the lists the probability reads are computed (not the gate's word counts or mentions); one
    prompt at a time this was most of a small corpus's build (133 scorings, ~0.2 s).
    """
    assert index.bg_vecs is not None
    n, texts = len(index), index.bg_texts
    nb = len(texts)
    sem = sims.astype(np.float32)
    bsem = np.zeros((nb, n), np.float32)
    if index.chunks.vecs.shape[0]:
        bsem[:, index.chunks.docs] = np.maximum.reduceat(index.chunks.vecs @ index.bg_vecs.T,
                                                         index.chunks.starts, axis=0).T
    lex = _tfidf_matrix(index.vectorizer, texts, n)
    blex = _tfidf_matrix(index.body_vectorizer, texts, n)
    clex = np.zeros((nb, n), np.float32)
    if index.chunk_vectorizer is not None and index.chunks.text:
        per_chunk = _tfidf_matrix(index.chunk_vectorizer, texts, len(index.chunks.text))
        clex[:, index.chunks.docs] = np.maximum.reduceat(per_chunk, index.chunks.starts, axis=1)
    body = index.chunks.docs
    fused = (_z_rows(sem) + BODY_WEIGHT * _z_rows(bsem, body) + LEXICAL_WEIGHT * _z_rows(lex)
             + LEXICAL_WEIGHT * BODY_WEIGHT * _z_rows(clex, body))
    rows = np.arange(nb)
    top = np.argmax(fused, axis=1)
    for i in np.flatnonzero((fused == fused[rows, top][:, None]).sum(axis=1) > 1).tolist():  # ties: score's order
        top[i] = int(np.lexsort((-lex[i].astype(np.float64), -sem[i].astype(np.float64), -fused[i]))[0])
    s = sem[rows, top].astype(np.float64)
    feats: dict[str, npt.NDArray[np.float64]] = {"sem": s, "lex": lex[rows, top].astype(np.float64),
                                                 "body_sem": bsem[rows, top].astype(np.float64),
                                                 "body_lex": blex[rows, top].astype(np.float64)}
    if n >= 2:
        others = sem.copy()
        others[rows, top] = -np.inf
        feats["margin"] = s - others.max(axis=1)
    else:
        feats["margin"] = np.zeros(nb)
    mu, sd = sem.mean(axis=1).astype(np.float64), sem.std(axis=1).astype(np.float64)
    feats["z"] = np.where(sd > 1e-6, (s - mu) / np.where(sd > 1e-6, sd, 1.0), 0.0) if n >= 5 else np.zeros(nb)
    feats["agree"] = ((np.argmax(sem, axis=1) == top) & (feats["lex"] > 0)
                      & (np.argmax(lex, axis=1) == top)).astype(np.float64)
    x = op.bias + sum((w * feats[k] if k in feats else np.zeros(nb)) for k, w in op.weights.items())
    return 1.0 / (1.0 + np.exp(-np.clip(x, -50.0, 50.0))), top.astype(np.int64)


BG_SD_FLOOR = 0.03


def background_scores(index: PolicyIndex, bg: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """The surface semantic score (as ``score`` computes it) of every background prompt on every document.

    One matrix product for all prompts: at 6,000 documents (~30,000 phrases) this is tens of ms per build.
    """
    n = len(index)
    out = np.zeros((bg.shape[0], n), np.float32)
    if index.phrases.vecs.shape[0] == 0:
        return out
    sims = index.phrases.vecs @ bg.T  # [n_phrases, n_background]
    best = np.zeros((n, bg.shape[0]), np.float32)
    best[index.phrases.docs] = np.maximum.reduceat(sims, index.phrases.starts, axis=0)
    whole = sims[index.phrases.starts]  # each document's first phrase is its whole surface
    mixed = np.zeros((n, bg.shape[0]), np.float32)
    mixed[index.phrases.docs] = PHRASE_MIX * best[index.phrases.docs] + (1.0 - PHRASE_MIX) * whole
    return mixed.T.astype(np.float32)


@dataclass
class Scores:
    """Raw per-document scores for one prompt (the abstention decision reads them)."""

    lexical: npt.NDArray[np.float32]  # surface TF-IDF cosine in [0, 1]
    semantic: npt.NDArray[np.float32]  # surface cosine: mean of whole-surface and best-phrase cosines
    body_lexical: npt.NDArray[np.float32]  # whole-body TF-IDF cosine (a decision feature)
    body_semantic: npt.NDArray[np.float32]  # best body chunk cosine
    qvec: npt.NDArray[np.float32] | None  # the prompt's vector (evidence for a hit is computed on demand)
    fused: npt.NDArray[np.float64]  # reciprocal-rank fusion
    order: npt.NDArray[np.int64]  # doc indices by fused score, best first
    bg_z: npt.NDArray[np.float32] | None = None  # semantic z against each document's own background
    words: npt.NDArray[np.float32] | None = None  # most distinct prompt content stems co-occurring in one place
    bg_near: float | None = None  # the prompt's cosine to its nearest background prompt
    mention: npt.NDArray[np.bool_] | None = None  # shares words only with the prompt's quoted text
    body_words: npt.NDArray[np.float32] | None = None  # as words, but any body paragraph counts (>= 1 word)


def _tfidf_scores(vectorizer: Tfidf | None, prompt: str, n: int) -> npt.NDArray[np.float32]:
    """Cosine of the prompt's TF-IDF vector with every row (the same numbers as scikit-learn's transform and
    product, tested), reading only the postings of the prompt's few terms."""
    if vectorizer is None or n == 0:
        return np.zeros(n, np.float32)
    return vectorizer.cosines(analyze(prompt))


def lexical_scores(index: PolicyIndex, prompt: str) -> npt.NDArray[np.float32]:
    return _tfidf_scores(index.vectorizer, prompt, len(index))


def rrf(rankings: Sequence[npt.NDArray[np.float32]], k: int = RRF_K, admit: Sequence[float] = (),
        weights: Sequence[float] = ()) -> npt.NDArray[np.float64]:
    """Weighted reciprocal-rank fusion; a score <= its admit floor contributes nothing."""
    n = len(rankings[0]) if rankings else 0
    fused = np.zeros(n, np.float64)
    for j, scores in enumerate(rankings):
        floor = admit[j] if j < len(admit) else -np.inf
        weight = weights[j] if j < len(weights) else 1.0
        order = np.argsort(-scores, kind="stable")
        ranks = np.empty(n, np.int64)
        ranks[order] = np.arange(1, n + 1)
        contrib = weight / (k + ranks)
        contrib[scores <= floor] = 0.0
        fused += contrib
    return fused


# A document's best body paragraph weighs as much as its routing surface: people describe their situation,
# and the rules' own wording is often closer to it than the trigger line (round 7, bench/results/route.md:
# ranking top-1 on plainly worded policy prompts up 0.03-0.08 on three corpora; 0.5 before). Tool blurbs
# have no body, so MetaTool's scores do not move.
BODY_WEIGHT = 1.0
LEXICAL_WEIGHT = 0.25  # lexical evidence, in standard deviations, counts a quarter of semantic evidence


def _z(scores: npt.NDArray[np.float32], rows: npt.NDArray[np.int64] | None = None) -> npt.NDArray[np.float64]:
    """Scores in standard deviations over the documents (``rows``: only those carry the list; others 0)."""
    out = np.zeros(len(scores), np.float64)
    x = scores.astype(np.float64) if rows is None else scores[rows].astype(np.float64)
    if x.size < 2:
        return out
    sd = float(x.std())
    if sd < 1e-9:
        return out
    zs = (x - float(x.mean())) / sd
    if rows is None:
        return zs
    out[rows] = zs
    return out


def zfuse(lex: npt.NDArray[np.float32] | None, clex: npt.NDArray[np.float32] | None,
          sem: npt.NDArray[np.float32] | None, bsem: npt.NDArray[np.float32] | None,
          body_docs: npt.NDArray[np.int64], body_weight: float = BODY_WEIGHT,
          lexical_weight: float = LEXICAL_WEIGHT) -> npt.NDArray[np.float64]:
    """Fuse the score lists as a weighted sum of per-prompt z-scores (each list in its own deviations).

    Measured on the MetaTool dev tuning split against weighted reciprocal-rank fusion: recall@2
    0.639 -> 0.68, top-1 0.539 -> 0.575 (bench/results/route.md). Unlike ranks, z-scores keep how
    far the leader stands out, which is what decides a close call between a paraphrase and a word
    match; unlike raw cosines they share a scale. Body lists are normalised over the documents that
    have a body, and a document without one contributes nothing there.
    """
    parts = [(sem, None, 1.0), (bsem, body_docs, body_weight),
             (lex, None, lexical_weight), (clex, body_docs, lexical_weight * body_weight)]
    n = next((len(x) for x, _, _ in parts if x is not None), 0)
    fused = np.zeros(n, np.float64)
    for scores, rows, weight in parts:
        if scores is not None and weight:
            fused += weight * _z(scores, rows)
    return fused
PHRASE_MIX = 0.5  # semantic score = mix of best-phrase and whole-surface cosine


EXACT_DOCS = 2000  # past this many documents, phrases and body chunks are scored for first-stage candidates only
FIRST_STAGE = 128  # candidates per first-stage list (whole-surface cosine, surface and body TF-IDF)
ORDER_DEPTH = 32  # the ranking is sorted this deep (candidates, evidence and benches read at most 10)


def first_stage(whole: npt.NDArray[np.float32], lex: npt.NDArray[np.float32],
                clex: npt.NDArray[np.float32]) -> npt.NDArray[np.int64]:
    """Candidate documents of a large corpus: the best by whole-surface cosine and by each lexical list.

    The phrase and body-chunk products (several rows per document) are then computed for these only:
    at 10,000 documents that is ~400 documents' rows instead of ~40,000 rows.
    """
    picks = [np.argpartition(-whole, FIRST_STAGE)[:FIRST_STAGE]]
    for scores in (lex, clex):
        hit = np.flatnonzero(scores > 0)
        if hit.size > FIRST_STAGE:
            hit = hit[np.argpartition(-scores[hit], FIRST_STAGE)[:FIRST_STAGE]]
        picks.append(hit)
    return np.unique(np.concatenate(picks)).astype(np.int64)


def score(index: PolicyIndex, prompt: str, qvec: npt.NDArray[np.float32] | None, k: int = RRF_K,
          use_lexical: bool = True, use_semantic: bool = True, body_weight: float = BODY_WEIGHT,
          lexical_weight: float = LEXICAL_WEIGHT, whole: npt.NDArray[np.float32] | None = None) -> Scores:
    """Score every document; ``qvec`` None (or use_semantic False) is lexical-only.

    ``whole``: the whole-surface cosines when the caller computed them already (a prompt's clauses are
    multiplied in one product: at 10,000 documents reading the surface matrix is the largest cost).
    """
    n = len(index)
    zeros = np.zeros(n, np.float32)
    if qvec is not None and index.adapter is not None:
        qvec = index.adapter.apply(qvec)
    lex = lexical_scores(index, prompt) if use_lexical else zeros
    blex = _tfidf_scores(index.body_vectorizer, prompt, n) if use_lexical else zeros
    clex = index.chunks.best_of(
        _tfidf_scores(index.chunk_vectorizer, prompt, len(index.chunks.text)), n
    ) if use_lexical else zeros
    semantic = qvec is not None and use_semantic
    if semantic:
        assert qvec is not None
        if whole is None:
            whole = index.surface_vectors() @ qvec.astype(np.float32).ravel() if n else zeros
        cands = first_stage(whole, lex, clex) if n > EXACT_DOCS else None
        best = index.phrases.best(qvec, n, cands)
        if cands is not None:
            best = np.maximum(best, whole)  # outside the first stage a document's best phrase is its surface
        sem = (PHRASE_MIX * best + (1.0 - PHRASE_MIX) * whole).astype(np.float32)
        bsem = index.chunks.best(qvec, n, cands)
    else:
        sem, bsem = zeros, zeros
    fused = zfuse(lex if use_lexical else None, clex if use_lexical else None,
                  sem if semantic else None, bsem if semantic else None,
                  index.chunks.docs, body_weight, lexical_weight)
    top = np.argpartition(-fused, ORDER_DEPTH - 1)[:ORDER_DEPTH] if n > ORDER_DEPTH else np.arange(n)
    order = top[np.lexsort((-lex[top].astype(np.float64), -sem[top].astype(np.float64), -fused[top]))].astype(np.int64)
    bg_z = None
    if semantic and index.bg_mean is not None and index.bg_sd is not None:
        bg_z = ((sem - index.bg_mean) / index.bg_sd).astype(np.float32)
    bg_near = None
    if semantic and index.bg_vecs is not None:
        assert qvec is not None
        bg_near = float((index.bg_vecs @ qvec.astype(np.float32).ravel()).max())
    words, body_words = matched_counts_pair(index, prompt, docs=order) if use_lexical else (zeros, zeros)
    mention = mention_only(index, prompt) if use_lexical else None
    return Scores(lex, sem, blex, bsem, qvec if semantic else None, fused, order, bg_z, words, bg_near, mention,
                  body_words)


# text in quotation marks is mentioned, not used: "Translate 'rate limit' into German" asks about words,
# it does not limit any rate. An opening mark follows the start, a space or a bracket (so "it's" and
# "Sam's" are not quotes); backticks are not included: `dark_mode` is code, the subject itself.
_QUOTED = re.compile(r"""(?:(?<=^)|(?<=[\s(\[:]))(?:'([^'\n]+)'|"([^"\n]+)"|‘([^’\n]+)’|“([^”\n]+)”)(?=[\s.,;:!?)\]]|$)""")


def split_quoted(prompt: str) -> tuple[str, str]:
    """(the prompt with quoted spans blanked, the quoted spans joined).

    A quotation that carries more of the prompt's content words than the text around it is the request
    itself, pasted in quotes ('Sure, here is my question: "I am searching for a playlist of ..."'), not
    a mention of words: then nothing is treated as quoted.
    """
    quoted = [next(g for g in m.groups() if g) for m in _QUOTED.finditer(prompt)]
    if not quoted:
        return prompt, ""
    used, inside = _QUOTED.sub(" ", prompt), " ".join(quoted)
    if len(content_words(inside)) > len(content_words(used)):
        return prompt, ""
    return used, inside


# co-occurring content words needed in one body paragraph to count as corroboration: a paragraph
# mentions many things ("model" and "running" share a sentence of an ML policy), the routing surface
# is the author's statement of the situation, where two words suffice
BODY_COOCCUR = 3


def matched_counts(index: PolicyIndex, prompt: str, body_min: int = BODY_COOCCUR) -> npt.NDArray[np.float32]:
    """Per document: the most distinct content stems of the prompt found together in one place.

    A place is the routing surface (with title and name), where two words count, or one body
    paragraph, where ``body_min`` (``BODY_COOCCUR``) must. One shared word is weak evidence (every
    everyday request shares one with some policy), and a few words scattered across a three-page
    body are not much better. Words inside quotation marks are not counted (see ``split_quoted``).
    """
    return matched_counts_pair(index, prompt, body_min)[0]


def matched_counts_pair(index: PolicyIndex, prompt: str, body_min: int = BODY_COOCCUR,
                        docs: npt.NDArray[np.int64] | None = None
                        ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """(``matched_counts`` with ``body_min``, the same with any body paragraph counting) in one pass.

    ``docs``: count for these documents only (the ranked candidates the decision reads; others get 0).
    Counts are accumulated from the TF-IDF matrices' columns, so the cost follows the prompt's words'
    postings, not the corpus size (at 10,000 documents a dense documents x words table cost ~0.4 ms).
    """
    n = len(index)
    best = np.zeros(n, np.float32)
    any_body = np.zeros(n, np.float32)
    stems = sorted({st for _, st in content_words(split_quoted(prompt)[0])})
    if n == 0 or not stems:
        return best, any_body
    keep: npt.NDArray[np.bool_] | None = None
    if docs is not None:
        keep = np.zeros(n, bool)
        keep[docs] = True
    if index.vectorizer is not None:
        for st in stems:
            col = index.vectorizer.vocabulary_.get(st)
            if col is not None:
                rows = _column_rows(index.lex_matrix, col)
                best[rows if keep is None else rows[keep[rows]]] += 1.0  # a column's rows are distinct
    any_body[:] = best
    n_chunks = len(index.chunks.text)
    if index.chunk_vectorizer is not None and n_chunks:
        in_chunk = np.zeros(n_chunks, np.float32)
        for st in stems:
            col = index.chunk_vectorizer.vocabulary_.get(st)
            if col is not None:
                rows = _column_rows(index.chunk_matrix, col)
                in_chunk[rows if keep is None else rows[keep[index.chunks.owner[rows]]]] += 1.0
        hit = np.flatnonzero(in_chunk)
        owners = index.chunks.owner[hit]
        np.maximum.at(any_body, owners, in_chunk[hit])
        strong = in_chunk[hit] >= body_min
        np.maximum.at(best, owners[strong], in_chunk[hit][strong])
    return best, any_body


def mention_only(index: PolicyIndex, prompt: str) -> npt.NDArray[np.bool_]:
    """Per document: True when it shares content words with the prompt's quoted text and none with the rest.

    The embedding of such a prompt is pulled toward the quoted words, so its semantic score says
    nothing about the request itself; the corroboration gate rejects these candidates.
    """
    n = len(index)
    used, quoted = split_quoted(prompt)
    if not quoted or n == 0:
        return np.zeros(n, bool)
    return (_surface_or_body_hits(index, quoted) > 0) & (_surface_or_body_hits(index, used) == 0)


def _surface_or_body_hits(index: PolicyIndex, text: str) -> npt.NDArray[np.float32]:
    """Per document: distinct content stems of ``text`` occurring in its surface or anywhere in its body."""
    n = len(index)
    out = np.zeros(n, np.float32)
    for st in {st for _, st in content_words(text)}:
        hit = np.zeros(n, bool)
        if index.vectorizer is not None and (col := index.vectorizer.vocabulary_.get(st)) is not None:
            hit[_column_rows(index.lex_matrix, col)] = True
        if index.chunk_vectorizer is not None and (col := index.chunk_vectorizer.vocabulary_.get(st)) is not None:
            hit[index.chunks.owner[_column_rows(index.chunk_matrix, col)]] = True
        out += hit
    return out


def _column_rows(matrix: Matrix | None, col: int) -> npt.NDArray[np.int32]:
    """Rows (documents or chunks) with a nonzero in one term's column: its postings, a view, no copy."""
    if matrix is None:
        return np.zeros(0, np.int32)
    return matrix[1].indices[matrix[1].indptr[col] : matrix[1].indptr[col + 1]]


def decision_features(sc: Scores, doc: int) -> dict[str, float]:
    """The abstention model's signals for one candidate document."""
    feats = candidate_features(sc.lexical, sc.semantic, doc, sc.body_semantic, sc.body_lexical, sc.bg_z, sc.words,
                               sc.bg_near)
    feats["mention"] = 1.0 if sc.mention is not None and bool(sc.mention[doc]) else 0.0
    # two words together in one body paragraph only: weaker than the surface, see admissible()
    feats["pair"] = 1.0 if sc.body_words is not None and float(sc.body_words[doc]) >= 2 else 0.0
    return feats


def matched_words(index: PolicyIndex, doc: int, prompt: str, limit: int = 6) -> list[str]:
    """The prompt's content words whose stems occur in the document's surface, most specific first."""
    if index.vectorizer is None:
        return []
    vocab = index.vectorizer.vocabulary_
    assert index.lex_matrix is not None
    indices, data = index.lex_matrix[0].row(doc)
    present = dict(zip(indices.tolist(), data.tolist(), strict=True))
    found: dict[str, float] = {}
    for word, st in content_words(prompt):
        col = vocab.get(st)
        if col is not None and col in present and word not in found:
            found[word] = present[col]
    return [w for w, _ in sorted(found.items(), key=lambda kv: -kv[1])][:limit]


def nearest_phrase(index: PolicyIndex, scores: Scores, doc: int) -> str:
    if scores.qvec is None:
        return ""
    row = index.phrases.nearest(scores.qvec, doc)
    return index.phrases.text[row] if row >= 0 else ""


@dataclass
class Hit:
    """One routed document: a surface name and dismissible evidence, never rule text."""

    name: str
    score: float  # relevance probability from the abstention model, [0, 1]
    why: list[str]
    lexical: float
    semantic: float
    requires: tuple[str, ...] = ()  # Depends-on / Requires: documents to read with this one

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"name": self.name, "score": round(self.score, 3), "why": self.why}
        if self.requires:
            out["requires"] = list(self.requires)
        return out


@dataclass
class RouteResult:
    hits: list[Hit]
    abstained: bool
    best_rejected: float  # highest probability among candidates not routed (0 when none)
    order: list[int] = field(default_factory=list)  # the ranking (document indices, best first), top 10


CLAUSE_MODE = "any"  # add: clause documents fill free slots once the whole prompt routed; any: also when it did not; off


def route(index: PolicyIndex, prompt: str, qvec: npt.NDArray[np.float32] | None, op: OperatingPoint,
          top_k: int | None = None, use_lexical: bool = True, use_semantic: bool = True,
          threshold: float | None = None, solo_bg_z: float | None = None,
          calibrated: bool = True, clause_vecs: Sequence[tuple[str, npt.NDArray[np.float32]]] = (),
          clause_mode: str = CLAUSE_MODE, calibration: SelfCalibration | None = None) -> RouteResult:
    """Rank, then admit the fused-order candidates the relevance decision accepts (at most top_k).

    ``calibrated`` (the default): the threshold and the one-word gate come from the index's
    self-calibration (``calibrate.py``) unless given here; False uses the operating point's own
    (an explicit TOML point calibrated with labels).

    ``clause_vecs``: the prompt's clauses (``clause_texts``) with their vectors. Each clause is scored as
    a prompt of its own; its best document fills a free slot when the same decision admits it
    (``_clause_hits``): a two-intent prompt gets a document per intent. When the whole prompt abstained
    the clause faces the self-calibration's stricter clause bar (each clause is one more test against the
    null); once the prompt routed a document, the prompt's own first-document bar (a false alarm is
    already decided by then, only the second slot is at stake).

    ``calibration``: the same index's null read at other levels (``SelfCalibration.at``; the Tool Compass).
    """
    k = op.top_k if top_k is None else top_k
    cal = (calibration or index.calibration) if calibrated else None
    thr = threshold if threshold is not None else (cal.threshold if cal else op.threshold)
    next_thr = threshold if threshold is not None else (cal.next_threshold if cal else thr)
    explicit_gate = solo_bg_z
    if solo_bg_z is None and cal is not None:
        solo_bg_z = cal.solo_bg_z
    if len(index) == 0 or k <= 0:
        return RouteResult([], True, 0.0)
    gap = cal.levels.everyday_gap if cal is not None else True
    # the semantic channel (a bodiless corpus, calibrate.py): a first document whose cosine clears its bar passes
    # the probability bar too (a second one faces the probability alone); an explicit threshold is a
    # probability and turns it off
    sem_bar = cal.semantic_threshold if cal is not None and threshold is None else None
    sc = score(index, prompt, qvec, op.rrf_k, use_lexical, use_semantic)
    hits: list[Hit] = []
    rejected = 0.0
    for doc in sc.order[: k + 1].tolist():
        feats = decision_features(sc, doc)
        p = probability(op, feats)
        bar = _bar(p, feats, next_thr, None) if hits else _bar(p, feats, thr, sem_bar)
        if not admissible(op, feats, p, bar, solo_bg_z, gap) or len(hits) >= k:
            rejected = max(rejected, p)
            continue
        hits.append(_hit(index, sc, doc, prompt, p, use_semantic))
    if clause_vecs and clause_mode != "off" and (hits or clause_mode == "any") and len(hits) < k:
        taken = {h.name for h in hits}
        cthr = threshold if threshold is not None else (
            cal.clause_threshold if cal is not None and cal.clause_threshold is not None else thr)
        cgate = (cal.clause_solo_bg_z if explicit_gate is None and cal is not None
                 and cal.clause_solo_bg_z is not None else solo_bg_z)
        csem = cal.semantic_clause if cal is not None and threshold is None else None
        if hits:
            # the prompt already routed, so a clause can no longer turn an abstention into a false alarm:
            # only the free slot is at stake, and its document faces the prompt's own first-document bar
            cthr, cgate = min(cthr, thr), solo_bg_z
            csem = sem_bar if csem is None or sem_bar is None else min(csem, sem_bar)
        for extra in _clause_hits(index, op, clause_vecs, taken, cthr, cgate, use_lexical, use_semantic, gap, csem):
            if len(hits) < k and extra.name not in taken:
                hits.append(extra)
                taken.add(extra.name)
    return RouteResult(hits, not hits, rejected, sc.order[:10].tolist())


def _clause_hits(index: PolicyIndex, op: OperatingPoint, clause_vecs: Sequence[tuple[str, npt.NDArray[np.float32]]],
                 taken: set[str], thr: float, solo_bg_z: float | None, use_lexical: bool,
                 use_semantic: bool, gap: bool = True, sem_bar: float | None = None) -> list[Hit]:
    """Each clause's best document not yet routed, when the decision admits it as a first hit; best first.

    Each clause is judged exactly as a prompt of its own (same features, same calibrated bar for a
    first document), so a clause that reads as an everyday request adds nothing.
    """
    found: dict[str, Hit] = {}
    wholes: npt.NDArray[np.float32] | None = None
    if use_semantic and len(index) and clause_vecs:  # every clause's whole-surface cosines in one product
        mat = np.vstack([v for _, v in clause_vecs]).astype(np.float32)
        if index.adapter is not None:  # score() adapts each clause's own vector the same way
            mat = index.adapter.apply(mat)
        wholes = index.surface_vectors() @ mat.T
    for j, (text, vec) in enumerate(clause_vecs):
        sc = score(index, text, vec, op.rrf_k, use_lexical, use_semantic,
                   whole=None if wholes is None else np.ascontiguousarray(wholes[:, j]))
        doc = int(sc.order[0])
        name = index.policies[doc].name
        if name in taken:
            continue
        feats = decision_features(sc, doc)
        p = probability(op, feats)
        if (admissible(op, feats, p, _bar(p, feats, thr, sem_bar), solo_bg_z, gap)
                and (name not in found or p > found[name].score)):
            found[name] = _hit(index, sc, doc, text, p, use_semantic)
    return sorted(found.values(), key=lambda h: -h.score)


def _bar(p: float, feats: dict[str, float], bar: float, sem_bar: float | None) -> float:
    """The probability bar a candidate faces: passed outright when its semantic score clears ``sem_bar``."""
    return min(bar, p) if sem_bar is not None and feats["sem"] >= sem_bar else bar


def _hit(index: PolicyIndex, sc: Scores, doc: int, prompt: str, p: float, use_semantic: bool) -> Hit:
    """A routed document with its evidence (matched words, nearest surface phrase) and what it requires."""
    why = [f"matched: {', '.join(w)}" for w in [matched_words(index, doc, prompt)] if w]
    phrase = nearest_phrase(index, sc, doc)
    if phrase and use_semantic and sc.qvec is not None:
        why.append(f"nearest: \"{phrase}\" ({float(sc.semantic[doc]):.2f})")
    pol = index.policies[doc]
    needs = tuple(dict.fromkeys(n for n in (*pol.depends_on, *pol.requires) if n in index.by_name))
    return Hit(pol.name, p, why, float(sc.lexical[doc]), float(sc.semantic[doc]), needs)


def build_index_with(policies: Sequence[Policy], embedder: Embedder,
                     adapter: QueryAdapter | bool = True) -> PolicyIndex:
    """Synchronous build for the eval CLI and benches: embed every surface phrase, then index."""
    texts = list(dict.fromkeys(texts_to_embed(policies)))
    vecs = embedder.embed(texts) if texts else np.zeros((0, embedder.dimension()), np.float32)
    return build_index(policies, dict(zip(texts, vecs, strict=True)), embedder.model_id(), adapter=adapter)
