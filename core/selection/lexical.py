"""Lexical view of a candidate pool, for the hybrid selection strategy.

Dense embeddings of a small model blur names and numbers: "Shirley Temple"
and "Janet Waldo" are both "an American actress". Exact term overlap keeps
them apart, so the hybrid strategy mixes a TF-IDF cosine with the dense one.
Terms of each text are cached by content, so re-selecting over the same
candidates does not re-tokenise them.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from functools import cached_property, lru_cache
from itertools import islice
from typing import cast

import numpy as np
import numpy.typing as npt

_WORD = re.compile(r"[a-z0-9]+")

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


def terms(text: str) -> tuple[str, ...]:
    """Content terms of ``text``: lower-cased, stop words dropped, lightly stemmed."""
    return tuple(_stem(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS and len(w) > 1)


_VOCAB: dict[str, int] = {}  # process-wide term ids, so a text is encoded once
_MAX_VOCAB = 2_000_000
_EPOCH = [0]  # bumped when the vocabulary starts over


def forget_texts() -> None:
    """Drop every per-text cache and every view (the term ids start over only with the vocabulary)."""
    _encoded_raw.cache_clear()
    _IDS.clear()
    _META.clear()
    _VIEWS.clear()


def _reset_if_huge() -> None:
    """A daemon that has seen millions of distinct words starts its term ids over.

    Called only when a view starts, so the ids inside one view are consistent.
    """
    if len(_VOCAB) > _MAX_VOCAB:
        _VOCAB.clear()
        forget_texts()
        _EPOCH[0] += 1


_CACHE_CHARS = 50_000  # longer texts are encoded each time rather than pinned in the cache


def _encoded(text: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """Distinct term ids of ``text`` in first-occurrence order, and their counts (read-only arrays)."""
    if len(text) > _CACHE_CHARS:
        return _encode(text)
    ids, counts = _encoded_raw(text)
    return np.frombuffer(ids, dtype=np.int64), np.frombuffer(counts, dtype=np.float32)


def _raw_of(text: str) -> tuple[bytes, bytes]:
    """``_encoded_raw`` without pinning a long text in the cache."""
    if len(text) <= _CACHE_CHARS:
        return _encoded_raw(text)
    ids, counts = _encode(text)
    return ids.tobytes(), counts.tobytes()


@lru_cache(maxsize=32_768)
def _encoded_raw(text: str) -> tuple[bytes, bytes]:
    """The cached form: raw bytes, so a pool's encodings join with one ``bytes.join``."""
    ids, counts = _encode(text)
    return ids.tobytes(), counts.tobytes()


def _encode(text: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    ids = np.fromiter((_VOCAB.setdefault(t, len(_VOCAB)) for t in terms(text)), dtype=np.int64)
    if not len(ids):
        return ids, np.zeros(0, dtype=np.float32)
    uniq, first, counts = np.unique(ids, return_index=True, return_counts=True)
    order = np.argsort(first, kind="stable")
    out_ids, out_counts = uniq[order], counts[order].astype(np.float32)
    out_ids.flags.writeable = False
    out_counts.flags.writeable = False
    return out_ids, out_counts


_VIEWS: OrderedDict[tuple[tuple[str, ...], int], LexicalView] = OrderedDict()
_VIEW_SLOTS = 4
# the entries of the views held together (a 20,000-passage pool is ~1.2M entries, ~30 bytes each);
# a pool bigger than this on its own is rebuilt each time rather than held
_VIEW_MAX_ENTRIES = 2_500_000
# a pool of up to this many (text, head term, text) cells keeps which head terms each text holds (1 MB)
_HELD_MAX_CELLS = 1 << 18


def view_of(texts: Sequence[str], head_terms: int = 3) -> LexicalView:
    """The lexical view of ``texts``, reused when the same pool is selected from again.

    An agent re-selecting over the same candidates (a new goal, a new budget) pays for
    the view once, as it pays for the embeddings once. The key is the pool's content (the
    texts in order); the last few pools are held, within a total size.
    """
    key = (tuple(texts), head_terms)
    view = _VIEWS.get(key)
    if view is not None and not _stale(view):
        _VIEWS.move_to_end(key)
        return view
    view = LexicalView(texts, head_terms)
    if len(view.indices) <= _VIEW_MAX_ENTRIES:
        _VIEWS[key] = view
        while len(_VIEWS) > _VIEW_SLOTS or sum(len(v.indices) for v in _VIEWS.values()) > _VIEW_MAX_ENTRIES:
            _VIEWS.popitem(last=False)
    return view


def _stale(view: LexicalView) -> bool:
    """A vocabulary reset invalidates every view built before it."""
    return view.epoch != _EPOCH[0]


@lru_cache(maxsize=32_768)
def _titled(text: str) -> bool:
    """The text opens with a short heading line followed by a longer body (a title, a heading)."""
    cut = text.find("\n")
    if cut <= 0 or len(text) - cut - 1 <= cut:
        return False
    return 0 < len(text[:cut].split()) <= 12


def _title_terms(text: str) -> int:
    """How many distinct terms the heading line of a titled text holds (0 if untitled).

    Term ids are stored in first-occurrence order, so these are the first ids of the text.
    """
    return len(set(terms(text[: text.find("\n")]))) if _titled(text) else 0


def _heading_of(text: str) -> int:
    """The number of distinct terms in the heading line of a titled text; -1 for an untitled one."""
    return _title_terms(text) if _titled(text) else -1


# what a pool's view needs of each text, cached by content in two plain dicts (same keys): a view of
# n texts is then three C-level passes (two ``map(dict.get, texts)``, one ``bytes.join``), not n Python calls
_IDS: dict[str, bytes] = {}  # distinct term ids, first-occurrence order (int64 bytes)
_META: dict[str, int] = {}  # ``_meta``: the term count and ``_heading_of`` in one int
_TEXT_SLOTS = 32_768  # texts held; the oldest quarter goes when full
_LEARNING = threading.Lock()


def _meta(text: str, ids: bytes) -> int:
    """(``_heading_of`` + 1) << 32 | the number of distinct terms: both read in one pass over a pool."""
    return (_heading_of(text) + 1) << 32 | len(ids) // 8


def _learn(text: str) -> bytes:
    """Encode a text seen for the first time (held unless it is long)."""
    ids = _encode(text)[0].tobytes()
    if len(text) <= _CACHE_CHARS:
        with _LEARNING:  # readers only ``get``; writers (first sights) take turns, so eviction never races
            if len(_IDS) >= _TEXT_SLOTS:
                for old in list(islice(_IDS, _TEXT_SLOTS // 4)):
                    _IDS.pop(old, None)
                    _META.pop(old, None)
            _IDS[text] = ids
            _META[text] = _meta(text, ids)
    return ids


def _pool_terms(texts: Sequence[str]) -> tuple[bytes, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The texts' term ids joined (int64 bytes), each text's term count, and each ``_heading_of``."""
    n = len(texts)
    ids: list[bytes | None] = list(map(_IDS.get, texts))
    try:  # every text held: no Python-level loop at all (a missing one is a None, which both refuse)
        meta = np.fromiter(map(_META.get, texts), dtype=np.int64, count=n)
        joined = b"".join(cast(list[bytes], ids))
    except TypeError:  # a text seen for the first time, a long one, or one dropped from the cache meanwhile
        for i in [i for i, b in enumerate(ids) if b is None]:
            ids[i] = _learn(texts[i])
        held = cast(list[bytes], ids)
        metas = list(map(_META.get, texts))
        meta = np.array([m if m is not None else _meta(t, b) for m, t, b in zip(metas, texts, held, strict=True)],
                        dtype=np.int64).reshape(n)
        joined = b"".join(held)
    return joined, meta & 0xFFFFFFFF, (meta >> 32) - 1


class LexicalView:
    """TF-IDF vectors (sublinear tf, smoothed idf, L2 rows) of a pool of texts, as CSR arrays.

    IDF is computed over the pool itself, so a word every candidate shares
    (the topic of the pool) counts for little and a rare name for a lot.
    Building it is a handful of numpy calls over cached per-text term ids.
    """

    def __init__(self, texts: Sequence[str], head_terms: int = 3) -> None:
        _reset_if_huge()
        self.epoch = _EPOCH[0]
        n = len(texts)
        self.n = n
        # C-level loops over the texts: a 2,000-text pool is 4,000 cache hits and one byte join
        joined, lens, heading_terms = _pool_terms(texts)
        gids = np.frombuffer(joined, dtype=np.int64)
        vocab = len(_VOCAB)
        if vocab <= max(1 << 16, 16 * len(gids)):
            # the process vocabulary is small enough to index directly: no sort needed
            self.gvocab: npt.NDArray[np.int64] | None = None
            self.indices = gids
            self.v = max(1, vocab)
        else:
            self.gvocab, local = np.unique(gids, return_inverse=True)
            self.indices = local.astype(np.int64).ravel()
            self.v = max(1, len(self.gvocab))
        self.indptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        # each text's first distinct terms: what it is about
        hlen = np.minimum(lens, head_terms)
        self.head_rows = np.repeat(np.arange(n, dtype=np.int64), hlen)
        offsets = np.arange(len(self.head_rows)) - np.repeat(np.cumsum(hlen) - hlen, hlen)
        self.head_cols = self.indices[self.indptr[self.head_rows] + offsets]
        self.df = np.bincount(self.indices, minlength=self.v).astype(np.float32)
        self.idf = (np.log((1.0 + n) / (1.0 + self.df)) + 1.0).astype(np.float32)
        # the head terms again as an [head_terms, n] grid (position-major), padded with the
        # column ``v`` that no text holds: a pick's links are then a gather and a column sum
        self.head_grid = np.full((max(0, head_terms), n), self.v, dtype=np.int64)
        self.head_grid[offsets, self.head_rows] = self.head_cols
        idf_pad = np.concatenate([self.idf, np.ones(1, np.float32)])
        self.head_base = (idf_pad[self.head_grid] - 1.0).astype(np.float32)  # 0 on the padding
        self._texts = tuple(texts)  # their term counts are joined only if the TF-IDF weights are asked for
        # texts that open with a heading line (a title, then the body): there the first terms name the subject
        self.titled = heading_terms >= 0
        self._heading_terms = np.maximum(heading_terms, 0)  # read by the first ``named_by``
        self._data: npt.NDArray[np.float32] | None = None
        self._titles: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float32],
                            npt.NDArray[np.float64]] | None = None
        # per text, which head terms it holds: [head_terms, n], 1 where it holds c's r-th head term (c is
        # not itself); the same for every goal, so a small pool keeps each one a selection works out
        # (``_Lexical.join``) rather than a term mask, a gather and a reset per pick
        self.held_rows: dict[int, npt.NDArray[np.float32]] | None = (
            {} if head_terms * n * n <= _HELD_MAX_CELLS else None)

    @cached_property
    def indptr_list(self) -> list[int]:
        """``indptr`` as Python ints: a selection slices one text's terms per pick, cheaper from a list."""
        return cast(list[int], self.indptr.tolist())

    @cached_property
    def titled_weight(self) -> npt.NDArray[np.float32]:
        """0.999 for a titled text, 0 otherwise: the largest share of a titled text's overlap penalty a
        link waives (below 1, so that an unavailable candidate's +inf penalty stays +inf)."""
        return (0.999 * self.titled).astype(np.float32)

    @property
    def rows(self) -> npt.NDArray[np.int64]:
        """The text of each entry (built when asked: only the ``cosine`` weights need all of them)."""
        return np.repeat(np.arange(self.n, dtype=np.int64), np.diff(self.indptr))

    @property
    def data(self) -> npt.NDArray[np.float32]:
        """TF-IDF weights of the entries, L2-normalised per text (built on first use: the
        default "recall" signal needs only which terms each text holds)."""
        if self._data is None:
            counts = np.frombuffer(b"".join(_raw_of(t)[1] for t in self._texts), dtype=np.float32)
            vals = (1.0 + np.log(np.maximum(counts, 1.0))) * self.idf[self.indices]
            rows = self.rows
            norms = np.sqrt(np.bincount(rows, weights=vals * vals, minlength=self.n))
            norms[norms == 0] = 1.0
            self._data = (vals / norms[rows]).astype(np.float32)
        return self._data

    def query(self, text: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Columns and L2-normalised TF-IDF weights of an outside text (a goal) in this pool's vocabulary."""
        cols, counts = self._query_terms(text)
        if not len(cols):
            return cols, np.zeros(0, np.float32)
        vals = (1.0 + np.log(np.maximum(counts, 1.0))) * self.idf[cols]
        norm = float(np.sqrt((vals * vals).sum())) or 1.0
        return cols, (vals / norm).astype(np.float32)

    def query_columns(self, text: str) -> npt.NDArray[np.int64]:
        """``query``'s columns alone (the "recall" signal weighs them by IDF, not by the text's TF-IDF)."""
        return self._query_terms(text)[0]

    def _query_terms(self, text: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """The columns of an outside text's terms that the pool holds, and their counts in the text."""
        gids, counts = _encoded(text)
        if not len(gids) or not self.n or (self.gvocab is not None and not len(self.gvocab)):
            return np.zeros(0, np.int64), np.zeros(0, np.float32)  # (a pool of texts without terms: none shared)
        if self.gvocab is None:
            inside = gids < self.v
            gids, counts = gids[inside], counts[inside]
            ok = self.df[gids] > 0  # only terms the pool holds
            pos = gids
        else:
            pos = np.minimum(np.searchsorted(self.gvocab, gids), len(self.gvocab) - 1)
            ok = self.gvocab[pos] == gids
        return pos[ok].astype(np.int64, copy=False), counts[ok]

    def columns(self, cols: npt.NDArray[np.int64], binary: bool = False) -> npt.NDArray[np.float32]:
        """Dense [n, len(cols)] slice of the TF-IDF matrix (``binary``: 1 where the term occurs)."""
        # a goal has few terms: a byte-wide term -> column table keeps the gather over every entry cheap
        where: npt.NDArray[np.signedinteger] = np.full(self.v, -1, dtype=np.int8 if len(cols) < 127 else np.int64)
        where[cols] = np.arange(len(cols))
        hit = where[self.indices]
        keep = (hit >= 0).nonzero()[0]
        out = np.zeros((self.n, len(cols)), dtype=np.float32)
        rows = np.searchsorted(self.indptr, keep, side="right") - 1  # the text each kept entry is in
        out[rows, hit[keep]] = 1.0 if binary else self.data[keep]
        return out

    def similarity_to(self, text: str) -> npt.NDArray[np.float32]:
        """Cosine of every pool text to ``text``."""
        cols, vals = self.query(text)
        return self.columns(cols) @ vals

    def row_terms(self, i: int) -> npt.NDArray[np.int64]:
        """Column ids of the terms text ``i`` contains."""
        return self.indices[self.indptr[i] : self.indptr[i + 1]]

    def head_weights(self, exclude: npt.NDArray[np.int64]) -> tuple[
        npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float32]
    ]:
        """(rows, cols, weights): each text's first distinct terms (``head_terms``) minus ``exclude``.

        A document names its subject first (a title, a heading, the first
        sentence). When a selected text mentions that subject, the document is
        the next hop of a multi-hop question: the bridge entity. Weights are
        unsmoothed IDF normalised per text, so a head word every text shares
        counts for nothing.
        """
        skip = np.zeros(self.v, dtype=bool)
        skip[exclude] = True
        keep = ~skip[self.head_cols]
        rows, cols = self.head_rows[keep], self.head_cols[keep]
        w = (self.idf[cols] - 1.0).astype(np.float32)
        total = np.bincount(rows, weights=w, minlength=self.n)
        total[total == 0] = 1.0
        return rows, cols, (w / total[rows]).astype(np.float32)

    def head_grid_weights(self, exclude: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
        """``head_weights`` laid out like ``head_grid``: [head_terms, n], 0 where excluded or padded.

        The per-text totals are summed in float64 in head order, as ``head_weights``'s
        bincount does, so the weights are the same numbers.
        """
        skip = np.zeros(self.v + 1, dtype=bool)
        skip[exclude] = True
        w = self.head_base * ~skip[self.head_grid]  # the weights are >= 0: x 0 drops, x 1 keeps
        total = np.add.reduce(w, axis=0, dtype=np.float64)
        total[total == 0] = 1.0
        return (w / total).astype(np.float32)

    def named_by(self, present: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """named[c]: the IDF-weighted share of titled text c's heading terms that a text holds
        (``present``: its term mask, length v + 1); 0 for untitled texts.

        A goal that names a document's whole title ("Are Local H and For Against both ...") asks
        about that document; one that shares only part of it ("Screaming Trees discography" for
        "Screaming Trees") less so. Weights are unsmoothed IDF, as for the head terms, so a title
        word every text shares counts for nothing.
        """
        if self._titles is None:
            lens = np.minimum(self._heading_terms, np.diff(self.indptr))
            rows: npt.NDArray[np.int64] = np.repeat(np.arange(self.n, dtype=np.int64), lens)
            offsets = np.arange(len(rows)) - np.repeat(np.cumsum(lens) - lens, lens)
            cols: npt.NDArray[np.int64] = self.indices[self.indptr[rows] + offsets]
            w: npt.NDArray[np.float32] = (self.idf[cols] - 1.0).astype(np.float32)
            total: npt.NDArray[np.float64] = np.bincount(rows, weights=w, minlength=self.n).astype(np.float64)
            total[total == 0] = 1.0
            self._titles = (rows, cols, w, total)
        rows, cols, w, total = self._titles
        if not len(rows):
            return np.zeros(self.n, np.float32)
        return (np.bincount(rows, weights=w * present[cols], minlength=self.n) / total).astype(np.float32)

    def grid_links(self, weights: npt.NDArray[np.float32], present: npt.NDArray[np.float32],
                   i: int, out: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """``links_to`` from ``head_grid_weights`` into ``out`` (``present``: text ``i``'s term mask,
        length v + 1).

        At most ``head_terms`` non-negative float32 terms per text, summed in float32 in place
        (within a float32 rounding of the bincount in ``links_to``).
        """
        held = present[self.head_grid]
        np.multiply(held, weights, out=held)
        np.add.reduce(held, axis=0, out=out)
        out[i] = 0.0
        return out

    def links_to(self, head: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float32]],
                 present: npt.NDArray[np.float32], i: int) -> npt.NDArray[np.float32]:
        """links[c]: the weighted share of c's head terms found in text ``i`` (``present``: its term mask)."""
        rows, cols, w = head
        out = np.bincount(rows, weights=w * present[cols], minlength=self.n).astype(np.float32)
        out[i] = 0.0
        return out
