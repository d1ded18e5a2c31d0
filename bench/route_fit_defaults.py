"""Fit the shipped abstention weights (bosun.core.abstain.SHIPPED) and show how they transfer.

Pools candidate features from two labelled sources with different shapes:
MetaTool dev (199 tool descriptions, LLM-written queries, awareness negatives)
and bosun's demo policies (17 documents with bodies, 81 prompts). Fits a
class-balanced logistic regression on the pool, then reports, for each source
and for a leave-one-source-out fit, the routing metrics at a few thresholds,
so the shipped point is chosen by a stated rule: the lowest threshold whose
false-alarm rate on the demo negatives is zero and on MetaTool awareness
negatives is at most 10%.

    python bench/route_fit_defaults.py            # prints the fit and the tables
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression

sys.path.insert(0, str(Path(__file__).resolve().parent))
from route_common import REPO, embed_cached, load_model, metatool_docs, metatool_queries

from bosun.core.abstain import FEATURES, SHIPPED, OperatingPoint, candidate_features
from bosun.core.route import build_index_with, route, score
from bosun.core.route_metrics import Labelled, compute, parse_labelled
from bosun.server.policies import demo_corpus_dir, scan_corpus

CANDIDATES = 3


def datasets(emb):  # type: ignore[no-untyped-def]
    rnd = random.Random(7)
    qs = metatool_queries()
    singles = [q for q in qs if q["kind"] == "single"]
    rnd.shuffle(singles)
    chosen = singles[:600] + [q for q in qs if q["kind"] != "single"]
    mt_rows = [Labelled(q["query"], tuple(q["relevant"])) for q in chosen]
    mt_index = build_index_with(metatool_docs(), emb)
    demo_index = build_index_with(scan_corpus([demo_corpus_dir()]).policies, emb)
    demo_rows = parse_labelled((REPO / "examples" / "policies-labelled.jsonl").read_text().splitlines())
    out = {"metatool": (mt_index, mt_rows), "demo": (demo_index, demo_rows)}
    # small corpora like a team's policy set: 15 random tools; queries for other tools are negatives
    docs = metatool_docs()
    by_tool: dict[str, list[str]] = {}
    for q in qs:
        if q["kind"] == "single":
            by_tool.setdefault(q["relevant"][0], []).append(q["query"])
    negs = [q["query"] for q in qs if q["kind"] == "awareness_neg"]
    sub_rows_all = []
    sub_sets = []
    for _ in range(12):
        pick = rnd.sample(docs, 15)
        names = {p.name for p in pick}
        rows = []
        for p in pick:
            rows += [Labelled(t, (p.name,)) for t in rnd.sample(by_tool.get(p.name, []), min(3, len(by_tool.get(p.name, []))))]
        others = [t for n, ts in by_tool.items() if n not in names for t in ts]
        rows += [Labelled(t, ()) for t in rnd.sample(others, 12) + rnd.sample(negs, 6)]
        sub_sets.append((build_index_with(pick, emb), rows))
        sub_rows_all += rows
    out["metatool-15"] = sub_sets  # type: ignore[assignment]
    return out


def features(index, rows, emb):  # type: ignore[no-untyped-def]
    if isinstance(index, list):  # several small corpora
        parts = [features(i, r, emb) for i, r in index]
        return np.vstack([p[0] for p in parts]), np.concatenate([p[1] for p in parts]), [p[2] for p in parts]
    qv = embed_cached(emb, [r.prompt for r in rows])
    X, y = [], []
    for r, q in zip(rows, qv, strict=True):
        sc = score(index, r.prompt, q)
        for doc in sc.order[:CANDIDATES].tolist():
            f = candidate_features(sc.lexical, sc.semantic, doc, sc.body_semantic, sc.body_lexical)
            X.append([f[k] for k in FEATURES])
            y.append(1 if index.policies[doc].name in r.expected else 0)
    return np.array(X), np.array(y), qv


def fit(parts):  # type: ignore[no-untyped-def]
    X = np.vstack([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    # each source weighs the same in the fit, whatever its size
    w = np.concatenate([np.full(len(p[1]), 1.0 / len(p[1])) for p in parts]) * len(y)
    lr = LogisticRegression(class_weight="balanced", C=float(os.environ.get("FIT_C", "1.0")), max_iter=2000)
    lr.fit(X, y, sample_weight=w)
    return OperatingPoint(weights={k: round(float(c), 3) for k, c in zip(FEATURES, lr.coef_[0], strict=True)},
                          bias=round(float(lr.intercept_[0]), 3), threshold=0.5, model_id=SHIPPED.model_id)


def evaluate(op, index, rows, qv, thr):  # type: ignore[no-untyped-def]
    if isinstance(index, list):
        allrows, routed = [], []
        for (i, r), v in zip(index, qv, strict=True):
            allrows += r
            routed += [[h.name for h in route(i, x.prompt, q, op, threshold=thr).hits] for x, q in zip(r, v, strict=True)]
        return compute(allrows, routed)
    routed = [[h.name for h in route(index, r.prompt, q, op, threshold=thr).hits] for r, q in zip(rows, qv, strict=True)]
    return compute(rows, routed)


def main() -> int:
    emb = load_model()
    data = datasets(emb)
    feats = {}
    for name, value in data.items():
        if name == "metatool-15":
            feats[name] = features(value, None, emb)
        else:
            feats[name] = features(value[0], value[1], emb)
    pooled = fit([feats[n][:2] for n in data])
    print("pooled fit:", pooled.weights, "bias", pooled.bias)
    fits = {"pooled": pooled}
    for held in data:
        fits[f"without-{held}"] = fit([feats[n][:2] for n in data if n != held])
        print(f"fit without {held}:", fits[f"without-{held}"].weights, "bias", fits[f"without-{held}"].bias)
    print("\n| fit | evaluated on | threshold | recall@2 | top-1 | F1 | false alarms | abstained positives |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for fname, op in fits.items():
        for dname, value in data.items():
            idx, rows = (value, None) if dname == "metatool-15" else value
            for thr in (0.3, 0.4, 0.5, 0.6, 0.7):
                m = evaluate(op, idx, rows, feats[dname][2], thr)
                print(f"| {fname} | {dname} | {thr:.1f} | {m['recall_at_2']:.3f} | {m['top1']:.3f} | {m['f1']:.3f} "
                      f"| {int(m['false_alarms'])}/{int(m['negatives'])} | {int(m['abstained_positives'])}/{int(m['positives'])} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
