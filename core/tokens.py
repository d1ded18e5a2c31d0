"""Token estimation without a downloadable tokenizer.

No model hub is reachable, so bosun cannot load a provider's tokenizer. It
estimates tokens from the text's shape: words, numbers, punctuation runs and
long identifiers are counted the way BPE tokenizers split them (about 4
characters of English per token, more tokens for code, digits and symbols).
The estimate's error against a real tokenizer is measured in bench/ and
stated in the README.
"""

from __future__ import annotations

import math
import re

_PIECE = re.compile(r"[A-Za-z]+|[0-9]+|\s+|[^\sA-Za-z0-9]")


def estimate_tokens(text: str) -> int:
    """Estimated model tokens in ``text`` (never less than 1 for non-empty text)."""
    if not text:
        return 0
    total = 0.0
    for piece in _PIECE.findall(text):
        first = piece[0]
        if first.isspace():
            # a single space merges into the next word; long runs (indentation) cost ~1 per 4
            if len(piece) > 1:
                total += len(piece) / 4.0
        elif first.isalpha():
            total += 1.0 if len(piece) <= 6 else math.ceil(len(piece) / 5.0)
        elif first.isdigit():
            total += math.ceil(len(piece) / 3.0)
        else:
            total += 1.0 if ord(first) < 128 else len(piece.encode("utf-8")) / 2.0
    return max(1, round(total))
