"""Routing quality on MetaTool (shared/data/routing): ranking and abstention, three arms.

Arms: bosun (lexical + semantic, fused), lexical-only, semantic-only. Ranking
metrics are over the ranked list before abstention, on every query with a
relevant tool (single, multi, awareness_pos): recall@1, recall@2 (share of
relevant tools found in the top 2), MRR (first relevant). Abstention: a
query is "routed" when the arm's decision admits at least one document;
precision/recall of *abstaining* on awareness_neg (should abstain) vs
awareness_pos (should route). The lexical-only and semantic-only arms use the
same decision model with the other scorer's features zeroed, which is what
those arms would see.

    python bench/route_eval.py [--limit N]  > table (also written to bench/results/route.md by hand)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from route_common import embed_cached, load_model, metatool_docs, metatool_queries

from bosun.core.routing.abstain import SHIPPED
from bosun.core.routing.route import build_index_with, route, score

ARMS = {"bosun": {}, "lexical-only": {"use_semantic": False}, "semantic-only": {"use_lexical": False}}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=0, help="evaluate only the first N ranking queries")
    args = ap.parse_args()
    emb = load_model()
    index = build_index_with(metatool_docs(), emb)
    qs = metatool_queries()
    ranked = [q for q in qs if q["relevant"]]
    if args.limit:
        import random

        random.Random(11).shuffle(ranked)
        ranked = ranked[: args.limit]
    aware = [q for q in qs if q["kind"] in ("awareness_pos", "awareness_neg")]
    t0 = time.perf_counter()
    texts = list(dict.fromkeys([q["query"] for q in ranked + aware]))
    vecs = dict(zip(texts, embed_cached(emb, texts), strict=True))
    print(f"embedded {len(texts)} queries in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    from bosun.core.routing.abstain import separability

    print(f"separability of the MetaTool surfaces: {separability(index.surface_vectors()):.3f}")
    print(f"MetaTool dev: {len(index)} tools, {len(ranked)} ranking queries, "
          f"{sum(q['kind'] == 'awareness_pos' for q in aware)} awareness_pos, "
          f"{sum(q['kind'] == 'awareness_neg' for q in aware)} awareness_neg\n")
    print("| arm | recall@1 | recall@2 | MRR | abstain precision | abstain recall | routed awareness_pos |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for arm, kw in ARMS.items():
        r1 = r2 = mrr = 0.0
        for q in ranked:
            sc = score(index, q["query"], vecs[q["query"]], **kw)
            names = [index.policies[i].name for i in sc.order[:10].tolist()]
            rel = set(q["relevant"])
            r1 += len(rel & set(names[:1])) / min(len(rel), 1)
            r2 += len(rel & set(names[:2])) / min(len(rel), 2)
            first = next((i for i, n in enumerate(names) if n in rel), None)
            mrr += 1.0 / (first + 1) if first is not None else 0.0
        n = len(ranked)
        tp = fp = fn = 0
        routed_pos = 0
        for q in aware:
            hits = route(index, q["query"], vecs[q["query"]], SHIPPED, **kw).hits
            abstain = not hits
            if q["kind"] == "awareness_neg":
                tp += abstain
                fn += not abstain
            else:
                fp += abstain
                routed_pos += not abstain
        prec = tp / (tp + fp) if tp + fp else 0.0
        rec = tp / (tp + fn) if tp + fn else 0.0
        npos = sum(q["kind"] == "awareness_pos" for q in aware)
        print(f"| {arm} | {r1 / n:.3f} | {r2 / n:.3f} | {mrr / n:.3f} | {prec:.3f} | {rec:.3f} | {routed_pos}/{npos} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
