"""Token-level soft alignment of a claim with its evidence (BERTScore-style recall).

Word overlap misses a faithful paraphrase ("enacted" ~ "passed"); a pooled sentence vector blurs an
add-on clause into the rest. Here every content word of the claim is matched to its most similar
content word among the evidence sentences, by the cosine of the embedding model's contextual token
states (the ONNX session's ``last_hidden_state``, the same run that mean-pools into the sentence
vector), and the claim's coverage is the IDF-weighted mean of those best cosines. The clause
minimum keeps an add-on clause that nothing supports visible.

Only the claims and their few candidate sentences are run through the model, once: the same run gives
their sentence vectors (``TokenStates.pooled``), which ``seed_pooled`` puts into the embedding cache, so
the semantic matcher's ``embed`` of the same texts is a lookup. Each text's word states are cached by
digest, so the cost does not grow with the chunks. This module imports no model package: it calls the
model's ``embed_states`` (server/model.py).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from bosun.core.audit.claims import content_tokens
from bosun.core.embedding import TokenStates, TokenStatesModel, text_key

CACHE_MAX = 2048  # texts whose word states are kept (float32, ~38 KB for a 25-word sentence: no conversion per call)
MAX_CHARS = 1000  # as the pooled embedding (audit.embed_text): the model reads ~256 tokens


@dataclass(frozen=True)
class WordStates:
    """A text's content words (stemmed, as the lexical matcher tokenises) and their unit vectors, and the
    text's sentence vector from the same model run (None when the text was cut to ``MAX_CHARS`` first:
    then it is not the vector ``embed`` gives for the whole text)."""

    tokens: tuple[str, ...]
    vecs: np.ndarray  # float32 [len(tokens), dim], L2-normalised
    pooled: np.ndarray | None = None
    key: str = ""  # digest of the text (the encoder's cache key); "" when unknown


StatesFn = Callable[[list[str]], list[TokenStates]]


class TokenEncoder:
    """Word states of texts from a model's ``embed_states`` (one run gives the sentence vector and the token
    states), cached by text digest."""

    def __init__(self, states: StatesFn) -> None:
        self._states = states
        self._cache: OrderedDict[str, WordStates] = OrderedDict()
        self._cache_lock = threading.Lock()
        self.runs = 0  # texts run through the model (cache misses), for benchmarks and tests

    def clear(self) -> None:
        """Forget every text's word states (benchmarks measure a cold call with it)."""
        with self._cache_lock:
            self._cache.clear()

    def encode(self, texts: Sequence[str], fresh: list[int] | None = None) -> list[WordStates]:
        """Word states of each text, from the cache or one batched model run for all the new ones (whose
        positions are appended to ``fresh``: only their sentence vectors need seeding)."""
        keys = [_digest(t[:MAX_CHARS]) for t in texts]
        out: dict[str, WordStates] = {}
        with self._cache_lock:
            for k in keys:
                hit = self._cache.get(k)
                if hit is not None:
                    self._cache.move_to_end(k)
                    out[k] = hit
        todo = {k: t for k, t in zip(keys, texts, strict=True) if k not in out}
        if todo:
            cut = [t[:MAX_CHARS] for t in todo.values()]
            runs = self._states(cut)
            self.runs += len(cut)
            with self._cache_lock:
                for k, text, full, ts in zip(todo, cut, todo.values(), runs, strict=True):
                    ws = _word_states(text, ts.encoding, ts.states, ts.pooled if text == full else None, k)
                    out[k] = ws
                    self._cache[k] = ws
                while len(self._cache) > CACHE_MAX:
                    self._cache.popitem(last=False)
        if fresh is not None and todo:
            fresh.extend(i for i, k in enumerate(keys) if k in todo)
        return [out[k] for k in keys]


class _PooledCache(Protocol):
    def get(self, key: str) -> np.ndarray | None: ...

    def put(self, key: str, vec: np.ndarray) -> None: ...


def seed_pooled(cache: _PooledCache, texts: Sequence[str], words: Sequence[WordStates]) -> int:
    """Put the sentence vectors the token-state run gave into the embedding cache (keyed by ``text_key``,
    as ``embed`` looks them up) where it has none yet, so embedding the same texts next costs a lookup,
    not a second model run. Returns how many were added."""
    added = 0
    for text, ws in zip(texts, words, strict=True):
        if ws.pooled is None:
            continue
        key = text_key(text)
        if cache.get(key) is None:
            cache.put(key, ws.pooled)
            added += 1
    return added


def one_pass_words(encoder: TokenEncoder, cache: _PooledCache) -> Callable[[Sequence[str]], list[WordStates]]:
    """``encoder.encode`` that also seeds ``cache`` (the embedding cache) with the run's sentence vectors:
    what ``audit(..., embed=cache.embed, words=...)`` needs to run the model once per new text. For
    synchronous callers (the CLI, benchmarks); the daemon seeds on its event loop (services/audit.py)."""
    def words(texts: Sequence[str]) -> list[WordStates]:
        fresh: list[int] = []
        states = encoder.encode(texts, fresh)
        if fresh:
            seed_pooled(cache, [texts[i] for i in fresh], [states[i] for i in fresh])
        return states

    return words


def _word_states(text: str, enc: Any, states: np.ndarray, pooled: np.ndarray | None, key: str = "") -> WordStates:
    """Mean of each word's word-piece states, kept for words that are content tokens."""
    groups: dict[int, list[int]] = {}
    for pos, (wid, mask) in enumerate(zip(enc.word_ids, enc.attention_mask, strict=False)):
        if wid is not None and mask:
            groups.setdefault(wid, []).append(pos)
    tokens: list[str] = []
    rows: list[np.ndarray] = []
    for positions in groups.values():
        start = enc.offsets[positions[0]][0]
        end = enc.offsets[positions[-1]][1]
        toks = content_tokens(text[start:end])
        if not toks:
            continue
        vec = states[positions].mean(axis=0)
        norm = float(np.linalg.norm(vec))
        if norm > 0:
            tokens.append(toks[0])
            rows.append(vec / norm)
    vecs = np.array(rows, dtype=np.float32) if rows else np.zeros((0, states.shape[-1]), dtype=np.float32)
    return WordStates(tuple(tokens), vecs, pooled, key)


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def soft_recall(claim: WordStates, evidence: Sequence[WordStates]) -> dict[str, float]:
    """Each claim token's best cosine against any evidence word (a token seen twice: its best)."""
    ev = [e.vecs for e in evidence if len(e.tokens)]
    if not claim.tokens:
        return {}
    if not ev:
        return dict.fromkeys(claim.tokens, 0.0)
    sims = claim.vecs.astype(np.float32, copy=False) @ np.concatenate(ev).astype(np.float32, copy=False).T
    best = sims.max(axis=1)
    out: dict[str, float] = {}
    for tok, b in zip(claim.tokens, best.tolist(), strict=True):
        out[tok] = max(out.get(tok, -1.0), float(b))
    return out


def sentence_recall(claim: WordStates, evidence: Sequence[WordStates]) -> dict[str, np.ndarray]:
    """Each claim token's best cosine against the words of each evidence sentence, in order (a token seen
    twice: its best); ``soft_recall`` is the maximum over the sentences."""
    if not claim.tokens:
        return {}
    n = len(evidence)
    if not any(len(e.tokens) for e in evidence):
        return {t: np.zeros(n, dtype=np.float32) for t in claim.tokens}
    sims = claim.vecs.astype(np.float32, copy=False) @ np.concatenate(
        [e.vecs for e in evidence if len(e.tokens)]).astype(np.float32, copy=False).T
    per = np.zeros((len(claim.tokens), n), dtype=np.float32)
    col = 0
    for j, e in enumerate(evidence):
        k = len(e.tokens)
        if k:
            per[:, j] = sims[:, col:col + k].max(axis=1)
            col += k
    out: dict[str, np.ndarray] = {}
    for tok, row in zip(claim.tokens, per, strict=True):
        prev = out.get(tok)
        out[tok] = row if prev is None else np.maximum(prev, row)
    return out


def best_of(per_sentence: dict[str, np.ndarray]) -> dict[str, float]:
    """``soft_recall`` from ``sentence_recall``: each token's best cosine over all the sentences."""
    return {t: float(v.max()) if v.size else 0.0 for t, v in per_sentence.items()}


def budget_coverage(per_sentence: dict[str, np.ndarray], weights: dict[str, float], k: int) -> float:
    """The weighted soft coverage of the claim by the ``k`` evidence sentences that cover it best (greedy).
    The best cosine over many sentences rises with their number whether or not they support the claim (a
    maximum over more unrelated words is higher); with a fixed budget of sentences the score means the same
    on a two-sentence evidence and on a page."""
    return budget_coverages(per_sentence, weights, k)[-1]


def budget_coverages(per_sentence: dict[str, np.ndarray], weights: dict[str, float], k: int) -> list[float]:
    """``budget_coverage`` for budgets 1 .. ``k`` from one greedy run (each step adds the sentence that raises
    the coverage most, so the best two contain the best one); a budget larger than the evidence repeats."""
    toks = list(per_sentence)
    w = np.array([weights.get(t, 0.0) for t in toks])
    total = float(w.sum())
    if not toks or total <= 0:
        return [0.0] * k
    m = np.clip(np.stack([per_sentence[t] for t in toks]).astype(np.float64), 0.0, None)  # [tokens, sentences]
    if m.shape[1] == 0:
        return [0.0] * k
    cur = np.zeros(len(toks))
    out: list[float] = []
    for _ in range(k):
        if len(out) < m.shape[1]:
            gain = w @ np.maximum(m, cur[:, None])
            cur = np.maximum(cur, m[:, int(np.argmax(gain))])
        out.append(float(cur @ w / total))
    return out


RECALL_CACHE_MAX = 4096  # claims whose best cosines are kept, keyed by the claim's and its candidates' digests
_recalls: OrderedDict[tuple[str, ...], dict[str, np.ndarray]] = OrderedDict()
_recalls_lock = threading.Lock()


def sentence_recall_many(claims: Sequence[WordStates], candidates: Sequence[Sequence[int]],
                         sentences: dict[int, WordStates]) -> list[dict[str, np.ndarray]]:
    """``sentence_recall`` of every claim of a call against its own candidates (the candidates that have word
    states, in order): one small product per claim (its ~15 words x its candidates' ~300 words), kept by the
    texts' digests, so auditing the same claim against the same evidence again costs a lookup. One product of
    all the claims' words with every candidate of the call did 10x the arithmetic (each claim against the
    others' candidates too) and was big enough for BLAS to start threads, which on a loaded 2-core machine
    made a warm audit 2-3x slower."""
    out: list[dict[str, np.ndarray]] = []
    todo: list[tuple[int, tuple[str, ...] | None, list[WordStates]]] = []
    with _recalls_lock:
        for claim, cands in zip(claims, candidates, strict=True):
            evidence = [sentences[s] for s in cands if s in sentences]
            key = (claim.key, *(e.key for e in evidence)) if claim.key and all(e.key for e in evidence) else None
            hit = _recalls.get(key) if key is not None else None
            if hit is not None:
                _recalls.move_to_end(key)  # type: ignore[arg-type]
            else:
                todo.append((len(out), key, evidence))
            out.append(hit if hit is not None else {})
    if todo:
        with one_blas_thread():
            fresh = [(i, key, sentence_recall(claims[i], evidence)) for i, key, evidence in todo]
        with _recalls_lock:
            for i, key, per in fresh:
                out[i] = per
                if key is not None:
                    _recalls[key] = per
            while len(_recalls) > RECALL_CACHE_MAX:
                _recalls.popitem(last=False)
    return out


_BLAS: Any = None


def one_blas_thread() -> AbstractContextManager[Any]:
    """BLAS limited to one thread for the duration: the products here are small, and a second BLAS thread
    on a busy 2-core machine waits for a core (measured: a 15 x 384 by 384 x 300 product 10.5 ms with two
    threads at load 6, 0.33 ms with one). The daemon's CLI sets OPENBLAS_NUM_THREADS=1 already; this holds
    wherever the audit runs (benchmarks, an embedding application, another entry point)."""
    global _BLAS
    if _BLAS is None:
        from threadpoolctl import ThreadpoolController  # a small module; sklearn's own dependency

        _BLAS = ThreadpoolController()
    limited: AbstractContextManager[Any] = _BLAS.limit(limits=1, user_api="blas")
    return limited


def aligned_coverage(best: dict[str, float], weights: dict[str, float],
                     clause_tokens: Sequence[Sequence[str]]) -> tuple[float, float]:
    """IDF-weighted mean of the claim's best cosines, and the same for its worst clause."""
    def mean(toks: Sequence[str]) -> float | None:
        pairs = [(weights.get(t, 0.0), best[t]) for t in dict.fromkeys(toks) if t in best]
        total = sum(w for w, _ in pairs)
        return sum(w * b for w, b in pairs) / total if total > 0 else None

    whole = mean(list(best))
    if whole is None:
        return 0.0, 0.0
    per_clause = [m for m in (mean(c) for c in clause_tokens) if m is not None]
    return whole, min(per_clause) if len(per_clause) > 1 else whole


def encoder_from_embedder(embedder: Any) -> TokenEncoder | None:
    """A TokenEncoder on the daemon's loaded model: the first object down bosun's wrapper chain
    (CachingEmbedder.inner -> FastEmbedEmbedder) whose ``has_token_states()`` is true. None for a model
    without token states (a fastembed catalogue model, a test double)."""
    obj = embedder
    for _ in range(6):
        has = getattr(obj, "has_token_states", None)
        if callable(has) and has() and isinstance(obj, TokenStatesModel):
            return TokenEncoder(obj.embed_states)
        obj = getattr(obj, "inner", None)
        if obj is None:
            return None
    return None
