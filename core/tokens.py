"""Token estimation without a downloadable tokenizer.

No model hub is reachable at run time, so bosun cannot load a provider's tokenizer.
It approximates one instead: the text is cut the way cl100k-style BPE tokenizers
pre-tokenize (words with their leading space, 1-3 digit groups, punctuation runs,
whitespace runs; ``pieces``), and each piece costs the mean number of tokens that
cl100k_base gives a piece of that class and length (``COSTS``, fitted by
``bench/token_fit.py`` on half of the evaluation texts; longer pieces cost
``RATE`` tokens per character). ``bench/token_estimate.py`` measures the error on
realistic agent text against cl100k_base and is quoted in the README.
"""

from __future__ import annotations

import re
from functools import lru_cache

# cl100k's split pattern, with \p{L} ~ [^\W\d_] and \p{N} ~ \d (stdlib re has no \p classes)
_SPLIT = re.compile(
    r"""'(?i:[sdmt]|ll|ve|re)|(?:[^\r\n\w]|_)?+[^\W\d_]++|\d{1,3}| ?(?:[^\s\w]|_)++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_LETTER = re.compile(r"[^\W\d_]")
_PLAIN_WORD = re.compile(r" ?[A-Z]?[a-z]+")  # prose-like: merges into whole-word tokens more often
MAX_LEN = 24  # pieces longer than this cost RATE[class] per unit

# mean cl100k tokens of a piece, by class and length 1..MAX_LEN (bench/token_fit.py; "word" = prose-like
# " Word"/"word", "wordx" = identifiers, CAPS, letters after punctuation; the tails past ~17 characters,
# where pieces are rare, are smoothed to meet RATE)
COSTS: dict[str, list[float]] = {
    "num": [1.0] * MAX_LEN,
    "punct": [1.0, 1.0, 1.06, 1.41, 1.7, 2.53, 2.79, 3.29, 2.11, 1.5, 1.5, 1.6, 1.6, 1.6, 1.6, 1.6, 1.6, 1.6, 1.6,
              1.6, 2.0, 2.0, 2.0, 2.0],
    "space": [1.0] * MAX_LEN,
    "usym": [1.0, 1.0, 1.03, 1.0, 1.0, 2.33, 2.33, 2.33, 2.33, 2.33, 2.33, 2.33, 2.33, 2.33, 2.33, 2.33, 2.33, 2.33,
             2.33, 2.33, 2.33, 2.33, 2.33, 2.33],
    "uword": [1.0, 1.0, 1.0, 1.0, 1.0, 1.88, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0,
              2.0, 2.0, 2.0, 2.0],
    "word": [1.0, 1.0, 1.01, 1.02, 1.06, 1.07, 1.12, 1.12, 1.15, 1.2, 1.2, 1.32, 1.43, 1.45, 1.82, 1.9, 2.24, 2.3,
             2.4, 2.5, 2.6, 2.8, 2.95, 3.1],
    "wordx": [1.0, 1.03, 1.41, 1.34, 1.14, 1.48, 1.39, 1.61, 1.94, 1.77, 1.69, 2.28, 2.57, 2.8, 2.68, 3.09, 2.95,
              2.95, 3.2, 3.2, 3.3, 3.3, 3.4, 3.5],
}
# tokens per unit (character, or UTF-8 byte for non-ASCII) of pieces longer than MAX_LEN
RATE: dict[str, float] = {"num": 0.3333, "punct": 0.0365, "space": 0.0357, "usym": 0.3889, "uword": 0.2857,
                          "word": 0.1318, "wordx": 0.1419}


def pieces(text: str) -> list[str]:
    """The pre-tokenized pieces of ``text`` (they concatenate back to ``text``)."""
    return _SPLIT.findall(text)


def piece_class(piece: str) -> str:
    if _LETTER.search(piece):
        if not piece.isascii():
            return "uword"
        return "word" if _PLAIN_WORD.fullmatch(piece) else "wordx"
    if piece.isspace():
        return "space"
    if piece.isdigit():
        return "num"
    return "punct" if piece.isascii() else "usym"


def units(piece: str, cls: str) -> int:
    """Length used to look a piece up: characters, or UTF-8 bytes for non-ASCII classes."""
    return len(piece.encode("utf-8")) if cls in ("uword", "usym") else len(piece)


@lru_cache(maxsize=65536)  # pieces repeat a lot (words, indentation, punctuation)
def piece_cost(piece: str) -> float:
    cls = piece_class(piece)
    n = units(piece, cls)
    if n > MAX_LEN:
        return n * RATE[cls]
    return COSTS[cls][n - 1]


_COST_OF: dict[str, float] = {}  # piece -> cost, read by a C-level map (a Python call per piece costs more)
_COST_OF_MAX = 65536


def estimate_tokens(text: str) -> int:
    """Estimated model tokens in ``text`` (never less than 1 for non-empty text)."""
    if not text:
        return 0
    found = _SPLIT.findall(text)
    try:
        total = sum(map(_COST_OF.__getitem__, found))  # same order as summing piece_cost: the same float
    except KeyError:  # new pieces: cost them (a list, so a concurrent clear cannot break the sum)
        if len(_COST_OF) > _COST_OF_MAX:
            _COST_OF.clear()
        costs: list[float] = []
        for p in found:
            c = _COST_OF.get(p)
            if c is None:
                c = _COST_OF[p] = piece_cost(p)
            costs.append(c)
        total = sum(costs)
    return max(1, round(total))
