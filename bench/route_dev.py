"""Routing development harness: end-to-end quality by query kind, on a fixed tune / held-out split.

Corpora (each scored on its own index; nothing is fitted here):

* ``metatool``: the 199 MetaTool tool descriptions with the dev queries of one split
  (``route_common.split_of``, a salted hash of the query id fixed before any result was seen);
* ``mt15``: 12 random 15-tool MetaTool sub-corpora (seeded): queries for tools in the sub-corpus are
  positives, queries for other tools and awareness negatives are negatives (a small corpus facing
  off-topic requests);
* ``demo`` / ``heldout``: the repo's labelled policy corpora (written in this project: weak evidence);
* ``bookwell``: the blind dev policy corpus (bench/corpora/; the held-out blind corpus is never read here).

Metrics, end to end (abstention included): recall@2 (share of relevant documents among the hits, capped
at 2), top-1 (first hit relevant), false alarms (share of negatives with any hit); ``rank`` rows are the
same with abstention off (the top 2 of the ranking).

    python bench/route_dev.py [--split tune|heldout|all] [--corpora metatool,mt15,demo,heldout,bookwell] [--no-adapter]

The shipped prompt adapter (core/routing/adapter.py) was trained on the MetaTool tune queries: with it,
``metatool`` and ``mt15`` on the tune split are in-sample, and on the held-out split they measure new
queries for the same tools (bench/route_adapter.py measures transfer to unseen tools).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from route_common import (
    BenchEmbedder,
    embed_cached,
    load_model,
    metatool_docs,
    metatool_queries,
    policy_corpus,
    split_of,
)

from bosun.core.routing.abstain import SHIPPED
from bosun.core.routing.corpus import Policy
from bosun.core.routing.route import PolicyIndex, RouteResult, build_index_with, clause_texts, route

Query = dict[str, Any]
Corpus = tuple[str, list[Policy], list[Query]]


def corpora(names: list[str], split: str) -> list[Corpus]:
    out: list[Corpus] = []
    qs = [q for q in metatool_queries() if split == "all" or split_of(q["qid"]) == split]
    docs = metatool_docs()
    if "metatool" in names:
        out.append(("metatool", docs, qs))
    if "mt15" in names:
        rng = random.Random(15)
        negs = [q for q in qs if q["kind"] == "awareness_neg"]
        for i in range(12):
            sub = rng.sample(docs, 15)
            names_in = {d.name for d in sub}
            pos = [q for q in qs if q["kind"] in ("single", "awareness_pos") and q["relevant"][0] in names_in]
            pos = rng.sample(pos, min(40, len(pos)))
            other = [q for q in qs if q["kind"] == "single" and q["relevant"][0] not in names_in]
            sub_qs = pos + [dict(q, relevant=[], kind="out_of_corpus") for q in rng.sample(other, 20)]
            sub_qs += rng.sample(negs, min(10, len(negs)))
            out.append((f"mt15-{i}", sub, sub_qs))
    for name in ("demo", "heldout", "bookwell"):
        if name in names:
            pols, pqs = policy_corpus(name)
            out.append((name, pols, pqs))
    return out


def shipped(index: PolicyIndex, prompt: str, qvec: Any, clause_vecs: dict[str, Any] | None = None,
            **kw: Any) -> RouteResult:
    """The server's decision: the prompt and its clauses (``clause_vecs`` holds their vectors)."""
    cv = [(c, clause_vecs[c]) for c in clause_texts(prompt)] if clause_vecs is not None else []
    return route(index, prompt, qvec, SHIPPED, clause_vecs=cv, **kw)


def evaluate(index: PolicyIndex, queries: list[Query], vecs: dict[str, Any],
             decide: Callable[..., RouteResult] = shipped, **kw: Any) -> dict[str, dict[str, float]]:
    """Per kind: n, recall@2, top-1, false-alarm rate, end to end and with abstention off (rank_*)."""
    acc: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for q in queries:
        res = decide(index, q["query"], vecs[q["query"]], **kw)
        hits = [h.name for h in res.hits]
        ranked = [index.policies[i].name for i in res.order[:2]]
        rel = set(q["relevant"])
        a = acc[q["kind"]]
        a["n"] += 1
        if rel:
            a["recall2"] += len(rel & set(hits[:2])) / min(len(rel), 2)
            a["top1"] += 1.0 if hits and hits[0] in rel else 0.0
            a["rank_recall2"] += len(rel & set(ranked)) / min(len(rel), 2)
            a["rank_top1"] += 1.0 if ranked and ranked[0] in rel else 0.0
            a["abstain"] += 0.0 if hits else 1.0
        else:
            a["fa"] += 1.0 if hits else 0.0
    return {k: {m: (v / a["n"] if m != "n" else v) for m, v in a.items()} for k, a in acc.items()}


def pool(results: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Mean over corpora of per-kind metrics (each corpus weighs the same)."""
    out: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    count: dict[str, int] = defaultdict(int)
    for r in results:
        for kind, m in r.items():
            count[kind] += 1
            for k, v in m.items():
                out[kind][k] += v
    return {k: {m: v / count[k] for m, v in ms.items()} for k, ms in out.items()}


def summary(name: str, res: dict[str, dict[str, float]]) -> list[str]:
    """Rows: overall positives (single+multi+awareness_pos, weighted by n), each kind, negatives."""
    rows = []
    pos_kinds = [k for k in res if "recall2" in res[k]]
    n_pos = sum(res[k]["n"] for k in pos_kinds)
    if n_pos:
        agg = {m: sum(res[k][m] * res[k]["n"] for k in pos_kinds) / n_pos
               for m in ("recall2", "top1", "rank_recall2", "rank_top1", "abstain")}
        rows.append(f"| {name} | positives | {int(n_pos)} | {agg['recall2']:.3f} | {agg['top1']:.3f} "
                    f"| {agg['rank_recall2']:.3f} | {agg['rank_top1']:.3f} | {agg['abstain']:.3f} | |")
    for k in sorted(res):
        m = res[k]
        if "recall2" in m:
            rows.append(f"| {name} | {k} | {int(m['n'])} | {m['recall2']:.3f} | {m['top1']:.3f} "
                        f"| {m['rank_recall2']:.3f} | {m['rank_top1']:.3f} | {m['abstain']:.3f} | |")
        else:
            rows.append(f"| {name} | {k} | {int(m['n'])} | | | | | | {m.get('fa', 0.0):.3f} |")
    return rows


HEADER = ("| corpus | kind | n | recall@2 | top-1 | rank recall@2 | rank top-1 | abstained | false alarms |\n"
          "|---|---|---:|---:|---:|---:|---:|---:|---:|")


def run(names: list[str], split: str, adapter: bool = True, **kw: Any) -> list[str]:
    emb = load_model()
    lines = [HEADER]
    mt15: list[dict[str, dict[str, float]]] = []
    for name, pols, qs in corpora(names, split):
        t0 = time.perf_counter()
        index = build_index_with(pols, BenchEmbedder(emb), adapter=adapter)
        texts = list(dict.fromkeys(q["query"] for q in qs))
        seen = set(texts)
        texts += [c for c in dict.fromkeys(c for t in texts for c in clause_texts(t)) if c not in seen]
        vecs = dict(zip(texts, embed_cached(emb, texts), strict=True))
        res = evaluate(index, qs, vecs, clause_vecs=vecs, **kw)
        print(f"{name}: {len(pols)} docs, {len(qs)} queries, {time.perf_counter() - t0:.1f}s", file=sys.stderr)
        if name.startswith("mt15-"):
            mt15.append(res)
            continue
        lines += summary(name, res)
    if mt15:
        lines += summary("mt15 (mean of 12)", pool(mt15))
    return lines


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", default="tune", choices=["tune", "heldout", "all"])
    ap.add_argument("--corpora", default="metatool,mt15,demo,heldout,bookwell")
    ap.add_argument("--no-adapter", action="store_true", help="without the shipped prompt adapter (the baseline)")
    args = ap.parse_args()
    print("\n".join(run(args.corpora.split(","), args.split, adapter=not args.no_adapter)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
