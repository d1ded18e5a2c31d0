"""Train the audit's confidence model on the development data only; writes core/audit/audit_model.json.

    /work/venv/bin/python bench/audit_train.py

Two logistic regressions (balanced class weights, standardised features, L2, coefficient signs
constrained so the confidence is monotone in the evidence; fitted with scipy's L-BFGS-B):
``bm25`` over lexical + consistency features and ``semantic`` adding two embedding similarities.
Training rows: WiCE supported vs not_supported and ExpertQA Complete vs Missing/Incomplete (see
audit_data.py); partial and N/A labels, and ExpertQA claims whose cited evidence has no text, are
left out. Deterministic: same data -> same file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit_data import expertqa, wice
from audit_features import EmbedCache, clean_claim, features

from bosun.core.audit.audit import LEXICAL_FEATURES, SEMANTIC_FEATURES

OUT = Path(__file__).resolve().parents[1] / "core" / "audit" / "audit_model.json"
C = 0.5


# Expected direction of each feature: more coverage / similarity never lowers the confidence, a
# missing number or a mismatch never raises it. Bounds keep the fit monotone, which stops it
# from learning dataset artefacts (e.g. "long claims are supported", or a negative weight on
# similarity) that would not hold on other data.
SIGN = {"cov1": 1, "cov2": 1, "cov_chunk": 1, "cov_all": 1, "bigram": 1, "sem_max": 1, "sem_lex": 1,
        "num_missing": -1, "miss_frac": -1, "mismatch": -1}


def fit_arrays(x: np.ndarray, y: np.ndarray, names: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Balanced-class-weight logistic regression, L2 (1/C), sign-constrained, on standardised features."""
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale == 0] = 1.0
    z = (x - mean) / scale
    pos = y.sum()
    sw = np.where(y == 1, len(y) / (2 * pos), len(y) / (2 * (len(y) - pos)))

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


def fit(x: np.ndarray, y: np.ndarray, names: tuple[str, ...]) -> dict[str, object]:
    mean, scale, coef, intercept = fit_arrays(x, y, names)
    return {
        "mean": [round(float(v), 6) for v in mean],
        "scale": [round(float(v), 6) for v in scale],
        "coef": [round(float(v), 6) for v in coef],
        "intercept": round(intercept, 6),
    }


def matrix(rows: list[dict[str, float]], names: tuple[str, ...]) -> np.ndarray:
    return np.array([[r[n] for n in names] for r in rows], dtype=np.float64)


def main() -> None:
    lexical_only = "--lexical-only" in sys.argv  # quick iteration: keeps the file's semantic section
    emb = None if lexical_only else EmbedCache()
    data = [e for e in wice() + expertqa() if e.label in (0, 1) and e.judgeable]
    if emb is not None:  # embed every text once up front, in slices, so memory stays flat
        from bosun.core.audit.audit import build_index, embed_text

        # ExpertQA first (all labels: the evaluation reuses this cache), then the WiCE rows trained on
        everything = expertqa() + [e for e in wice() if e.label in (0, 1)]
        texts = list(dict.fromkeys(
            [embed_text(clean_claim(ex.claim)) for ex in everything]
            + [embed_text(s.text) for ex in everything for s in build_index([c["content"] for c in ex.chunks]).sentences]
        ))
        for start in range(0, len(texts), 512):
            emb.embed(texts[start : start + 512])
            print(f"embedded {min(start + 512, len(texts))}/{len(texts)}", file=sys.stderr, flush=True)
            emb.save()
    rows = []
    for i, ex in enumerate(data):
        rows.append(features(ex, emb))
        if i % 200 == 0:
            print(f"{i}/{len(data)}", file=sys.stderr, flush=True)
            if emb is not None:
                emb.save()
    if emb is not None:
        emb.save()
    y = np.array([ex.label for ex in data], dtype=int)
    model = {
        "trained_by": "bench/audit_train.py",
        "data": "wice-dev (supported vs not_supported) + expertqa-dev (Complete vs Missing/Incomplete)",
        "rows": len(y),
        "positives": int(y.sum()),
        "C": C,
        "class_weight": "balanced",
        "constraints": "coefficient signs fixed by SIGN (monotone)",
        "bm25": {"features": list(LEXICAL_FEATURES), **fit(matrix(rows, LEXICAL_FEATURES), y, LEXICAL_FEATURES)},
    }
    if lexical_only:
        old = json.loads(OUT.read_text("utf-8")) if OUT.exists() else {}
        if "semantic" in old:
            model["semantic"] = old["semantic"]
    else:
        model["semantic"] = {"features": list(SEMANTIC_FEATURES), **fit(matrix(rows, SEMANTIC_FEATURES), y, SEMANTIC_FEATURES)}
    OUT.write_text(json.dumps(model, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT}: {len(y)} rows")


if __name__ == "__main__":
    main()
