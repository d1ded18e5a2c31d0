"""The judge protocol: bosun's own cross-encoder, seen by core as pairs in, scores out.

The judge reads a pair of texts together (unlike the embedder, which reads each alone), so it sees
whether a number, a name or a negation in a claim is the one in the evidence. Two uses share one
encoder: ``claim [SEP] evidence`` gives supported / refuted / not-enough-info probabilities, and
``query [SEP] document`` gives a relevance probability. Only ``bosun.server.judge_model`` runs the
ONNX file; tests inject a small scorer where the test is about logic.

``evidence_window`` is the one way a claim's evidence is cut to the judge's input length, used by
the audit at run time and by the training data builder (bench/train/), so the model is trained on
the windows it is later shown.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

LABELS = ("supported", "refuted", "nei")  # the claim head's columns, in order
WINDOW_WORDS = 110  # evidence words per window: the judge's 192-token input holds a claim and this much
SUPPORTED, REFUTED, NEI = 0, 1, 2


@runtime_checkable
class Judge(Protocol):
    """A cross-encoder over text pairs."""

    def claim_probs(self, pairs: Sequence[tuple[str, str]]) -> npt.NDArray[np.float32]:
        """[n, 3] probabilities (supported, refuted, nei) for (claim, evidence) pairs."""
        ...

    def relevance(self, pairs: Sequence[tuple[str, str]]) -> npt.NDArray[np.float32]:
        """[n] probability that the document bears on the query, for (query, document) pairs."""
        ...

    def model_id(self) -> str: ...

    def ready(self) -> bool: ...


_SENT = re.compile(r"(?<=[.!?;])\s+(?=[\"'(\[]?[A-Z0-9])|\n+")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\-.]*[A-Za-z0-9]|[A-Za-z0-9]")
_STOP = frozenset(
    ["a", "an", "the", "of", "in", "on", "at", "to", "for", "from", "by", "with", "and", "or", "but", "is", "are", "was", "were", "be", "been", "being", "it", "its", "this", "that", "these", "those", "as", "which", "who", "whom", "whose", "what", "when", "where", "how", "not", "no", "has", "have", "had", "do", "does", "did", "will", "would", "can", "could", "should", "may", "might", "than", "then", "there", "their", "they", "them", "he", "she", "his", "her", "i", "we", "you", "our", "your", "also", "into", "about", "over", "after", "before", "such", "more", "most", "other", "some", "any", "each", "all", "one"]
)


def _key(word: str) -> str:
    """A crude stem: lower case, first five letters (``released``/``release`` meet), numbers whole."""
    w = word.lower().replace(",", "")
    return w if any(c.isdigit() for c in w) else w[:5]


@lru_cache(maxsize=8192)
def content_keys(text: str) -> frozenset[str]:
    """A text's content words as crude stems (cached: an audit reads each sentence once per claim)."""
    return frozenset(_key(w) for w in _WORD.findall(text) if w.lower() not in _STOP)


def sentences(text: str) -> list[str]:
    """A passage cut into sentences (a long line without stops is cut every 60 words)."""
    out: list[str] = []
    for part in _SENT.split(text):
        words = part.split()
        for i in range(0, len(words), 60):
            piece = " ".join(words[i : i + 60])
            if piece:
                out.append(piece)
    return out


def evidence_window(claim: str, passages: Sequence[str], budget_words: int = WINDOW_WORDS,
                    prior: Sequence[float] | None = None) -> tuple[str, list[int]]:
    """The sentences of ``passages`` that share the most content with ``claim``, in their own order, up to
    ``budget_words``; also which passages they came from, the best first (so an answer can name it).

    ``prior`` (one per passage, 0..1) adds a retrieval score of the passage, e.g. its embedding similarity."""
    want = content_keys(claim)
    cands: list[tuple[float, int, int, str]] = []  # score, passage, position, sentence
    pos = 0
    for p, text in enumerate(passages):
        bonus = float(prior[p]) if prior is not None and p < len(prior) else 0.0
        for sent in sentences(text):
            keys = content_keys(sent)
            overlap = len(want & keys) / max(1, len(want))
            cands.append((overlap + 0.5 * bonus, p, pos, sent))
            pos += 1
    chosen: list[tuple[int, int, str]] = []
    used = 0
    for score, p, position, sent in sorted(cands, key=lambda c: (-c[0], c[2])):
        n = len(sent.split())
        if chosen and (used + n > budget_words or score <= 0):
            continue
        if not chosen and n > budget_words:
            sent = " ".join(sent.split()[:budget_words])
            n = budget_words
        chosen.append((position, p, sent))
        used += n
        if used >= budget_words:
            break
    best_first = list(dict.fromkeys(p for _, p, _ in chosen))
    chosen.sort()
    return " ".join(s for _, _, s in chosen), best_first
