"""Regression check for select_context: a digest of every selection on the evaluation sets.

    /work/venv/bin/python bench/select_regress.py [--out selections.txt]

Runs every strategy over HotpotQA, WiCE, psi-loop's fixture, HotpotQA with two passages
given as context, and pools of 200 and 2,000 passages, at five budgets (0, the smallest
candidate, a fifth, half, everything) and several parameter settings (lambda, max_items,
min_relevance, the cosine lexical signal, no multi-hop, no coverage, lower thresholds).
Each selection is written in full (picks in order, every float at full precision, the
forensic view) and hashed. A change meant to be a pure speed-up must leave the digest
unchanged on the same machine (BLAS kernels may differ across machines).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import asyncio
import hashlib
import sys
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from select_data import (
    Case,
    all_texts,
    cached_vectors,
    covered,
    embed_all,
    hotpot_cases,
    psiloop_tasks,
    wice_cases,
)
from select_eval import pool_of

from bosun.core.selection import lexical as select_lexical
from bosun.core.selection.select import STRATEGIES, Params, Selection, select

PARAMS = [Params(), Params(mmr_lambda=0.5), Params(max_items=3), Params(min_relevance=0.3),
          Params(lexical="cosine"), Params(hop_weight=0.0), Params(coverage=0.0),
          Params(overlap_threshold=0.4, redundancy_threshold=0.8)]
HYBRID_ONLY = 4  # PARAMS from this index on only change the hybrid


def cases() -> list[Case]:
    hp, wc = hotpot_cases(), wice_cases()
    tasks = psiloop_tasks()
    fixture = [Case(t["id"], t["goal"], [c["text"] for c in t["candidates"]], list(t["current_context"]),
                    ids=[c["id"] for c in t["candidates"]]) for t in tasks]
    with_ctx = [Case(c.cid + "c", c.goal, c.candidates[2:], c.candidates[:2], ids=c.ids[2:]) for c in hp[:60]]
    passages = [t for c in hp for t in c.candidates][:2000]
    big = [Case(f"big{n}", hp[0].goal, passages[:n], ids=[str(i) for i in range(n)]) for n in (200, 2000)]
    return hp + wc + fixture + with_ctx + big


def written(sel: Selection) -> dict[str, object]:
    """Everything a selection answers, rejections read (``asdict`` would print the deferred-explain
    closure's memory address, which differs on every run)."""
    return {"strategy": sel.strategy, "budget": sel.budget_tokens, "selected": [asdict(p) for p in sel.selected],
            "rejected": [asdict(r) for r in sel.rejected], "counts": sel.rejected_counts, "note": sel.note}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, help="also write every selection to this file (large)")
    ap.add_argument("--cached-only", action="store_true",
                    help="only the cases whose texts already have vectors (nothing embedded: for a loaded machine)")
    args = ap.parse_args()
    todo = cases()
    if args.cached_only:
        vecs = cached_vectors(all_texts(todo), [Path("~/.cache/bosun-bench/select-vecs.npz").expanduser()])
        todo = covered(todo, vecs)
    else:
        vecs = asyncio.run(embed_all(all_texts(todo)))
    digest = hashlib.sha256()
    out = args.out.open("w") if args.out else None
    t0 = time.perf_counter()
    count = 0
    for ci, case in enumerate(todo):
        pool = pool_of(case, vecs)
        total = sum(pool.tokens)
        budgets = [0, min(pool.tokens), total // 5, total // 2, 10**9]
        settings = PARAMS if ci % 3 == 0 or case.cid.startswith("big") else PARAMS[:2]
        for pi, params in enumerate(settings):
            for strategy in STRATEGIES:
                if strategy != "hybrid" and pi >= HYBRID_ONLY:
                    continue
                for budget in budgets:
                    sel = select(pool, budget, strategy, params, explain=10)
                    line = f"{case.cid}|{pi}|{strategy}|{budget}|{written(sel)!r}\n"
                    digest.update(line.encode())
                    count += 1
                    if out:
                        out.write(line)
        if ci % 7 == 0:
            select_lexical._VIEWS.clear()  # new pools too, not only pools seen before
    if out:
        out.close()
    print(f"{digest.hexdigest()}  {count} selections ({len(todo)} cases) in {time.perf_counter() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
