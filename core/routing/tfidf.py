"""TF-IDF over an analyzer's terms in numpy alone: the numbers of scikit-learn's ``TfidfVectorizer``.

Routing fits three small TF-IDF models per index (surfaces, bodies, body chunks). scikit-learn's
vectorizer imports scipy.sparse and, through ``sklearn.base``, scipy.stats: about 1 s of a quiet cold
start and 5 s on a loaded machine, more than the fit itself at any corpus size bosun serves. This is
the same model (sublinear tf ``1 + ln(count)``, smooth idf ``ln((1 + n) / (1 + df)) + 1``, rows
L2-normalised, vocabulary in sorted order) kept as two compressed sparse layouts: rows for evidence
(which of a document's terms matched) and columns for scoring (a prompt has a handful of terms, so a
score reads only their postings). ``tests/test_route_tfidf.py`` checks it against scikit-learn.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class Sparse:
    """A compressed sparse matrix (CSR layout; the column view of a matrix is the CSR of its transpose)."""

    indptr: npt.NDArray[np.int64]
    indices: npt.NDArray[np.int32]
    data: npt.NDArray[np.float32]
    shape: tuple[int, int]

    def row(self, i: int) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float32]]:
        """(column indices, values) of row ``i``."""
        lo, hi = int(self.indptr[i]), int(self.indptr[i + 1])
        return self.indices[lo:hi], self.data[lo:hi]

    def dense(self) -> npt.NDArray[np.float32]:
        out = np.zeros(self.shape, np.float32)
        rows = np.repeat(np.arange(self.shape[0]), np.diff(self.indptr))
        out[rows, self.indices] = self.data
        return out


def _from_triples(rows: npt.NDArray[np.int64], cols: npt.NDArray[np.int64], vals: npt.NDArray[np.float32],
                  shape: tuple[int, int]) -> Sparse:
    order = np.lexsort((cols, rows))
    counts = np.bincount(rows, minlength=shape[0])
    indptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    return Sparse(indptr, cols[order].astype(np.int32), vals[order].astype(np.float32), shape)


@dataclass(frozen=True)
class Tfidf:
    """A fitted TF-IDF model: ``vocabulary_`` (term -> column) and ``idf_`` as scikit-learn names them."""

    vocabulary_: dict[str, int]
    idf_: npt.NDArray[np.float64]
    rows: Sparse  # [documents, terms], each row L2-normalised
    columns: Sparse  # the same matrix by term: [terms, documents]

    def weights(self, terms: Sequence[str]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """A text's in-vocabulary term columns and their normalised TF-IDF weights (empty when none)."""
        counts = Counter(c for t in terms if (c := self.vocabulary_.get(t)) is not None)
        if not counts:
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
        cols = np.fromiter(counts, dtype=np.int64, count=len(counts))
        w = (1.0 + np.log(np.fromiter(counts.values(), dtype=np.float64, count=len(counts)))) * self.idf_[cols]
        return cols, w / np.linalg.norm(w)

    def cosines(self, terms: Sequence[str]) -> npt.NDArray[np.float32]:
        """Cosine of a text (its analysed terms) with every document, read from the terms' postings only."""
        out = np.zeros(self.rows.shape[0], np.float32)
        cols, w = self.weights(terms)
        for col, weight in zip(cols.tolist(), w.tolist(), strict=True):
            lo, hi = self.columns.indptr[col], self.columns.indptr[col + 1]
            out[self.columns.indices[lo:hi]] += (self.columns.data[lo:hi] * weight).astype(np.float32)
        return out


def fit(docs: Sequence[str], analyzer: Callable[[str], list[str]]) -> Tfidf | None:
    """The TF-IDF model of ``docs`` (None when no document has a term: nothing to score lexically)."""
    counted = [Counter(analyzer(d)) for d in docs]
    vocab = {t: i for i, t in enumerate(sorted({t for c in counted for t in c}))}
    if not vocab:
        return None
    n_docs, n_terms = len(docs), len(vocab)
    rows = np.fromiter((i for i, c in enumerate(counted) for _ in c), np.int64)
    cols = np.fromiter((vocab[t] for c in counted for t in c), np.int64)
    tf = np.fromiter((k for c in counted for k in c.values()), np.float64)
    df = np.bincount(cols, minlength=n_terms).astype(np.float64)
    idf = np.log((1.0 + n_docs) / (1.0 + df)) + 1.0
    vals = (1.0 + np.log(tf)) * idf[cols]
    norms = np.sqrt(np.bincount(rows, weights=vals * vals, minlength=n_docs))
    vals = vals / np.where(norms > 0, norms, 1.0)[rows]
    vals32 = vals.astype(np.float32)
    return Tfidf(vocab, idf, _from_triples(rows, cols, vals32, (n_docs, n_terms)),
                 _from_triples(cols, rows, vals32, (n_terms, n_docs)))
