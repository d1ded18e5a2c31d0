"""Fit the audit's confidence model on the dev halves, compare matchers by transfer, write the model.

    .venv/bin/python bench/audit_train.py            # compare arms, then write core/audit/audit_model.json
    .venv/bin/python bench/audit_train.py --compare  # only the comparison, write nothing
    .venv/bin/python bench/audit_train.py --lexical  # the lexical arm only, no model needed
    .venv/bin/python bench/audit_train.py --ablate   # also the hybrid without each newer feature, write nothing
    .venv/bin/python bench/audit_train.py --shift    # also every arm fitted as usual, scored on shifted evidence

Evidence shift (``--shift``, round 5): the unseen sets outside scorers use give a claim a few retrieved
sentences, not a page (WiCE) or a web passage (ExpertQA). ``audit_features.shifted`` keeps each claim's 5
candidate sentences most similar to it; models are fitted on the usual rows and scored on the shifted ones
(grouped CV: train folds as usual, test fold shifted; transfer: fit on one set, score the other one
shifted). The arm is chosen by its worst transfer cell, not by its best in-set CV.

Data (bench/audit_data.py): WiCE-dev and ExpertQA-dev with the strict mapping (supported only when
fully supported; partial counts as not supported), one fifth of each set's groups held out by a
fixed seed and never used here. Arms: ``lexical`` (BM25 candidates + coverage features),
``semantic`` (embedding cosines only, plus the mismatch flag), ``hybrid`` (both) and ``hybrid + token
alignment`` (plus ``align``, core/audit/align.py: the default when the model's session is at hand). For each
arm: grouped 5-fold cross-validation over both sets (groups = WiCE page / ExpertQA answer), and
transfer: fit on one set, test on the other. A claim counts as supported when the model says
p >= 0.5 and no consistency check fired, as at run time.

The model is a logistic regression with balanced class weights, standardised features, L2, and
coefficient signs fixed (more coverage or similarity never lowers the confidence; missing words, a
missing number or a mismatch never raise it), fitted with scipy's L-BFGS-B. Deterministic.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit_data import Example, expertqa, holdout, strict_label, wice
from audit_features import SHIFT_K, EmbedCache, JudgeCache, features, shifted

from bosun.core.audit.judged import JUDGE_FEATURES, JudgeReading, judge_refutes
from bosun.core.audit.match import (
    ALIGN_MEASURED,
    ALIGNED_FEATURES,
    LEXICAL_FEATURES,
    MEASURED_FEATURES,
    ROUND6_ALIGNED,
    SEMANTIC_FEATURES,
    at_most_partial,
    has_uncovered_clause,
)

OUT = Path(__file__).resolve().parents[1] / "core" / "audit" / "audit_model.json"
C = 0.5
CLAUSE_RULE = True  # measured both ways in the comparison
OVERCLAIM_RULE = True  # a universal ("all") the evidence does not state: at most partially supported
SET_BALANCE = True
# weight classes by every claim of a set (the metric's prior, see fit_arrays) instead of 50/50 among
# the claims with evidence: measured in the comparison (ExpertQA CV up, ExpertQA -> WiCE transfer
# down: the no-citation share is ExpertQA's own), so off
METRIC_PRIOR = False
# grouped CV again with the groups reshuffled across folds this many times: one split of 281 WiCE
# claims moves balanced accuracy by ~0.01-0.02, enough to pick the wrong feature set
RESHUFFLES = 7
SIGN = {"cov1": 1, "cov2": 1, "cov3": 1, "bigram": 1, "clause_min": 1, "sem_max": 1, "sem_best": 1,
        "miss_frac": -1, "miss_max": -1, "num_missing": -1, "mismatch": -1, "specific_cov": 1, "sem_union": 1,
        "log_sentences": -1, "align": 1, "align_min": 1, "align_q25": 1, "align_low": -1, "align_specific": 1,
        "align_worst": 1, "align_gaps": -1, "align_b1": 1, "align_b2": 1, "align_b3": 1,
        "judge_sup": 1, "judge_ref": -1}
JUDGED_FEATURES = (*ALIGNED_FEATURES, *JUDGE_FEATURES)  # the default arm plus the judge's reading
# the judge's sure refutation makes a claim contradicted at run time (core/audit/judged.py judge_refutes);
# measured both ways in the judged comparison: it cost 0.01-0.03 on every split with v1 and v2, so off
JUDGE_REFUTES = False
JUDGED_VETOES = True  # the rules' vetoes (a mismatch, an uncovered clause) still apply beside the judge
JUDGED_ARMS = {  # name -> (features, (rules' vetoes, judge's refutation))
    "default arm (no judge)": (ALIGNED_FEATURES, (True, False)),
    "default arm + judge features, vetoes, judge refutes": (JUDGED_FEATURES, (True, True)),
    "default arm + judge features, vetoes, no judge refutation": (JUDGED_FEATURES, (True, False)),
    "default arm + judge features, no vetoes, judge refutes": (JUDGED_FEATURES, (False, True)),
    "judge features alone, judge refutes": (JUDGE_FEATURES, (False, True)),
}
ROUND4_ALIGNED = (*SEMANTIC_FEATURES, "align")  # the round-4 default (with bigram), kept for the comparison
ARMS = {
    "lexical": LEXICAL_FEATURES,
    "semantic": ("sem_max", "sem_best", "mismatch"),
    "hybrid": SEMANTIC_FEATURES,
    "hybrid + token alignment, with bigram (round 4)": ROUND4_ALIGNED,
    "hybrid + token alignment over every candidate (round 6)": ROUND6_ALIGNED,
    "hybrid + token alignment, best 3 sentences (default)": ALIGNED_FEATURES,
}


def fit_arrays(x: np.ndarray, y: np.ndarray, names: tuple[str, ...], sets: np.ndarray | None = None,
               totals: dict[tuple[str, int], int] | None = None,
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Logistic regression, L2 (1/C), sign-constrained, on standardised features. Row weights
    mirror balanced accuracy: each row of class c in set s weighs 1 / (claims of class c in s), and
    each set gets the same total weight, so the larger set does not decide the threshold for the
    other. ``totals`` counts every claim of the set, the ones without evidence too (they are scored
    unsupported by rule and are not fitted): balanced accuracy counts them, so a fitted negative
    weighs what a negative weighs in the metric (calibration at the metric's prior, not 50/50
    among the claims with evidence)."""
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale == 0] = 1.0
    z = (x - mean) / scale
    sets = sets if sets is not None and SET_BALANCE else np.full(len(y), "all")
    sw = np.zeros(len(y))
    for s in np.unique(sets):
        for c in (0, 1):
            mask = (sets == s) & (y == c)
            if mask.any():
                n = totals.get((str(s), c), 0) if totals else 0
                sw[mask] = 1.0 / max(n, int(mask.sum()))
    sw *= len(y) / sw.sum()

    def loss(p: np.ndarray) -> tuple[float, np.ndarray]:
        w, b = p[:-1], p[-1]
        m = z @ w + b
        value = float(np.sum(sw * (np.logaddexp(0, m) - y * m)) + 0.5 / C * np.sum(w * w))
        s = 1 / (1 + np.exp(-m))
        grad = np.append(z.T @ (sw * (s - y)) + w / C, np.sum(sw * (s - y)))
        return value, grad

    bounds = [(0.0, None) if SIGN[n] > 0 else (None, 0.0) for n in names] + [(None, None)]
    res = minimize(loss, np.zeros(len(names) + 1), jac=True, method="L-BFGS-B", bounds=bounds)
    return mean, scale, res.x[:-1], float(res.x[-1])


def predict(fitted: tuple[np.ndarray, np.ndarray, np.ndarray, float], x: np.ndarray) -> np.ndarray:
    mean, scale, coef, intercept = fitted
    return 1 / (1 + np.exp(-(((x - mean) / scale) @ coef + intercept)))


def bal_acc(y: np.ndarray, sup: np.ndarray) -> float:
    tpr = float(((sup == 1) & (y == 1)).sum() / max(1, (y == 1).sum()))
    tnr = float(((sup == 0) & (y == 0)).sum() / max(1, (y == 0).sum()))
    return (tpr + tnr) / 2


def supported(p: np.ndarray, rows: list[dict[str, float]], vetoes: bool = True, refutes: bool = False) -> np.ndarray:
    """As at run time: p >= 0.5, no consistency check fired and no uncovered add-on clause (``vetoes``), and
    with a judge (``refutes``) no sure refutation by it."""
    return np.array([int(pp >= 0.5 and not (vetoes and r["mismatch"] != 0)
                         and not (vetoes and CLAUSE_RULE
                                  and (at_most_partial(r) if OVERCLAIM_RULE else has_uncovered_clause(r)))
                         and not (refutes and judge_refutes_row(r)))
                     for pp, r in zip(p, rows, strict=True)])


def judge_refutes_row(r: dict[str, float]) -> bool:
    """core/audit/judged.py judge_refutes on a feature row (P(supported) back from its logit)."""
    if not r.get("judge_read"):
        return False
    p_sup = float(1 / (1 + np.exp(-r["judge_sup"])))
    return judge_refutes(JudgeReading(p_sup, r["judge_ref"], max(0.0, 1 - p_sup - r["judge_ref"]), ()))


def dev_rows(emb: EmbedCache | None, part: str = "dev") -> tuple[list[Example], list[dict[str, float]], np.ndarray]:
    """Strict-labelled judgeable rows of both sets (``part``: "dev" = not held out, "holdout")."""
    data = [e for e in wice() + expertqa()
            if strict_label(e.label) is not None and e.judgeable and holdout(e.group) == (part == "holdout")]
    rows = [features(e, emb) for e in data]
    y = np.array([strict_label(e.label) for e in data], dtype=int)
    return data, rows, y


def class_totals(data: list[Example], y: np.ndarray) -> dict[tuple[str, int], int]:
    """Claims per (set, class), with or without evidence: balanced accuracy's denominators."""
    out: dict[tuple[str, int], int] = {}
    for e, label in zip(data, y.tolist(), strict=True):
        out[(e.dataset, label)] = out.get((e.dataset, label), 0) + 1
    return out


def compare(data: list[Example], rows: list[dict[str, float]], y: np.ndarray, arms: dict[str, tuple[str, ...]],
            metric_prior: bool = METRIC_PRIOR, header: bool = True,
            test_rows: list[dict[str, float]] | None = None, test_has: np.ndarray | None = None,
            decide: dict[str, tuple[bool, bool]] | None = None) -> list[str]:
    """Grouped 5-fold CV over both sets and transfer in both directions, per arm. Models are fitted
    on rows that have evidence; a row without evidence (an ExpertQA claim with no citation) is
    scored as the audit scores it: unsupported. ``metric_prior``: weight classes by all the claims
    of the training part (see ``fit_arrays``), else 50/50 among the claims with evidence. ``test_rows``:
    score these rows instead (the same claims, other evidence: the evidence shift), fitted as usual.
    ``decide``: per arm, (the rules' vetoes apply, the judge's refutation applies); default (True, False)."""
    from sklearn.model_selection import GroupKFold

    ds = np.array([e.dataset for e in data])
    has = np.array([bool(e.chunks) for e in data])
    groups = [f"{e.dataset}:{e.group}" for e in data]
    t_rows = test_rows if test_rows is not None else rows
    t_has = test_has if test_has is not None else has

    def totals(idx: np.ndarray) -> dict[tuple[str, int], int] | None:
        return class_totals([data[i] for i in idx], y[idx]) if metric_prior else None

    def cross_validate(x: np.ndarray, names: tuple[str, ...], split_seed: int | None,
                       how: tuple[bool, bool]) -> list[float]:
        """Balanced accuracy per set of grouped 5-fold CV; ``split_seed`` reshuffles which groups share a fold."""
        keyed = groups if split_seed is None else [
            hashlib.blake2b(f"{split_seed}:{g}".encode(), digest_size=8).hexdigest() for g in groups]
        oof = np.zeros(len(y))
        for tr, te in GroupKFold(n_splits=5).split(x, y, keyed):
            fit_tr = tr[has[tr]]
            oof[te] = predict(fit_arrays(x[fit_tr], y[fit_tr], names, ds[fit_tr], totals(tr)), xt[te])
        sup = supported(oof, t_rows, *how) * t_has
        return [bal_acc(y[ds == d], sup[ds == d]) for d in ("wice", "expertqa")]

    lines = [f"| arm | CV WiCE | CV ExpertQA | CV mean of {1 + RESHUFFLES} splits WiCE / ExpertQA "
             "| WiCE -> ExpertQA | ExpertQA -> WiCE |", "|---|---:|---:|---:|---:|---:|"]
    lines = lines if header else []
    for arm, names in arms.items():
        x = np.array([[r[n] for n in names] for r in rows])
        xt = np.array([[r[n] for n in names] for r in t_rows])
        how = (decide or {}).get(arm, (True, False))
        cv = cross_validate(x, names, None, how)
        many = np.mean([cv] + [cross_validate(x, names, k, how) for k in range(1, 1 + RESHUFFLES)], axis=0)
        cells = []
        for src, dst in (("wice", "expertqa"), ("expertqa", "wice")):
            fit = (ds == src) & has
            p = predict(fit_arrays(x[fit], y[fit], names, ds[fit], totals(np.flatnonzero(ds == src))), xt[ds == dst])
            rows_dst = [r for r, d in zip(t_rows, ds, strict=True) if d == dst]
            cells.append(bal_acc(y[ds == dst], supported(p, rows_dst, *how) * t_has[ds == dst]))
        lines.append(f"| {arm} | {cv[0]:.3f} | {cv[1]:.3f} | {many[0]:.3f} / {many[1]:.3f} | {cells[0]:.3f} | {cells[1]:.3f} |")
    return lines


def fit_json(x: np.ndarray, y: np.ndarray, names: tuple[str, ...], sets: np.ndarray,
             totals: dict[tuple[str, int], int] | None) -> dict[str, object]:
    mean, scale, coef, intercept = fit_arrays(x, y, names, sets, totals)
    return {"features": list(names), "mean": [round(float(v), 6) for v in mean],
            "scale": [round(float(v), 6) for v in scale], "coef": [round(float(v), 6) for v in coef],
            "intercept": round(intercept, 6)}


def judge_cache() -> JudgeCache:
    """The judge whose readings the judged arm is fitted on: ``--judge-dir DIR``, else the shipped one."""
    from judge_route_eval import load_judge

    from bosun.server.judge_model import shipped_dir
    from bosun.server.model import sha256_file

    given = sys.argv[sys.argv.index("--judge-dir") + 1] if "--judge-dir" in sys.argv else None
    directory = Path(given) if given else shipped_dir()
    return JudgeCache(load_judge(directory if given else None), sha256_file(directory / "model.onnx"))


def main() -> None:
    lexical_only = "--lexical" in sys.argv  # quick iteration without the model: compare only
    emb = None if lexical_only else EmbedCache()
    data, rows, y = dev_rows(emb)
    if emb is not None:
        emb.save()
    judges = None if lexical_only else judge_cache()
    if judges is not None:
        for r, e in zip(rows, data, strict=True):
            r.update(judges.features(e))
        judges.save()
        print(f"judge readings: {judges.path.name}")
        print("\n".join(compare(data, rows, y, {k: f for k, (f, _) in JUDGED_ARMS.items()},
                                decide={k: how for k, (_, how) in JUDGED_ARMS.items()})))
        if "--judged-only" in sys.argv:
            return
    print(f"dev rows: {len(y)} ({int(y.sum())} supported); "
          f"wice {sum(e.dataset == 'wice' for e in data)}, expertqa {sum(e.dataset == 'expertqa' for e in data)}")
    print("\n".join(compare(data, rows, y, {"lexical": LEXICAL_FEATURES} if lexical_only else ARMS)))
    if not lexical_only:  # the ablation: the other class prior
        other = "50/50 among claims with evidence" if METRIC_PRIOR else "the metric's prior"
        print("\n".join(compare(data, rows, y, {f"hybrid + token alignment, {other}": ALIGNED_FEATURES},
                                not METRIC_PRIOR, False)))
    if "--ablate" in sys.argv:  # the hybrid without each feature added in issue 23's second round, or with one more
        new = ("specific_cov", "log_sentences")
        arms = {"hybrid without " + f: tuple(n for n in SEMANTIC_FEATURES if n != f) for f in new}
        arms["hybrid without both (the first round's)"] = tuple(n for n in SEMANTIC_FEATURES if n not in new)
        arms.update({"hybrid with " + f: (*SEMANTIC_FEATURES, f) for f in MEASURED_FEATURES})
        arms.update({"hybrid + token alignment with " + f: (*ALIGNED_FEATURES, f) for f in ALIGN_MEASURED})
        arms["hybrid with align_min instead of align"] = (*SEMANTIC_FEATURES, *ALIGN_MEASURED)
        arms.update({"hybrid + token alignment without " + f: tuple(n for n in ALIGNED_FEATURES if n != f)
                     for f in ALIGNED_FEATURES if f not in ("align", "align_b3", "mismatch")})
        print("\n".join(compare(data, rows, y, arms, header=False)))
    if "--shift" in sys.argv and emb is not None:
        moved = [shifted(e, emb) for e in data]
        moved_rows = [features(e, emb) for e in moved]
        emb.save()
        print(f"\nevidence shift: each claim against its {SHIFT_K} most similar candidate sentences "
              "(fitted as usual, scored shifted)")
        shift_arms = dict(ARMS)
        if "--ablate" in sys.argv:
            shift_arms.update({"hybrid + token alignment with " + f: (*ALIGNED_FEATURES, f) for f in ALIGN_MEASURED})
            shift_arms.update({"hybrid + token alignment without " + f: tuple(n for n in ALIGNED_FEATURES if n != f)
                               for f in ALIGNED_FEATURES if f not in ("align", "align_b3", "mismatch")})
        print("\n".join(compare(data, rows, y, shift_arms, test_rows=moved_rows,
                                test_has=np.array([bool(e.chunks) for e in moved]))))
    if "--compare" in sys.argv or "--ablate" in sys.argv or "--shift" in sys.argv or lexical_only:
        return
    totals = class_totals(data, y) if METRIC_PRIOR else None
    fit = [i for i, e in enumerate(data) if e.chunks]  # a claim without evidence is unsupported by rule
    rows, y = [rows[i] for i in fit], y[fit]
    sets = np.array([data[i].dataset for i in fit])
    model = {
        "trained_by": "bench/audit_train.py",
        "data": "wice-dev + expertqa-dev, strict mapping, held-out fifth (seed 23) excluded",
        "rows": len(y), "positives": int(y.sum()), "C": C,
        "class_weight": "balanced per set" + (" over all its claims (the metric's prior)" if METRIC_PRIOR else ""),
        "constraints": "coefficient signs fixed by SIGN (monotone)",
        "bm25": fit_json(np.array([[r[n] for n in LEXICAL_FEATURES] for r in rows]), y, LEXICAL_FEATURES, sets, totals),
        "semantic": fit_json(np.array([[r[n] for n in SEMANTIC_FEATURES] for r in rows]), y, SEMANTIC_FEATURES, sets, totals),
        "semantic_aligned": fit_json(np.array([[r[n] for n in ALIGNED_FEATURES] for r in rows]), y, ALIGNED_FEATURES,
                                     sets, totals),
        "judged": fit_json(np.array([[r[n] for n in JUDGED_FEATURES] for r in rows]), y, JUDGED_FEATURES, sets, totals)
        | {"judge_sha256": judges.path.stem.rsplit("-", 1)[-1] if judges else None,
           "vetoes": JUDGED_VETOES, "refutes": JUDGE_REFUTES},
    }
    OUT.write_text(json.dumps(model, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT}: {len(y)} rows")


if __name__ == "__main__":
    main()
