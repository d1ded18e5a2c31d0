"""End-to-end audit accuracy on WiCE-dev and ExpertQA-dev, strict mapping, with the shipped model.

    .venv/bin/python bench/audit_eval.py              # dev part (what the model was fitted on)
    .venv/bin/python bench/audit_eval.py --holdout    # the held-out fifth (seed 23), scored once at the end

Each item is audited as an outside scorer does it: ``audit("", chunks, claim)`` with the shipped
default config, one claim as the response, its evidence as chunks (WiCE: the page's sentences,
one per chunk; ExpertQA: the passages the claim cites, none for a claim without a citation), and
"supported" only when every extracted claim's verdict is ``supported`` (``partially_supported``,
``contradicted`` and ``unsupported`` are not). Strict mapping: WiCE partially_supported and
ExpertQA Partial count as not supported; ExpertQA N/A and claims whose cited evidence has no text
are left out. Rows: bosun with the default (semantic/hybrid, real model) and bm25 matchers, and
dokis 0.3.0 (BM25, default config) on the same items when its scratch venv exists ($DOKIS_PYTHON,
default /tmp/dokis-venv/bin/python; never a bosun dependency). Robustness rows: WiCE with 8
sentences per chunk, ExpertQA against every passage of the answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit_data import Example, expertqa, holdout, strict_label, wice
from audit_eval_common import default_embedder, default_words

from bosun.core.audit.audit import audit
from bosun.core.audit.config import AuditConfig

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
    except Exception:
        sup = 0
    print(json.dumps(sup))
"""


def metrics(y: np.ndarray, sup: np.ndarray) -> dict[str, float]:
    """Balanced accuracy; precision/recall of the 'not supported' class (what an audit must catch)."""
    tpr = float(((sup == 1) & (y == 1)).sum() / max(1, (y == 1).sum()))
    tnr = float(((sup == 0) & (y == 0)).sum() / max(1, (y == 0).sum()))
    flagged = sup == 0
    prec = float(((y == 0) & flagged).sum() / max(1, flagged.sum()))
    return {"bal_acc": (tpr + tnr) / 2, "prec_ns": prec, "rec_ns": tnr, "n": len(y)}


def bosun_supported(ex: Example, cfg: AuditConfig, embed: Any, words: Any = None) -> tuple[int, str]:
    rep = audit("", ex.chunks, ex.claim, cfg, embed=embed, words=words)
    verdicts = [c["verdict"] for c in rep["claims"]]
    if not verdicts:
        return 0, "no_claim"
    worst = next((v for v in ("contradicted", "partially_supported", "unsupported") if v in verdicts), "supported")
    return int(worst == "supported"), worst


def dokis_supported(data: list[Example]) -> list[int] | None:
    if not DOKIS_PY.exists():
        return None
    payload = "".join(json.dumps({"claim": ex.claim, "chunks": ex.chunks}) + "\n" for ex in data)
    out = subprocess.run([str(DOKIS_PY), "-c", _DOKIS_SCRIPT], input=payload, capture_output=True, text=True, check=True)
    return [int(json.loads(x)) for x in out.stdout.splitlines()]


def evaluate(name: str, data: list[Example], embed: Any, words: Any, with_dokis: bool = True) -> list[str]:
    y = np.array([strict_label(e.label) for e in data])
    lines = [f"#### {name} (n={len(y)}, {int(y.sum())} supported)", "",
             "| system | balanced accuracy | not-supported P | not-supported R | verdicts |", "|---|---:|---:|---:|---|"]
    arms: list[tuple[str, AuditConfig, Any, Any]] = [
        ("bosun default (semantic, hybrid + token alignment)", AuditConfig(), embed, words),
        ("bosun semantic without token alignment", AuditConfig(), embed, None),
        ("bosun bm25", AuditConfig(matcher="bm25"), None, None)]
    for label, cfg, emb, wrd in arms:
        if cfg.matcher == "auto" and (emb is None or (label.startswith("bosun default") and wrd is None)):
            lines.append(f"| {label} | model not available | | | |")
            continue
        out = [bosun_supported(e, cfg, emb, wrd) for e in data]
        m = metrics(y, np.array([s for s, _ in out]))
        kinds = dict(Counter(k for _, k in out).most_common())
        lines.append(f"| {label} | **{m['bal_acc']:.3f}** | {m['prec_ns']:.3f} | {m['rec_ns']:.3f} | {kinds} |")
    dok = dokis_supported(data) if with_dokis else None
    if dok is not None:
        m = metrics(y, np.array(dok))
        lines.append(f"| dokis 0.3.0 (bm25) | {m['bal_acc']:.3f} | {m['prec_ns']:.3f} | {m['rec_ns']:.3f} | |")
    return [*lines, ""]


def part(examples: list[Example], held: bool) -> list[Example]:
    return [e for e in examples if strict_label(e.label) is not None and e.judgeable and holdout(e.group) == held]


def main() -> None:
    held = "--holdout" in sys.argv
    embed = default_embedder()
    words = default_words()
    which = "held-out fifth (seed 23; never used for fitting or choices)" if held else "dev part (the model was fitted here)"
    lines = [f"### {which}", ""]
    lines += evaluate("WiCE, one sentence per chunk", part(wice(), held), embed, words)
    lines += evaluate("ExpertQA, each claim against its own cited passages", part(expertqa(), held), embed, words)
    lines += evaluate("WiCE, 8 sentences per chunk (robustness)", part(wice(per_chunk=8), held), embed, words,
                      with_dokis=False)
    lines += evaluate("ExpertQA, against every passage of the answer (robustness)",
                      part(expertqa(own_evidence=False), held), embed, words, with_dokis=False)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
