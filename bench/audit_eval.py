"""Evaluate the claim audit on WiCE-dev and ExpertQA-dev: bosun vs a BM25-only arm.

    /work/venv/bin/python bench/audit_eval.py [--semantic]

Label mapping (see audit_data.py): main = supported (WiCE supported, ExpertQA Complete) vs
not supported (WiCE not_supported, ExpertQA Missing/Incomplete), leaving out ExpertQA claims whose
cited evidence has no text in the data (also reported with them); strict = partial counted as not
supported. Positive class for precision/recall is "not supported" (what an audit must catch).
bosun's prediction is end-to-end: the response is the claim, the chunks as in audit_data.py, the
default config; "supported" iff every extracted claim is supported. Also reported: grouped 5-fold
out-of-fold scores of the same model family (an estimate for held-out data, since the shipped
model saw all of dev) and cross-dataset transfer (train on one set, test on the other).
The BM25-only arm is dokis 0.3.0 itself (BM25 matcher, default config) run in a scratch venv
($DOKIS_PYTHON, default /tmp/dokis-venv/bin/python; pip install dokis==0.3.0 there, never here).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit_data import Example, expertqa, wice
from audit_features import EmbedCache, features
from audit_train import fit_arrays

from bosun.core.audit.audit import LEXICAL_FEATURES, SEMANTIC_FEATURES, audit
from bosun.core.audit.config import AuditConfig


def metrics(y_true: list[int], y_sup: list[int]) -> dict[str, float]:
    """Balanced accuracy; precision/recall of the 'not supported' class."""
    t = np.array(y_true)
    p = np.array(y_sup)
    tpr = float(((p == 1) & (t == 1)).sum() / max(1, (t == 1).sum()))
    tnr = float(((p == 0) & (t == 0)).sum() / max(1, (t == 0).sum()))
    flagged = p == 0
    prec = float(((t == 0) & flagged).sum() / max(1, flagged.sum()))
    return {"bal_acc": (tpr + tnr) / 2, "prec_ns": prec, "rec_ns": tnr, "n": len(t)}


def reliability(y_true: list[int], conf: list[float], bins: int = 5) -> list[tuple[str, int, float, float]]:
    out = []
    c = np.array(conf)
    t = np.array(y_true)
    for i in range(bins):
        lo, hi = i / bins, (i + 1) / bins
        mask = (c >= lo) & ((c < hi) if i < bins - 1 else (c <= hi))
        if mask.sum():
            out.append((f"{lo:.1f}-{hi:.1f}", int(mask.sum()), float(c[mask].mean()), float(t[mask].mean())))
    return out


def ece(y_true: list[int], conf: list[float], bins: int = 10) -> float:
    c = np.array(conf)
    t = np.array(y_true)
    total = 0.0
    for i in range(bins):
        lo, hi = i / bins, (i + 1) / bins
        mask = (c >= lo) & ((c < hi) if i < bins - 1 else (c <= hi))
        if mask.sum():
            total += mask.sum() / len(c) * abs(c[mask].mean() - t[mask].mean())
    return float(total)


def bosun_predict(ex: Example, cfg: AuditConfig, emb: EmbedCache | None) -> tuple[int, float, str]:
    rep = audit("", ex.chunks, ex.claim, cfg, embed=emb.embed if emb else None)
    claims = rep["claims"]
    if not claims:
        return 0, 0.0, "no_claim"
    ok = all(c["verdict"] == "supported" for c in claims)
    verdicts = {c["verdict"] for c in claims}
    kind = "contradicted" if "contradicted" in verdicts else ("supported" if ok else "unsupported")
    return int(ok), min(c["confidence"] for c in claims), kind


DOKIS_PY = Path(os.environ.get("DOKIS_PYTHON", "/tmp/dokis-venv/bin/python"))
_DOKIS_SCRIPT = r"""
import json, sys, logging
logging.disable(logging.CRITICAL)
import dokis
for line in sys.stdin:
    ex = json.loads(line)
    chunks = [dokis.Chunk(content=c["content"], source_url=c.get("source_url") or "https://unknown.invalid/")
              for c in ex["chunks"]]
    try:
        r = dokis.audit("", chunks, ex["claim"])
        sup = int(bool(r.claims) and all(c.supported for c in r.claims))
        conf = min((c.confidence for c in r.claims), default=1.0)
    except Exception as exc:
        sup, conf = 0, 0.0
    print(json.dumps([sup, conf]))
"""


def bm25_only(data: list[Example]) -> list[tuple[int, float]] | None:
    """The BM25-only arm: dokis 0.3.0 itself (BM25 matcher, default config), run in its scratch venv."""
    if not DOKIS_PY.exists():
        return None
    payload = "\n".join(json.dumps({"claim": ex.claim, "chunks": ex.chunks}) for ex in data) + "\n"
    out = subprocess.run([str(DOKIS_PY), "-c", _DOKIS_SCRIPT], input=payload, capture_output=True, text=True, check=True)
    return [tuple(json.loads(line)) for line in out.stdout.splitlines()]  # type: ignore[misc]


def fit_predict(xtr: np.ndarray, ytr: np.ndarray, xte: np.ndarray, names: tuple[str, ...]) -> np.ndarray:
    """The same model family as bench/audit_train.py (sign-constrained logistic regression)."""
    mean, scale, coef, intercept = fit_arrays(xtr, ytr, names)
    return 1 / (1 + np.exp(-(((xte - mean) / scale) @ coef + intercept)))


def oof(rows: list[dict[str, float]], y: np.ndarray, groups: list[str], names: tuple[str, ...]) -> np.ndarray:
    from sklearn.model_selection import GroupKFold

    x = np.array([[r[n] for n in names] for r in rows])
    pred = np.zeros(len(y))
    for tr, te in GroupKFold(n_splits=5).split(x, y, groups):
        pred[te] = fit_predict(x[tr], y[tr], x[te], names)
    return pred


def main() -> None:
    semantic = "--semantic" in sys.argv
    emb = EmbedCache() if semantic else None
    cfg = AuditConfig(matcher="semantic" if semantic else "bm25")
    names = SEMANTIC_FEATURES if semantic else LEXICAL_FEATURES
    lines: list[str] = [f"## matcher = {cfg.matcher}", ""]
    all_rows: dict[str, Any] = {}
    for ds_name, loader in (("wice", wice), ("expertqa", expertqa)):
        data = loader()
        res: dict[str, list[Any]] = {"y": [], "bosun": [], "conf": [], "bm25": [], "kind": [], "label": [], "judge": []}
        feats, groups = [], []
        dokis_out = bm25_only(data) or [(-1, 0.0)] * len(data)
        for ex, (b, _bconf) in zip(data, dokis_out, strict=True):
            sup, conf, kind = bosun_predict(ex, cfg, emb)
            res["label"].append(ex.label)
            res["judge"].append(ex.judgeable)
            res["bosun"].append(sup)
            res["conf"].append(conf)
            res["bm25"].append(b)
            res["kind"].append(kind)
            feats.append(features(ex, emb))
            groups.append(ex.group)
        if emb is not None:
            emb.save()
        all_rows[ds_name] = (data, res, feats, groups)
        lines.append(f"### {ds_name}")
        mappings = ["main", "strict"] + (["main, incl. empty-evidence rows"] if not all(res["judge"]) else [])
        for mapping in mappings:
            idx = [i for i, lab in enumerate(res["label"])
                   if (lab in (0, 1) or (mapping == "strict" and lab == "partial"))
                   and (res["judge"][i] or mapping.startswith("main, incl"))]
            y = [1 if res["label"][i] == 1 else 0 for i in idx]
            mb = metrics(y, [res["bosun"][i] for i in idx])
            mm = metrics(y, [res["bm25"][i] for i in idx])
            lines.append(
                f"- {mapping} mapping (n={mb['n']}): bosun bal_acc {mb['bal_acc']:.3f}, not-supported P {mb['prec_ns']:.3f} "
                f"R {mb['rec_ns']:.3f} | bm25-only bal_acc {mm['bal_acc']:.3f}, P {mm['prec_ns']:.3f} R {mm['rec_ns']:.3f}"
            )
        for lab in ("partial", "na"):
            idx = [i for i, v in enumerate(res["label"]) if v == lab]
            if idx:
                share = sum(res["bosun"][i] for i in idx) / len(idx)
                lines.append(f"- label {lab} (n={len(idx)}): bosun calls {share:.2f} of them supported")
        kinds = {k: res["kind"].count(k) for k in ("supported", "unsupported", "contradicted", "no_claim")}
        lines.append(f"- bosun verdicts: {kinds}")
        idx = [i for i, lab in enumerate(res["label"]) if lab in (0, 1) and res["judge"][i]]
        y = [res["label"][i] for i in idx]
        conf = [res["conf"][i] for i in idx]
        lines.append(f"- reliability (main mapping; bin: n, mean confidence, share supported), ECE {ece(y, conf):.3f}:")
        for b, n, mc, fr in reliability(y, conf):
            lines.append(f"  - {b}: n={n}, conf {mc:.2f}, supported {fr:.2f}")
        lines.append("")
    # honest estimates: out-of-fold and cross-dataset
    lines.append("### held-out estimates (model family retrained without the test rows; contradiction rule applied)")
    rows, ys, gs, dss, mism = [], [], [], [], []
    for ds_name, (data, _res, feats, groups) in all_rows.items():
        for ex, f, g in zip(data, feats, groups, strict=True):
            if ex.label in (0, 1) and ex.judgeable:
                rows.append(f)
                ys.append(ex.label)
                gs.append(g)
                dss.append(ds_name)
                mism.append(f["mismatch"])
    y_arr = np.array(ys)
    pred = oof(rows, y_arr, gs, names)
    sup = [int(p >= 0.5 and m == 0) for p, m in zip(pred, mism, strict=True)]
    for ds_name in ("wice", "expertqa"):
        idx = [i for i, d in enumerate(dss) if d == ds_name]
        m = metrics([ys[i] for i in idx], [sup[i] for i in idx])
        lines.append(f"- 5-fold grouped out-of-fold, {ds_name}: bal_acc {m['bal_acc']:.3f}, P {m['prec_ns']:.3f} R {m['rec_ns']:.3f}")
    x = np.array([[r[n] for n in names] for r in rows])
    for train_ds, test_ds in (("wice", "expertqa"), ("expertqa", "wice")):
        tr = np.array([d == train_ds for d in dss])
        te = ~tr
        p = fit_predict(x[tr], y_arr[tr], x[te], names)
        s = [int(pp >= 0.5 and mm == 0) for pp, mm in zip(p, np.array(mism)[te], strict=True)]
        m = metrics(list(y_arr[te]), s)
        lines.append(f"- train {train_ds} -> test {test_ds}: bal_acc {m['bal_acc']:.3f}, P {m['prec_ns']:.3f} R {m['rec_ns']:.3f}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
