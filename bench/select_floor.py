"""Fit select_context's relative relevance floor on the HotpotQA tune split; check it held out and on WiCE.

The floor rejects a candidate whose starting relevance (the strategy's, before any pick) is below
``floor x`` the best candidate's in its pool, whatever budget is left. One number, fitted by one
rule: the largest floor (on a 0.05 grid) that keeps at least 99% of the supporting passages of the
HotpotQA *tune* split (``select_data.split_of``, fixed before this was run). It is then reported,
untouched, on the HotpotQA held-out split and on WiCE (supporting sentences: a different set, task
and text length), with the share of non-supporting items it removes.

    python bench/select_floor.py [--strategy hybrid]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from select_data import Case, all_texts, embed_all, hotpot_cases, split_of, wice_cases
from select_eval import pool_of

from bosun.core.selection.select import Params, _Run

KEEP = 0.99
GRID = [round(x, 2) for x in np.arange(0.0, 0.96, 0.05)]


def ratios(cases: list[Case], vecs: dict[str, np.ndarray], strategy: str, gold: str) -> tuple[np.ndarray, np.ndarray]:
    """Starting relevance / the pool's best, for supporting and for other items."""
    sup: list[float] = []
    other: list[float] = []
    for case in cases:
        pool = pool_of(case, vecs)
        rel = _Run(pool, 10**9, strategy, Params(relevance_floor=0.0)).relevance().astype(np.float64)
        best = max(float(rel.max()), 1e-9)
        keep = set(case.gold["support"]) if gold == "support" else set().union(*map(set, case.gold["sets"]))
        for i, r in enumerate(rel.tolist()):
            (sup if i in keep else other).append(r / best)
    return np.asarray(sup), np.asarray(other)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--strategy", default="hybrid")
    args = ap.parse_args()
    hp, wc = hotpot_cases(), wice_cases()
    vecs = asyncio.run(embed_all(all_texts(hp) + all_texts(wc)))
    sets = {
        "HotpotQA tune": ratios([c for c in hp if split_of(c.cid) == "tune"], vecs, args.strategy, "support"),
        "HotpotQA held-out": ratios([c for c in hp if split_of(c.cid) == "heldout"], vecs, args.strategy, "support"),
        "WiCE (all)": ratios(wc, vecs, args.strategy, "sets"),
    }
    sup, _ = sets["HotpotQA tune"]
    fitted = max(f for f in GRID if (sup >= f).mean() >= KEEP)
    print(f"strategy {args.strategy}; fitted floor (largest keeping >= {KEEP:.0%} of tune support): {fitted}\n")
    print("| set | floor | supporting kept | others removed |")
    print("|---|---:|---:|---:|")
    for name, (s, o) in sets.items():
        for f in sorted({0.3, fitted, 0.5}):
            print(f"| {name} | {f:g} | {(s >= f).mean():.3f} | {(o < f).mean():.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
