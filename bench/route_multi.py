"""Multi-intent prompts: clause by clause routing (``core/routing/clauses.py``) against the whole prompt only.

End to end (abstention included) on the MetaTool dev split: every multi-tool query, a seeded sample of
single-tool queries (the clause pass must not cost them), awareness positives and negatives; and the
repo's policy corpora. Modes: ``off`` (whole prompt only), ``add`` (a clause's document fills an empty
second slot), ``prefer`` (it replaces the whole prompt's second hit).

    python bench/route_multi.py [--split tune] [--singles 1500] [--modes off,add,prefer] [--limit 3]
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from route_common import BenchEmbedder, embed_cached, load_model
from route_dev import HEADER, corpora, evaluate, pool, summary

from bosun.core.routing.abstain import SHIPPED
from bosun.core.routing.clauses import clauses
from bosun.core.routing.route import PolicyIndex, RouteResult, analyze, build_index_with, route


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", default="tune", choices=["tune", "heldout"])
    ap.add_argument("--corpora", default="metatool,demo,heldout")
    ap.add_argument("--singles", type=int, default=1500)
    ap.add_argument("--modes", default="off,add,prefer")
    ap.add_argument("--limit", type=int, default=3)
    ap.add_argument("--levels", default="", help="threshold,gate[,clause threshold,clause gate] quantiles of the null (default: calibrate.py's)")
    args = ap.parse_args()
    if args.levels:
        from bosun.core.routing import calibrate

        levels = [float(x) for x in args.levels.split(",")]
        calibrate.THRESHOLD_LEVEL, calibrate.GATE_LEVEL = levels[:2]
        calibrate.CLAUSE_THRESHOLD_LEVEL, calibrate.CLAUSE_GATE_LEVEL = levels[2:4] if len(levels) > 2 else levels[:2]
    emb = load_model()
    print(HEADER)
    mt15: dict[str, list[dict[str, dict[str, float]]]] = {}
    for cname, pols, qs in corpora(args.corpora.split(","), args.split):
        if cname == "metatool" and args.singles:
            singles = [q for q in qs if q["kind"] == "single"]
            qs = [q for q in qs if q["kind"] != "single"] + random.Random(7).sample(singles, args.singles)
        index = build_index_with(pols, BenchEmbedder(emb))
        split = {q["query"]: clauses(q["query"], analyze, args.limit) for q in qs}
        texts = list(dict.fromkeys([q["query"] for q in qs] + [c for cs in split.values() for c in cs]))
        vecs = dict(zip(texts, embed_cached(emb, texts), strict=True))
        for mode in args.modes.split(","):
            def decide(ix: PolicyIndex, prompt: str, qvec: Any, mode: str = mode,
                       vecs: dict[str, Any] = vecs, split: dict[str, list[str]] = split) -> RouteResult:
                cv = [(c, vecs[c]) for c in split[prompt]]
                return route(ix, prompt, qvec, SHIPPED, clause_vecs=cv, clause_mode=mode)
            res = evaluate(index, qs, vecs, decide)
            if cname.startswith("mt15-"):
                mt15.setdefault(mode, []).append(res)
            else:
                print("\n".join(summary(f"{cname} {mode}", res)), flush=True)
    for mode, results in mt15.items():
        print("\n".join(summary(f"mt15 {mode} (mean of 12)", pool(results))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
