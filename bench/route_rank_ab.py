"""Ranking A/B on the tune split: each variant re-fuses the same score lists (abstention off).

Builds each corpus's index once, embeds the queries once (cached), then scores every variant's ranking:
recall@2 and top-1 of the top two documents, by query kind. Variants are named in ``VARIANTS``; the
first is the shipped ranking. Only the tune split is read unless ``--split heldout`` is given (run once,
at the end).

    python bench/route_rank_ab.py [--split tune] [--corpora metatool,demo,heldout] [--variants a,b]
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from route_common import BenchEmbedder, embed_cached, load_model
from route_dev import corpora

from bosun.core.routing.route import PolicyIndex, score

Ranker = Callable[[PolicyIndex, str, Any], np.ndarray]


def shipped_order(index: PolicyIndex, prompt: str, qvec: Any) -> np.ndarray:
    return score(index, prompt, qvec).order


def weights(body: float, lexical: float) -> Ranker:
    def rank(index: PolicyIndex, prompt: str, qvec: Any) -> np.ndarray:
        return score(index, prompt, qvec, body_weight=body, lexical_weight=lexical).order
    return rank


VARIANTS: dict[str, Ranker] = {
    "shipped": shipped_order,
    "lex0.5": weights(0.5, 0.5),
    "lex0.15": weights(0.5, 0.15),
    "body0.25": weights(0.25, 0.25),
    "body1": weights(1.0, 0.25),
}


def evaluate(index: PolicyIndex, queries: list[dict[str, Any]], vecs: dict[str, Any],
             rank: Ranker) -> dict[str, dict[str, float]]:
    acc: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for q in queries:
        rel = set(q["relevant"])
        if not rel:
            continue
        order = rank(index, q["query"], vecs[q["query"]])
        top = [index.policies[int(i)].name for i in order[:2]]
        a = acc[q["kind"]]
        a["n"] += 1
        a["recall2"] += len(rel & set(top)) / min(len(rel), 2)
        a["top1"] += 1.0 if top and top[0] in rel else 0.0
    out = {k: {m: (v / a["n"] if m != "n" else v) for m, v in a.items()} for k, a in acc.items()}
    n = sum(m["n"] for m in out.values())
    if n:
        out["all"] = {"n": n, **{m: sum(out[k][m] * out[k]["n"] for k in list(out)) / n for m in ("recall2", "top1")}}
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", default="tune", choices=["tune", "heldout"])
    ap.add_argument("--corpora", default="metatool,demo,heldout")
    ap.add_argument("--variants", default="")
    args = ap.parse_args()
    names = [v for v in args.variants.split(",") if v] or list(VARIANTS)
    emb = load_model()
    print("| corpus | variant | all recall@2 / top-1 | single | multi | awareness_pos |")
    print("|---|---|---|---|---|---|")
    for cname, pols, qs in corpora(args.corpora.split(","), args.split):
        index = _build(pols, emb)
        texts = list(dict.fromkeys(q["query"] for q in qs))
        vecs = dict(zip(texts, embed_cached(emb, texts), strict=True))
        for v in names:
            res = evaluate(index, qs, vecs, VARIANTS[v])
            cells = [f"{res[k]['recall2']:.3f} / {res[k]['top1']:.3f}" if k in res else ""
                     for k in ("all", "single", "multi", "awareness_pos")]
            print(f"| {cname} | {v} | " + " | ".join(cells) + " |", flush=True)
    return 0


def _build(pols: Any, emb: Any) -> PolicyIndex:
    from bosun.core.routing.route import build_index_with

    return build_index_with(pols, BenchEmbedder(emb))


if __name__ == "__main__":
    raise SystemExit(main())
