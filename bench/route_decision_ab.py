"""Abstention variants on the tune split, replayed offline from each query's top candidates (no clause pass).

Each corpus is indexed and every query scored once; the top three candidates' decision features are kept,
with the corpus's null (its background prompts' best candidates, as the self-calibration reads them). Each
variant then re-decides every query from those features, exactly as ``route()`` admits candidates (the
clause pass is left out, so the figures sit a little below ``route_dev.py``'s). Variants:

* ``levels``: the threshold / gate / second-document quantiles of the null;
* ``second``: the second document with or without the one-word gate;
* ``gap``: the one-word gate's "closer to the document than to every background prompt" test relaxed
  by a margin, or dropped;
* ``or-bgz``: a second admission path, bg_z above a high quantile of the null alone;
* ``claimed gap k``: the everyday-gap test leaves out the background prompts the candidate document
  itself serves (their leave-one-out bg_z on it >= k, or >= the corpus's own one-word gate): a tool
  list serves "what's the weather this weekend", so resembling that prompt is no evidence against it;
* ``learned``: a logistic model on corpus-relative features of the top candidate (its probability and
  bg_z as percentiles of this corpus's null, the everyday gap with and without claimed prompts, margins,
  the prompt's length and the share of its words any document has), fitted on one group of corpora
  and applied to the others (leave-one-corpus-out); the second document keeps the shipped rule.

Also printed: ROC AUC of single statistics of the top candidate (top-1 right positives vs negatives),
raw and as percentiles of the corpus's own null, to show how much any one signal separates.

    python bench/route_decision_ab.py [--corpora metatool,mt15,demo,heldout] [--skip-learned]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from route_common import BenchEmbedder, embed_cached, load_model
from route_dev import corpora

from bosun.core.routing import route as R
from bosun.core.routing.abstain import SHIPPED, probability
from bosun.core.routing.calibrate import leave_one_out_z

Corpus = dict[str, Any]


def collect(names: list[str]) -> dict[str, Corpus]:
    """Per corpus: each query's kind, number of relevant documents and top-3 candidates' features; the null."""
    emb = load_model()
    out: dict[str, Corpus] = {}
    for cname, pols, qs in corpora(names, "tune"):
        index = R.build_index_with(pols, BenchEmbedder(emb))
        texts = list(dict.fromkeys(q["query"] for q in qs))
        vecs = dict(zip(texts, embed_cached(emb, texts), strict=True))
        assert index.bg_vecs is not None and index.vectorizer is not None
        sims = R.background_scores(index, index.bg_vecs)
        z_loo = leave_one_out_z(sims, R.BG_SD_FLOOR)
        null_p, top = R.null_probabilities(index, SHIPPED, sims)
        null_z = z_loo[np.arange(len(top)), top]
        own_gate = float(np.clip(np.quantile(null_z, 0.8), 1.0, 6.0))
        vocab = set(index.vectorizer.vocabulary_) | set(getattr(index.chunk_vectorizer, "vocabulary_", {}))
        rows = []
        for q in qs:
            sc = R.score(index, q["query"], vecs[q["query"]])
            near = index.bg_vecs @ vecs[q["query"]].astype(np.float32)
            stems = {st for _, st in R.content_words(q["query"])}
            cands = []
            for d in sc.order[:3].tolist():
                f = R.decision_features(sc, d)
                f["p"] = probability(SHIPPED, f)
                f["rel"] = float(pols[d].name in set(q["relevant"]))
                ranked = np.sort(sc.fused)[::-1]
                f["fused"], f["fused_margin"] = float(ranked[0]), float(ranked[0] - ranked[1])
                for name, k in (*((str(k), k) for k in CLAIM_KS), ("gate", own_gate)):
                    kept = z_loo[:, d] < k  # background prompts this document does not serve
                    f[f"gap_{name}"] = float(sc.semantic[d]) - (float(near[kept].max()) if kept.any() else -1.0)
                f["qlen"] = float(len(stems))
                f["hitfrac"] = len(stems & vocab) / max(1, len(stems))
                cands.append(f)
            rows.append((q["kind"], len(q["relevant"]), cands))
        out[cname] = {"rows": rows, "null_p": null_p, "null_z": null_z}
        print(f"{cname}: {len(pols)} docs, {len(qs)} queries", file=sys.stderr)
    return out


CLAIM_KS = (2.0, 3.0, 4.0, 5.0)


def _admit(f: dict[str, float], thr: float, gate: float, gap_min: float, gap: str = "bg_gap") -> bool:
    """abstain.admissible, with the everyday-gap test's margin and its variant (``gap``) as parameters."""
    if f["p"] < thr or f["mention"] >= 1:
        return False
    if f["multi"] >= 1:
        return True
    if f["pair"] >= 1:
        return f[gap] > gap_min
    return f["bg_z"] >= gate and f[gap] > gap_min


def decide(c: Corpus, T: float = 0.6, G: float = 0.8, N: float = 0.4, second_gate: bool = True,
           gap_min: float = 0.0, or_bgz: float | None = None, gap: str = "bg_gap",
           first: Any = None) -> dict[str, list[float]]:
    """Per kind: [n, recall@2, top-1, false alarms, hits, right hits].

    ``first``: a function (corpus, candidate features) -> bool deciding the first document instead
    (the learned model); later documents keep the shipped rule.
    """
    thr = float(np.clip(np.quantile(c["null_p"], T), 0.05, 0.9))
    gate = float(np.clip(np.quantile(c["null_z"], G), 1.0, 6.0))
    nxt = min(thr, float(np.clip(np.quantile(c["null_p"], N), 0.05, 0.9)))
    zb = float(np.quantile(c["null_z"], or_bgz)) if or_bgz is not None else np.inf
    acc: dict[str, list[float]] = {}
    for kind, nrel, cands in c["rows"]:
        hits: list[dict[str, float]] = []
        for f in cands:
            if len(hits) >= 2:
                break
            if first is not None and not hits:
                ok = bool(first(c, f))
                if not ok:
                    break
            elif hits and not second_gate:
                ok = f["p"] >= nxt and f["mention"] < 1
            else:
                ok = _admit(f, nxt if hits else thr, gate, gap_min, gap)
            ok = ok or (f["bg_z"] >= zb and f["bg_gap"] > gap_min and f["mention"] < 1)
            if ok:
                hits.append(f)
        a = acc.setdefault(kind, [0.0] * 6)
        a[0] += 1
        if nrel:
            a[1] += sum(h["rel"] for h in hits) / min(nrel, 2)
            a[2] += float(bool(hits) and hits[0]["rel"] > 0)
            a[4] += len(hits)
            a[5] += sum(h["rel"] for h in hits)
        else:
            a[3] += float(bool(hits))
    return acc


def summary(acc: dict[str, list[float]]) -> tuple[float, ...]:
    """(recall@2, top-1, false alarms on awareness negatives, on out-of-corpus queries, multi recall@2, precision)."""
    pos = [k for k in acc if k not in ("awareness_neg", "out_of_corpus")]
    n = sum(acc[k][0] for k in pos)
    rate = lambda k, i: acc[k][i] / acc[k][0] if k in acc else float("nan")  # noqa: E731
    return (sum(acc[k][1] for k in pos) / n, sum(acc[k][2] for k in pos) / n, rate("awareness_neg", 3),
            rate("out_of_corpus", 3), rate("multi", 1), sum(acc[k][5] for k in pos) / max(1.0, sum(acc[k][4] for k in pos)))


def row(label: str, data: dict[str, Corpus], **kw: Any) -> str:
    cells = {}
    mt15 = [summary(decide(c, **kw)) for name, c in data.items() if name.startswith("mt15-")]
    for name, c in data.items():
        if not name.startswith("mt15-"):
            cells[name] = summary(decide(c, **kw))
    if mt15:
        cells["mt15"] = tuple(float(np.nanmean([m[i] for m in mt15])) for i in range(6))
    out = []
    for name, (r, t, fa, oc, mu, pr) in cells.items():
        extra = f" / out {oc:.3f}" if name == "mt15" else (f" / multi {mu:.3f}" if name == "metatool" else "")
        out.append(f"{r:.3f} / {t:.3f} / FA {fa:.3f}{extra} / prec {pr:.2f}")
    return f"| {label} | " + " | ".join(out) + " |"


LEARNED = ("p_pct", "bgz_pct", "bg_gap", "gap_4.0", "multi", "pair", "margin", "fused_margin", "qlen",
           "hitfrac", "z", "mention")


def _relative(c: Corpus, f: dict[str, float]) -> list[float]:
    """The learned model's inputs: probability and bg_z as percentiles of this corpus's null, the rest as is."""
    x = dict(f, p_pct=float((c["null_p"] < f["p"]).mean()), bgz_pct=float((c["null_z"] < f["bg_z"]).mean()))
    return [x[k] for k in LEARNED]


def learned_rows(data: dict[str, Corpus]) -> list[str]:
    """Leave-one-corpus-out: fit the first-document decision on MetaTool (or the 15-tool corpora), apply it to all."""
    from sklearn.linear_model import LogisticRegression

    groups = {"metatool": [n for n in data if n == "metatool"], "mt15": [n for n in data if n.startswith("mt15-")]}
    out = []
    for label, names in groups.items():
        xs, ys = [], []
        for n in names:
            for _kind, nrel, cands in data[n]["rows"]:
                if nrel and not cands[0]["rel"]:
                    continue  # a positive whose top candidate is wrong says nothing about routing or not
                xs.append(_relative(data[n], cands[0]))
                ys.append(1 if nrel else 0)
        if not xs or len(set(ys)) < 2:
            continue
        model = LogisticRegression(class_weight="balanced", max_iter=2000).fit(np.asarray(xs), np.asarray(ys))
        for cut in (0.5, 0.6, 0.7):
            def first(c: Corpus, f: dict[str, float], m: Any = model, cut: float = cut) -> bool:
                return f["mention"] < 1 and float(m.predict_proba(np.asarray([_relative(c, f)]))[0, 1]) >= cut
            out.append(row(f"learned on {label}, admit at {cut}", data, first=first))
    return out


def aucs(data: dict[str, Corpus]) -> list[str]:
    """ROC AUC of one statistic of the top candidate: positives whose top is right vs negatives."""
    from sklearn.metrics import roc_auc_score

    keys = ("p", "bg_z", "sem", "z", "margin", "bg_gap", "fused", "fused_margin")
    lines = ["| corpus | " + " | ".join(keys) + " |", "|---|" + "---:|" * len(keys)]
    groups: dict[str, tuple[list[int], dict[str, list[float]], dict[str, list[float]]]] = {}
    for name, c in data.items():
        g = "mt15 (pooled)" if name.startswith("mt15-") else name
        ys, raw, pct = groups.setdefault(g, ([], {k: [] for k in keys}, {k: [] for k in keys}))
        null = {"p": np.asarray(c["null_p"]), "bg_z": np.asarray(c["null_z"])}
        for _kind, nrel, cands in c["rows"]:
            top = cands[0]
            if nrel and not top["rel"]:
                continue
            ys.append(1 if nrel else 0)
            for k in keys:
                raw[k].append(top[k])
                pct[k].append(float((null[k] < top[k]).mean()) if k in null else top[k])
    for g, (ys, raw, pct) in groups.items():
        if 0 < sum(ys) < len(ys):
            lines.append(f"| {g} | " + " | ".join(f"{roc_auc_score(ys, raw[k]):.3f}" for k in keys) + " |")
            if g.startswith("mt15"):
                lines.append("| mt15 (pooled, p and bg_z as null percentiles) | "
                             + " | ".join(f"{roc_auc_score(ys, pct[k]):.3f}" for k in keys) + " |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--corpora", default="metatool,mt15,demo,heldout")
    ap.add_argument("--skip-learned", action="store_true", help="leave out the learned decision (slow)")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    data = collect(args.corpora.split(","))
    names = [n for n in data if not n.startswith("mt15-")] + (["mt15"] if any(n.startswith("mt15-") for n in data) else [])
    print("Cells: recall@2 / top-1 / false alarms (awareness negatives) / [multi recall@2 or out-of-corpus FA]"
          " / precision of hits.\n")
    print("| variant | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    print(row("shipped levels p60 / p80 / p40", data))
    for n in (0.2, 0.0):
        print(row(f"second document at p{n * 100:.0f}", data, N=n))
        print(row(f"second document at p{n * 100:.0f}, no gate", data, N=n, second_gate=False))
    for t, g in ((0.5, 0.8), (0.6, 0.7), (0.7, 0.8), (0.6, 0.9)):
        print(row(f"threshold p{t * 100:.0f}, gate p{g * 100:.0f}", data, T=t, G=g))
    for t in (0.6, 0.7):
        for zq in (0.9, 0.95):
            print(row(f"threshold p{t * 100:.0f} or bg_z >= p{zq * 100:.0f} of the null", data, T=t, or_bgz=zq))
    for gm in (-0.02, -0.05):
        print(row(f"everyday gap > {gm}", data, gap_min=gm))
    for t, g in ((0.6, 0.8), (0.6, 0.9), (0.7, 0.85)):
        print(row(f"no everyday gap, threshold p{t * 100:.0f}, gate p{g * 100:.0f}", data, T=t, G=g, gap_min=-9.0))
    for name in (*(str(k) for k in CLAIM_KS), "gate"):
        for t, g in ((0.6, 0.8), (0.65, 0.8)):
            print(row(f"claimed gap k={name}, threshold p{t * 100:.0f}, gate p{g * 100:.0f}", data, T=t, G=g,
                      gap=f"gap_{name}"))
    if not args.skip_learned:
        print("\n".join(learned_rows(data)))
    print()
    print("\n".join(aucs(data)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
