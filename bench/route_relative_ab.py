"""Relative decision signals (round 8): which statistic of the top candidate separates, and the semantic channel.

Two parts, tune split only (the held-out split is read by ``route_dev.py --split heldout``):

* ``--auc``: ROC AUC between positives whose top-ranked document is right and awareness negatives, for
  statistics of the top candidate: the shipped probability, raw scores, the per-document background z,
  the everyday gap, and the *relative* tests (the leader's z among all documents of the corpus for the
  same prompt, its gap to the median document, the fused score's z and margin, the cosine above the
  document's own highest background score, its percentile among its background scores). One row per
  corpus (mt15: the 12 sub-corpora pooled).
* ``--channel``: end to end (``route_dev.evaluate``, clause pass on) with the semantic channel
  (``calibrate.py``) off, on as shipped (bodiless corpora only), and forced on for every corpus, at
  several levels.

    python bench/route_relative_ab.py [--auc] [--channel] [--corpora metatool,mt15,demo,heldout,bookwell]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from route_common import BenchEmbedder, embed_cached, load_model
from route_dev import corpora, evaluate, pool

from bosun.core.routing import calibrate
from bosun.core.routing import route as R
from bosun.core.routing.abstain import SHIPPED, probability

STATS = ("p", "sem", "lex", "bg_z", "bg_gap", "zsem", "med_gap", "fz", "fmargin", "doc_max_gap", "doc_pct")


def _auc(pos: list[float], neg: list[float]) -> float:
    """Mann-Whitney ROC AUC (ties count half)."""
    if not pos or not neg:
        return float("nan")
    a, b = np.asarray(pos, np.float64), np.asarray(neg, np.float64)
    wins = (a[:, None] > b[None, :]).sum() + 0.5 * (a[:, None] == b[None, :]).sum()
    return float(wins / (a.size * b.size))


def top_stats(index: R.PolicyIndex, sc: R.Scores, sims: np.ndarray) -> dict[str, float]:
    d = int(sc.order[0])
    f = R.decision_features(sc, d)
    sem, fused = sc.semantic.astype(np.float64), sc.fused
    top2 = np.sort(fused)[::-1]
    col = sims[:, d]
    return {"p": probability(SHIPPED, f), "sem": f["sem"], "lex": f["lex"], "bg_z": f["bg_z"], "bg_gap": f["bg_gap"],
            "zsem": float((sem[d] - sem.mean()) / max(sem.std(), 1e-6)), "med_gap": float(sem[d] - np.median(sem)),
            "fz": float((fused[d] - fused.mean()) / max(fused.std(), 1e-6)),
            "fmargin": float(top2[0] - top2[1]) if len(top2) > 1 else 0.0,
            "doc_max_gap": float(sem[d] - col.max()), "doc_pct": float((col < sem[d]).mean()), "top": d}


def auc_table(names: list[str]) -> list[str]:
    emb = load_model()
    groups: dict[str, tuple[list[dict[str, float]], list[dict[str, float]]]] = {}
    for cname, pols, qs in corpora(names, "tune"):
        index = R.build_index_with(pols, BenchEmbedder(emb))
        assert index.bg_vecs is not None
        sims = R.background_scores(index, index.bg_vecs)
        texts = list(dict.fromkeys(q["query"] for q in qs))
        vecs = dict(zip(texts, embed_cached(emb, texts), strict=True))
        pos, neg = groups.setdefault("mt15 (pooled)" if cname.startswith("mt15-") else cname, ([], []))
        for q in qs:
            st = top_stats(index, R.score(index, q["query"], vecs[q["query"]]), sims)
            if q["relevant"] and pols[int(st["top"])].name in set(q["relevant"]):
                pos.append(st)
            elif q["kind"] == "awareness_neg":
                neg.append(st)
    lines = ["| corpus | right top-1 / negatives | " + " | ".join(STATS) + " |", "|---|---|" + "---:|" * len(STATS)]
    for g, (pos, neg) in groups.items():
        cells = " | ".join(f"{_auc([r[k] for r in pos], [r[k] for r in neg]):.3f}" for k in STATS)
        lines.append(f"| {g} | {len(pos)} / {len(neg)} | {cells} |")
    return lines


def _recalibrate(index: R.PolicyIndex, levels: calibrate.Levels, channel: bool) -> None:
    """The index's self-calibration at ``levels``, its semantic channel on or off whatever the corpus."""
    assert index.bg_vecs is not None
    sims = R.background_scores(index, index.bg_vecs)
    z = calibrate.leave_one_out_z(sims, R.BG_SD_FLOOR)
    p, top = R.null_probabilities(index, SHIPPED, sims)
    rows = np.arange(len(top))
    index.calibration = calibrate.from_null(p.tolist(), z[rows, top].tolist(), levels,
                                            sims[rows, top].astype(np.float64).tolist() if channel else None)


def channel_table(names: list[str]) -> list[str]:
    emb = load_model()
    variants: list[tuple[str, calibrate.Levels, bool | None]] = [
        ("channel off", replace(calibrate.ROUTE_LEVELS, semantic_channel=None), False),
        ("shipped (bodiless only, p70)", calibrate.ROUTE_LEVELS, None),
        *((f"bodiless only, p{round(t * 100)}", replace(calibrate.ROUTE_LEVELS, semantic_channel=t), None)
          for t in (0.65, 0.68, 0.72, 0.75)),
        ("every corpus, p70", calibrate.ROUTE_LEVELS, True),
    ]
    acc: dict[str, dict[str, list[Any]]] = {}
    for cname, pols, qs in corpora(names, "tune"):
        index = R.build_index_with(pols, BenchEmbedder(emb))
        has_body = index.chunks.vecs.shape[0] > 0
        texts = list(dict.fromkeys(q["query"] for q in qs))
        seen = set(texts)
        texts += [c for c in dict.fromkeys(c for t in texts for c in R.clause_texts(t)) if c not in seen]
        vecs = dict(zip(texts, embed_cached(emb, texts), strict=True))
        group = "mt15" if cname.startswith("mt15-") else cname
        for label, levels, force in variants:
            _recalibrate(index, levels, (not has_body) if force is None else force)
            acc.setdefault(label, {}).setdefault(group, []).append(evaluate(index, qs, vecs, clause_vecs=vecs))
        print(f"{cname} done", file=sys.stderr)
    lines = ["| variant | corpus | recall@2 | top-1 | multi recall@2 | false alarms (awareness) | out of corpus |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for label, by in acc.items():
        for group, results in by.items():
            res = pool(results)
            pos = [k for k in res if "recall2" in res[k]]
            n = sum(res[k]["n"] for k in pos)
            r2 = sum(res[k]["recall2"] * res[k]["n"] for k in pos) / n
            t1 = sum(res[k]["top1"] * res[k]["n"] for k in pos) / n
            multi = f"{res['multi']['recall2']:.3f}" if "multi" in res else ""
            fa = f"{res['awareness_neg']['fa']:.3f}" if "awareness_neg" in res else ""
            ooc = f"{res['out_of_corpus']['fa']:.3f}" if "out_of_corpus" in res else ""
            lines.append(f"| {label} | {group} | {r2:.3f} | {t1:.3f} | {multi} | {fa} | {ooc} |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--auc", action="store_true")
    ap.add_argument("--channel", action="store_true")
    ap.add_argument("--corpora", default="metatool,mt15,demo,heldout,bookwell")
    args = ap.parse_args()
    names = args.corpora.split(",")
    if args.auc or not args.channel:
        print("\n".join(auc_table(names)))
    if args.channel or not args.auc:
        print("\n".join(channel_table(names)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
