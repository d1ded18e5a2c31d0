"""Fit select_context's relative relevance floor on the HotpotQA tune split; check it held out and on WiCE.

The floor rejects a candidate whose starting relevance (the strategy's, before any pick) is below
``floor x`` the best candidate's in its pool, whatever budget is left. One number, fitted by one
rule: the largest floor (on a 0.05 grid) that keeps at least 99% of the supporting passages of the
HotpotQA *tune* split (``select_data.split_of``, fixed before this was run). It is then reported,
untouched, on the HotpotQA held-out split and on WiCE (supporting sentences: a different set, task
and text length), with the share of non-supporting items it removes.

    python bench/select_floor.py [--strategy hybrid] [--cached-only [--extra-vectors FILE.npz]]

``--cached-only`` embeds nothing: it scores the cases whose texts already have vectors (the bench
store, plus an ``--extra-vectors`` file verified against it), for a machine too loaded to embed
WiCE's ~38k sentences. The report then says how many cases that was.

It also reports, for the fitted floor and for no floor, HotpotQA both-found at 1x budget and WiCE
set coverage at 1x / 2x (``select_eval``'s metrics) on each split, so the floor's effect on the
selection itself is visible.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from select_data import (
    Case,
    all_texts,
    cached_vectors,
    covered,
    embed_all,
    hotpot_cases,
    split_of,
    wice_cases,
)
from select_eval import pool_of, run_hotpot, run_wice

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
    ap.add_argument("--cached-only", action="store_true", help="embed nothing; score the cases already embedded")
    ap.add_argument("--extra-vectors", type=Path, action="append", default=[], help="npz {keys, vecs} by sha256")
    args = ap.parse_args()
    hp, wc = hotpot_cases(), wice_cases()
    if args.cached_only:
        vecs = cached_vectors(all_texts(hp) + all_texts(wc), args.extra_vectors)
        n_hp, n_wc = len(hp), len(wc)
        hp, wc = covered(hp, vecs), covered(wc, vecs)
        print(f"cached only: {len(hp)} of {n_hp} HotpotQA questions, {len(wc)} of {n_wc} WiCE claims\n")
    else:
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
    print("\n| set | n | floor | HotpotQA both found 1x | WiCE cover 1x | WiCE cover 2x |")
    print("|---|---:|---:|---:|---:|---:|")
    parts = [("HotpotQA tune", [c for c in hp if split_of(c.cid) == "tune"], []),
             ("HotpotQA held-out", [c for c in hp if split_of(c.cid) == "heldout"], []), ("WiCE", [], wc)]
    for name, h, w in parts:
        for f in (0.0, fitted):
            params = Params(relevance_floor=f)
            both = f"{run_hotpot(h, vecs, args.strategy, params, 1.0).mean('both'):.3f}" if h else ""
            c1 = f"{run_wice(w, vecs, args.strategy, params, 1.0).mean('cover'):.3f}" if w else ""
            c2 = f"{run_wice(w, vecs, args.strategy, params, 2.0).mean('cover'):.3f}" if w else ""
            print(f"| {name} | {len(h) or len(w)} | {f:g} | {both} | {c1} | {c2} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
