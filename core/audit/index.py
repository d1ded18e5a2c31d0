"""The sentence index of one audit call: sentences of the admitted chunks, BM25 retrieval, coverage.

Cost is kept flat in the number of chunks:
- each chunk's sentence split and tokens are cached by content digest (a chunk seen before costs
  one hash), so a repeated corpus is never re-analysed;
- the index of a chunk set (vocabulary, a sparse sentence x token matrix and a bm25s retriever)
  is cached by the digests of its chunks;
- a claim is scored against every chunk at once with bm25s (real BM25: term saturation and length
  normalisation) and against every sentence with one sparse product (IDF-weighted coverage); only
  the top few candidates get the detailed coverage features.
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from bosun.core.audit.claims import content_tokens, split_sentences

if TYPE_CHECKING:  # bm25s and scipy load on first use: the server answers `initialize` before them (issue 15)
    import bm25s

_CHUNK_CACHE_MAX = 8192
_INDEX_CACHE_MAX = 64
# IDF as if the call's sentences sat among this many more that lack the word: one call's few
# sentences give extreme weights (a word missing from 10 sentences is not that telling); chosen by
# cross-validation and cross-set transfer on the dev halves (0, 50, 200, 1000, 100000 compared)
IDF_PRIOR_DOCS = 1000


@dataclass(frozen=True)
class ChunkInfo:
    """One chunk's sentences: (start, end, text, content tokens) each."""

    sentences: tuple[tuple[int, int, str, tuple[str, ...]], ...]


@dataclass(frozen=True)
class SentenceInfo:
    chunk: int  # position among the admitted chunks
    start: int
    end: int
    text: str
    tokens: tuple[str, ...]


_CHUNK_CACHE: OrderedDict[str, ChunkInfo] = OrderedDict()
_INDEX_CACHE: OrderedDict[tuple[str, ...], SentenceIndex] = OrderedDict()


def digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def analyse_chunk(content: str, key: str | None = None) -> ChunkInfo:
    """Sentences and tokens of one chunk, cached by content digest (warm across calls)."""
    key = key or digest(content)
    hit = _CHUNK_CACHE.get(key)
    if hit is not None:
        _CHUNK_CACHE.move_to_end(key)
        return hit
    info = ChunkInfo(tuple((s.start, s.end, s.text, tuple(content_tokens(s.text))) for s in split_sentences(content)))
    _CHUNK_CACHE[key] = info
    while len(_CHUNK_CACHE) > _CHUNK_CACHE_MAX:
        _CHUNK_CACHE.popitem(last=False)
    return info


class SentenceIndex:
    """Every sentence of the admitted chunks: a token vocabulary, presence matrix, IDF and BM25."""

    def __init__(self, contents: list[str], keys: list[str] | None = None) -> None:
        keys = keys or [digest(c) for c in contents]
        self.chunks = [analyse_chunk(c, k) for c, k in zip(contents, keys, strict=True)]
        self.sentences: list[SentenceInfo] = []
        self.vocab: dict[str, int] = {}
        rows: list[list[int]] = []
        self.chunk_rows: list[list[int]] = []
        starts = [0]
        for ci, info in enumerate(self.chunks):
            chunk_row: list[int] = []
            for start, end, text, toks in info.sentences:
                self.sentences.append(SentenceInfo(ci, start, end, text, toks))
                row = [self.vocab.setdefault(t, len(self.vocab)) for t in toks]
                rows.append(row)
                chunk_row.extend(row)
            self.chunk_rows.append(chunk_row)
            starts.append(len(self.sentences))
        self.chunk_start = np.array(starts, dtype=np.int64)
        n = len(self.sentences)
        self.size = n
        self.chunk_of = np.fromiter((s.chunk for s in self.sentences), dtype=np.int32, count=n)
        lens = np.fromiter((len(r) for r in rows), dtype=np.int64, count=n)
        flat = np.fromiter((t for r in rows for t in r), dtype=np.int32, count=int(lens.sum()))
        row_of = np.repeat(np.arange(n, dtype=np.int32), lens)
        from scipy import sparse

        presence = sparse.csr_matrix((np.ones(len(flat), dtype=np.float32), (row_of, flat)),
                                     shape=(n, max(1, len(self.vocab))))
        presence.sum_duplicates()
        presence.data[:] = 1.0  # presence, not counts
        self.presence_csr = presence
        self.presence_csc = presence.tocsc()
        df = np.diff(self.presence_csc.indptr).astype(np.float64)
        n_idf = n + IDF_PRIOR_DOCS
        self.idf_known = np.log(1.0 + (n_idf - df + 0.5) / (df + 0.5))
        self.unseen_idf = math.log(1.0 + (n_idf + 0.5) / 0.5)
        self._bm25: bm25s.BM25 | None = None

    def idf(self, token: str) -> float:
        tid = self.vocab.get(token)
        return float(self.idf_known[tid]) if tid is not None else self.unseen_idf

    def bm25(self) -> bm25s.BM25:
        """The bm25s retriever over the chunks (built on first use, then kept with the index)."""
        if self._bm25 is None:
            import bm25s

            retriever = bm25s.BM25()
            rows = [r if r else [len(self.vocab)] for r in self.chunk_rows]  # an empty chunk gets a dummy token
            vocab = dict(self.vocab)
            vocab.setdefault("", len(self.vocab))
            retriever.index((rows, vocab), show_progress=False)
            self._bm25 = retriever
        return self._bm25

    def bm25_scores(self, tokens: list[str]) -> np.ndarray:
        """BM25 score of every chunk for the claim's tokens (tokens in no chunk add nothing)."""
        known = [t for t in tokens if t in self.vocab]
        if not known or not self.size:
            return np.zeros(len(self.chunks), dtype=np.float32)
        return np.asarray(self.bm25().get_scores(known), dtype=np.float32)

    def hits(self, token_ids: list[int | None], sentence_ids: np.ndarray) -> np.ndarray:
        """Boolean [len(sentence_ids), len(token_ids)]: which claim tokens each sentence contains
        (a handful of candidates: plain set look-ups beat any sparse slicing here)."""
        out = np.zeros((len(sentence_ids), len(token_ids)), dtype=bool)
        indptr, indices = self.presence_csr.indptr, self.presence_csr.indices
        for i, sid in enumerate(sentence_ids.tolist()):
            present = set(indices[indptr[sid] : indptr[sid + 1]].tolist())
            for j, tid in enumerate(token_ids):
                if tid is not None and tid in present:
                    out[i, j] = True
        return out

    def coverage_all(self, token_ids: list[int | None], weights: np.ndarray) -> np.ndarray:
        """IDF-weighted share of the claim covered by each sentence, from the token postings."""
        out = np.zeros(self.size, dtype=np.float64)
        indptr, indices = self.presence_csc.indptr, self.presence_csc.indices
        for tid, w in zip(token_ids, weights.tolist(), strict=True):
            if tid is not None:
                out[indices[indptr[tid] : indptr[tid + 1]]] += w  # a column has no repeated row
        return out


    def coverage_many(self, claims: list[tuple[list[int | None], np.ndarray]]) -> np.ndarray:
        """``coverage_all`` for several claims at once: float [sentences, claims]."""
        rows, cols, vals = [], [], []
        for k, (token_ids, weights) in enumerate(claims):
            for tid, w in zip(token_ids, weights.tolist(), strict=True):
                if tid is not None:
                    rows.append(tid)
                    cols.append(k)
                    vals.append(w)
        from scipy import sparse

        q = sparse.csr_matrix((np.array(vals, dtype=np.float64), (np.array(rows, dtype=np.int64),
                               np.array(cols, dtype=np.int64))), shape=(self.presence_csr.shape[1], len(claims)))
        return np.asarray((self.presence_csr @ q).toarray(), dtype=np.float64)


def build_index(contents: list[str]) -> SentenceIndex:
    """The index of this chunk set, cached by the chunks' digests."""
    keys = [digest(c) for c in contents]
    key = tuple(keys)
    hit = _INDEX_CACHE.get(key)
    if hit is not None:
        _INDEX_CACHE.move_to_end(key)
        return hit
    index = SentenceIndex(contents, keys)
    _INDEX_CACHE[key] = index
    while len(_INDEX_CACHE) > _INDEX_CACHE_MAX:
        _INDEX_CACHE.popitem(last=False)
    return index


def clear_caches() -> None:
    """Forget every analysed chunk and index (for cold-start benchmarks and tests)."""
    _CHUNK_CACHE.clear()
    _INDEX_CACHE.clear()
