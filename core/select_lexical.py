"""Lexical view of a candidate pool, for the hybrid selection strategy.

Dense embeddings of a small model blur names and numbers: "Shirley Temple"
and "Janet Waldo" are both "an American actress". Exact term overlap keeps
them apart, so the hybrid strategy mixes a TF-IDF cosine with the dense one.
Terms of each text are cached by content, so re-selecting over the same
candidates does not re-tokenise them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import numpy.typing as npt
from scipy import sparse

_WORD = re.compile(r"[a-z0-9]+(?:['\-][a-z0-9]+)*")

# Function words carry no topic; a short list is enough because IDF handles the rest.
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most my
    myself no nor not now of off on once only or other our ours ourselves out over own same she should so
    some such than that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with would you your
    yours yourself yourselves also may might must shall one two many much via per""".split()  # noqa: SIM905
)


def _stem(word: str) -> str:
    """A deliberately light stemmer: plural and common verb endings only."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("ing", "ed")) and not word.endswith("eed"):
        return word[: -3 if word.endswith("ing") else -2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


@lru_cache(maxsize=65_536)
def terms(text: str) -> tuple[str, ...]:
    """Content terms of ``text``: lower-cased, stop words dropped, lightly stemmed."""
    return tuple(_stem(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS and len(w) > 1)


class LexicalView:
    """TF-IDF vectors (sublinear tf, smoothed idf, L2 rows) of a pool of texts.

    IDF is computed over the pool itself, so a word every candidate shares
    (the topic of the pool) counts for little and a rare name for a lot.
    """

    def __init__(self, texts: Sequence[str]) -> None:
        vocab: dict[str, int] = {}
        rows: list[int] = []
        cols: list[int] = []
        vals: list[float] = []
        for r, text in enumerate(texts):
            counts: dict[int, int] = {}
            for term in terms(text):
                j = vocab.setdefault(term, len(vocab))
                counts[j] = counts.get(j, 0) + 1
            rows.extend([r] * len(counts))
            cols.extend(counts)
            vals.extend(counts.values())
        self.vocab = vocab
        n = len(texts)
        tf = sparse.csr_matrix(
            (np.asarray(vals, dtype=np.float32), (np.asarray(rows, dtype=np.int32), np.asarray(cols, dtype=np.int32))),
            shape=(n, max(1, len(vocab))),
        )
        df = np.bincount(tf.indices, minlength=tf.shape[1]).astype(np.float32)
        self.idf = (np.log((1.0 + n) / (1.0 + df)) + 1.0).astype(np.float32)
        tf.data = 1.0 + np.log(tf.data)
        self.matrix = _normalise_rows(tf.multiply(self.idf[None, :]).tocsr())

    def query(self, text: str) -> sparse.csr_matrix:
        """The TF-IDF row of an outside text (a goal) in this pool's vocabulary."""
        counts: dict[int, int] = {}
        for term in terms(text):
            j = self.vocab.get(term)
            if j is not None:
                counts[j] = counts.get(j, 0) + 1
        cols = np.fromiter(counts, dtype=np.int32, count=len(counts))
        vals = 1.0 + np.log(np.fromiter(counts.values(), dtype=np.float32, count=len(counts)))
        row = sparse.csr_matrix(
            (vals * self.idf[cols], (np.zeros(len(cols), dtype=np.int32), cols)), shape=(1, self.matrix.shape[1])
        )
        return _normalise_rows(row)

    def similarity_to(self, text: str) -> npt.NDArray[np.float32]:
        """Cosine of every pool text to ``text``."""
        return np.asarray((self.matrix @ self.query(text).T).toarray()).ravel().astype(np.float32)

    def pairwise(self) -> npt.NDArray[np.float32]:
        """Cosine between every pair of pool texts, dense [n, n]."""
        return np.asarray((self.matrix @ self.matrix.T).toarray(), dtype=np.float32)


def _normalise_rows(m: sparse.csr_matrix) -> sparse.csr_matrix:
    norms = np.sqrt(np.asarray(m.multiply(m).sum(axis=1)).ravel())
    norms[norms == 0] = 1.0
    return sparse.csr_matrix(sparse.diags(1.0 / norms) @ m)
