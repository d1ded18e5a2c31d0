"""Train the prompt adapter (``core/routing/adapter.py``) and measure whether it transfers to unseen tools.

The adapter is a low-rank map on prompt vectors, ``q -> normalise(q + (q V) U^T)``, trained with numpy
(Adam, full-batch softmax over the training documents' whole-surface vectors, temperature ``TAU``, L2 on
U and V: the map starts at the identity and stays near it) on MetaTool **tune** queries -> their tools.

Transfer protocol (fixed before any result was seen): the 199 tools are split in two halves by a salted
hash (``HALF_SALT``). An adapter trained on the tune queries whose gold tools are all in half A is scored
on the tune queries whose gold tools are all in half B, ranking over the whole corpus (its own tools
included, which it has learnt to attract), and the reverse. That cross-tool gain is what predicts a
corpus nobody trained on; the same-tool gain (train and test on one half) is memorisation. Also scored
with the cross-half adapters: 15-tool sub-corpora drawn from the test half only. With the adapter trained
on every tune query (the one that ships): the repo's two policy corpora (regression only).

Choice rule (stated before the grid): among ``GRID`` x ``MIXES``, the most mean cross-tool recall@2 of
the shipped fused ranking (both directions), provided the policy corpora's ranking recall@2 and top-1
are no worse than without the adapter; ties (within 0.002) go to the smaller mix, then the larger L2.

    python bench/route_adapter.py                 # the protocol table (tune split only)
    python bench/route_adapter.py --write         # train on every tune query, write core/routing/data/
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))
from route_common import (
    REPO,
    BenchEmbedder,
    embed_cached,
    load_model,
    metatool_docs,
    metatool_queries,
    policy_corpus,
    split_of,
)

from bosun.core.routing import adapter as adapter_mod
from bosun.core.routing.adapter import QueryAdapter
from bosun.core.routing.background import BACKGROUND
from bosun.core.routing.corpus import Policy
from bosun.core.routing.route import PolicyIndex, build_index_with, score

HALF_SALT = "bosun-route-adapter-halves-2026-12-01"  # fixed before any adapter was trained
TAU = 0.05
RANK = 32
STEPS = 300
LEARNING_RATE = 1e-2
SEED = 0
GRID = (0.1, 0.3)  # L2 on U and V
MIXES = (0.25, 0.5, 0.75, 1.0)
# what ships: the choice rule's pick on the tune split (bench/results/route_adapter.md)
SHIPPED_L2 = 0.1
SHIPPED_MIX = 0.75


def half_of(tool: str) -> int:
    """0 or 1: the tool's half, by a salted hash of its name."""
    return hashlib.sha256(f"{HALF_SALT}:{tool}".encode()).digest()[0] & 1


@dataclass
class Data:
    docs: list[Policy]
    doc_vecs: npt.NDArray[np.float64]  # [n_docs, dim] whole-surface vectors, unit length
    queries: list[dict[str, Any]]  # tune queries with at least one relevant tool
    qvecs: npt.NDArray[np.float64]
    gold: list[list[int]]
    query_half: npt.NDArray[np.int64]  # 0 / 1 when every gold tool is in that half, -1 for mixed
    tool_half: npt.NDArray[np.int64]


def load_data(emb: Any) -> Data:
    docs = metatool_docs()
    index_of = {d.name: i for i, d in enumerate(docs)}
    qs = [q for q in metatool_queries() if split_of(q["qid"]) == "tune" and q["relevant"]]
    qvecs = embed_cached(emb, [q["query"] for q in qs]).astype(np.float64)
    dvecs = embed_cached(emb, [d.surface for d in docs]).astype(np.float64)
    dvecs /= np.linalg.norm(dvecs, axis=1, keepdims=True)
    gold = [[index_of[r] for r in q["relevant"]] for q in qs]
    tool_half = np.array([half_of(d.name) for d in docs], np.int64)
    qhalf = np.array([h.pop() if len(h := {int(tool_half[g]) for g in gs}) == 1 else -1 for gs in gold], np.int64)
    return Data(docs, dvecs, qs, qvecs, gold, qhalf, tool_half)


def train(qvecs: npt.NDArray[np.float64], gold: Sequence[Sequence[int]], doc_vecs: npt.NDArray[np.float64],
          docs: npt.NDArray[np.int64], l2: float, rank: int = RANK, steps: int = STEPS,
          tau: float = TAU, lr: float = LEARNING_RATE, seed: int = SEED
          ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(U, V) minimising softmax cross-entropy of prompts over ``docs`` (a multi-tool prompt splits its target)."""
    rng = np.random.default_rng(seed)
    dim = qvecs.shape[1]
    u = np.zeros((dim, rank))
    v = rng.normal(0.0, 0.01, (dim, rank))
    cand = doc_vecs[docs]
    col = {int(g): i for i, g in enumerate(docs)}
    target = np.zeros((len(qvecs), len(docs)))
    for i, gs in enumerate(gold):
        for g in gs:
            target[i, col[g]] = 1.0 / len(gs)
    moments = [[np.zeros_like(u), np.zeros_like(u)], [np.zeros_like(v), np.zeros_like(v)]]
    for t in range(1, steps + 1):
        qv = qvecs @ v
        z = qvecs + qv @ u.T
        norm = np.linalg.norm(z, axis=1, keepdims=True)
        zh = z / norm
        logits = zh @ cand.T / tau
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=1, keepdims=True)
        dzh = ((p - target) / len(qvecs)) @ cand / tau
        dz = (dzh - zh * (dzh * zh).sum(axis=1, keepdims=True)) / norm
        grads = (dz.T @ qv + l2 * u, qvecs.T @ (dz @ u) + l2 * v)
        for param, grad, (m, s) in zip((u, v), grads, moments, strict=True):
            m *= 0.9
            m += 0.1 * grad
            s *= 0.999
            s += 0.001 * grad * grad
            param -= lr * (m / (1 - 0.9**t)) / (np.sqrt(s / (1 - 0.999**t)) + 1e-8)
    return u, v


def trained(data: Data, which: str, l2: float) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Train on half 'A' (0), 'B' (1) or 'all' tune queries; cached under ~/.cache/bosun-bench by inputs."""
    if which == "all":
        rows = np.arange(len(data.queries))
        docs = np.arange(len(data.docs))
    else:
        h = 0 if which == "A" else 1
        rows = np.flatnonzero(data.query_half == h)
        docs = np.flatnonzero(data.tool_half == h)
    key = hashlib.sha256(json.dumps([which, l2, RANK, STEPS, TAU, LEARNING_RATE, SEED, HALF_SALT,
                                     len(rows)]).encode()).hexdigest()[:16]
    path = Path.home() / ".cache" / "bosun-bench" / f"adapter-{key}.npz"
    if path.exists():
        with np.load(path) as f:
            return np.asarray(f["u"]), np.asarray(f["v"])
    t0 = time.perf_counter()
    u, v = train(data.qvecs[rows], [data.gold[i] for i in rows], data.doc_vecs, docs, l2)
    print(f"trained {which} l2={l2}: {len(rows)} queries, {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, u=u, v=v)
    return u, v


def ranking(index: PolicyIndex, queries: list[dict[str, Any]], vecs: dict[str, Any],
            allowed: set[str] | None = None) -> tuple[float, float]:
    """Recall@2 and top-1 of the fused ranking (abstention off); ``allowed``: rank only these names."""
    r2 = t1 = 0.0
    for q in queries:
        order = score(index, q["query"], vecs[q["query"]]).order
        names = [index.policies[int(i)].name for i in order]
        if allowed is not None:
            names = [n for n in names if n in allowed]
        top, rel = names[:2], set(q["relevant"])
        r2 += len(rel & set(top)) / min(len(rel), 2)
        t1 += 1.0 if top and top[0] in rel else 0.0
    return r2 / max(len(queries), 1), t1 / max(len(queries), 1)


def adapter_of(u: npt.NDArray[np.float64], v: npt.NDArray[np.float64], mix: float) -> QueryAdapter:
    return QueryAdapter(u.astype(np.float32), v.astype(np.float32), mix)


def protocol(emb: Any) -> list[str]:
    data = load_data(emb)
    index = build_index_with(data.docs, BenchEmbedder(emb), adapter=False)  # set per variant below
    vecs = {q["query"]: data.qvecs[i].astype(np.float32) for i, q in enumerate(data.queries)}
    lines = ["| set | L2 | mix | recall@2 | top-1 |", "|---|---:|---:|---:|---:|"]
    sets: dict[str, list[dict[str, Any]]] = {
        h: [data.queries[i] for i in np.flatnonzero(data.query_half == k)] for h, k in (("A", 0), ("B", 1))}
    base = {h: ranking(index, qs, vecs) for h, qs in sets.items()}
    for h in "AB":
        lines.append(f"| MetaTool tune, tools of half {h} ({len(sets[h])}) | none | | "
                     f"{base[h][0]:.3f} | {base[h][1]:.3f} |")
    # 15-tool sub-corpora drawn from one half only, scored with the adapter trained on the other half
    subs = sub_corpora(data)
    sub_index = {key: build_index_with(pols, BenchEmbedder(emb), adapter=False) for key, (pols, _) in subs.items()}
    sub_base = np.mean([ranking(sub_index[k], qs, vecs) for k, (_, qs) in subs.items()], axis=0)
    lines.append(f"| 15-tool sub-corpora (12, 6 per half) | none | | {sub_base[0]:.3f} | {sub_base[1]:.3f} |")
    pol = {name: policy_corpus(name) for name in ("demo", "heldout")}
    pol_index = {name: build_index_with(p, BenchEmbedder(emb), adapter=False) for name, (p, _) in pol.items()}
    pol_vecs = {name: dict(zip([q["query"] for q in qs], embed_cached(emb, [q["query"] for q in qs]), strict=True))
                for name, (_, qs) in pol.items()}
    pol_pos = {name: [q for q in qs if q["relevant"]] for name, (_, qs) in pol.items()}
    pol_base = {name: ranking(pol_index[name], pol_pos[name], pol_vecs[name]) for name in pol}
    for name in pol:
        lines.append(f"| policy corpus {name} | none | | {pol_base[name][0]:.3f} | {pol_base[name][1]:.3f} |")
    for l2 in GRID:
        halves = {h: trained(data, h, l2) for h in "AB"}
        full = trained(data, "all", l2)
        for mix in MIXES:
            cross, same = [], []
            for train_half, test_half in (("A", "B"), ("B", "A")):
                index.adapter = adapter_of(*halves[train_half], mix)
                cross.append(ranking(index, sets[test_half], vecs))
                same.append(ranking(index, sets[train_half], vecs))
            c, s = np.mean(cross, axis=0), np.mean(same, axis=0)
            lines.append(f"| cross-tool (train one half, test the other) | {l2} | {mix} | {c[0]:.3f} | {c[1]:.3f} |")
            lines.append(f"| same-tool (memorisation) | {l2} | {mix} | {s[0]:.3f} | {s[1]:.3f} |")
            sub_scores = []
            for key, (_, qs) in subs.items():
                sub_index[key].adapter = adapter_of(*halves["B" if key[0] == "A" else "A"], mix)
                sub_scores.append(ranking(sub_index[key], qs, vecs))
            sb = np.mean(sub_scores, axis=0)
            lines.append(f"| 15-tool sub-corpora, other half's adapter | {l2} | {mix} | {sb[0]:.3f} | {sb[1]:.3f} |")
            for name in pol:
                pol_index[name].adapter = adapter_of(*full, mix)
                r = ranking(pol_index[name], pol_pos[name], pol_vecs[name])
                lines.append(f"| policy corpus {name}, all-tune adapter | {l2} | {mix} | {r[0]:.3f} | {r[1]:.3f} |")
            print("\n".join(lines[-5:]), file=sys.stderr, flush=True)
    return lines


def end_to_end(emb: Any, l2: float, mix: float, threshold_level: float | None = None,
               gate_level: float | None = None) -> list[str]:
    """The shipped decision (abstention, clauses) on MetaTool tune with cross-half adapters, against none.

    Queries whose tools are all in half B are routed by an index whose adapter was trained on half A (its
    self-calibration re-derived in the adapted space), and the reverse; awareness negatives go through
    both. The rows pool the two directions; 'none' is the same queries without an adapter. The levels
    (quantiles of the null, default calibrate.py's) re-read the same self-calibration elsewhere on its curve.
    """
    from dataclasses import replace

    from route_dev import HEADER, evaluate, summary

    from bosun.core.routing.calibrate import ROUTE_LEVELS
    from bosun.core.routing.route import clause_texts

    data = load_data(emb)
    every = [q for q in metatool_queries() if split_of(q["qid"]) == "tune"]
    negatives = [q for q in every if q["kind"] == "awareness_neg"]
    texts = list(dict.fromkeys(q["query"] for q in every))
    texts += [c for c in dict.fromkeys(c for t in texts for c in clause_texts(t)) if c not in set(texts)]
    vecs = dict(zip(texts, embed_cached(emb, texts), strict=True))
    lines = [HEADER]
    for label, use in (("none", False), (f"cross-half adapter l2={l2} mix={mix}", True)):
        pooled: list[dict[str, Any]] = []
        for train_half, test_half in (("A", 1), ("B", 0)):
            ad: QueryAdapter | bool = adapter_of(*trained(data, train_half, l2), mix) if use else False
            index = build_index_with(data.docs, BenchEmbedder(emb), adapter=ad)
            if index.calibration is not None and (threshold_level or gate_level):
                index.calibration = index.calibration.at(replace(
                    ROUTE_LEVELS, threshold=threshold_level or ROUTE_LEVELS.threshold,
                    gate=gate_level or ROUTE_LEVELS.gate))
            qs = [q for i, q in enumerate(data.queries) if data.query_half[i] == test_half] + negatives
            res = evaluate(index, qs, vecs, clause_vecs=vecs)
            pooled.append(res)
            cal = index.calibration
            print(f"{label} train {train_half}: threshold {cal.threshold if cal else None}, "
                  f"gate {cal.solo_bg_z if cal else None}", file=sys.stderr, flush=True)
        merged: dict[str, dict[str, float]] = {}
        for kind in {k for r in pooled for k in r}:
            rows = [r[kind] for r in pooled if kind in r]
            n = sum(m["n"] for m in rows)
            merged[kind] = {m: (sum(r[m] * r["n"] for r in rows) / n if m != "n" else n)
                            for m in rows[0]}
        lines += summary(label, merged)
    return lines


def sub_corpora(data: Data) -> dict[tuple[str, int], tuple[list[Policy], list[dict[str, Any]]]]:
    """Six seeded 15-tool corpora per half, with up to 40 single-tool queries for their tools."""
    rng = random.Random(15)
    out = {}
    for h, k in (("A", 0), ("B", 1)):
        pool = [d for d, th in zip(data.docs, data.tool_half, strict=True) if th == k]
        for i in range(6):
            sub = rng.sample(pool, 15)
            names = {d.name for d in sub}
            qs = [q for q in data.queries if q["kind"] in ("single", "awareness_pos") and q["relevant"][0] in names]
            out[(h, i)] = (sub, rng.sample(qs, min(40, len(qs))))
    return out


def write(emb: Any, l2: float = SHIPPED_L2, mix: float = SHIPPED_MIX) -> Path:
    """Train on every tune query and write ``core/routing/data/adapter-<model id>.npz``."""
    data = load_data(emb)
    u, v = trained(data, "all", l2)
    probe = BACKGROUND[0]
    probe_vec = np.asarray(emb.inner.embed([probe])[0], np.float32)
    path = REPO / "core" / "routing" / "data" / adapter_mod.file_name(emb.model_id())
    np.savez_compressed(path, model_id=np.array(emb.model_id()), u=u.astype(np.float32), v=v.astype(np.float32),
                        mix=np.array(mix), probe_text=np.array(probe), probe_vec=probe_vec,
                        inputs=np.array(json.dumps(declared_inputs(l2, mix, len(data.queries)))))
    return path


def declared_inputs(l2: float, mix: float, n_queries: int) -> dict[str, Any]:
    """What the shipped file was trained from (a test checks the file against these constants)."""
    return {"l2": l2, "mix": mix, "rank": RANK, "steps": STEPS, "tau": TAU, "lr": LEARNING_RATE, "seed": SEED,
            "split": "tune", "n_queries": n_queries}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true", help="train on all tune queries and write the package file")
    ap.add_argument("--end-to-end", action="store_true", help="the shipped decision with cross-half adapters")
    ap.add_argument("--levels", default="", help="threshold,gate quantiles of the null for --end-to-end")
    args = ap.parse_args()
    emb = load_model()
    if args.end_to_end:
        levels = [float(x) for x in args.levels.split(",")] if args.levels else []
        print("\n".join(end_to_end(emb, SHIPPED_L2, SHIPPED_MIX, *levels)))
        return 0
    if args.write:
        path = write(emb)
        print(f"wrote {path} ({path.stat().st_size} bytes)")
        return 0
    print("\n".join(protocol(emb)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
