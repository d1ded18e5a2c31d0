"""Contradiction probes and claim-extraction labels: the hand-written checks behind the README numbers.

    /work/venv/bin/python bench/audit_probes.py

1. bench/labels/contradiction_probes.jsonl: a claim against one chunk it contradicts (negation,
   number, unit, date, quantifier, named entity), plus faithful restatements as controls.
   contradiction_probes_b.jsonl: written later, claims against three multi-sentence chunks; its
   first run rejected 14 of 16 (a repeated word broke the negation window; "up 12 percent" vs
   "fell" was not a known opposite); both fixes are general, and it now rejects all 16. Reports
   how many contradicted claims bosun rejects (verdict contradicted or unsupported), how many of
   those it names as contradicted, and how many controls it wrongly rejects. dokis 0.3.0 is run on
   the same probes when its scratch venv exists ($DOKIS_PYTHON).
2. bench/labels/claim_sentences.jsonl: answer sentences labelled factual claim or not; precision,
   recall and F1 of the claimify extractor (and of the keep-everything regex extractor). The
   selection rules were adjusted after reading this set's errors, so it is optimistic;
   claim_sentences_holdout.jsonl was written afterwards and never used to change a rule.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

from bosun.core.audit.audit import audit
from bosun.core.audit.claims import is_factual_claim

HERE = Path(__file__).resolve().parent
DOKIS_PY = Path(os.environ.get("DOKIS_PYTHON", "/tmp/dokis-venv/bin/python"))


def dokis_rejects(probes: list[dict]) -> list[bool] | None:
    if not DOKIS_PY.exists():
        return None
    script = (
        "import json,sys,logging\nlogging.disable(logging.CRITICAL)\nimport dokis\n"
        "for line in sys.stdin:\n p=json.loads(line)\n"
        " r=dokis.audit('', [dokis.Chunk(**c) for c in p['chunks']], p['claim'])\n"
        " print(json.dumps(not (r.claims and all(c.supported for c in r.claims))))\n"
    )
    out = subprocess.run([str(DOKIS_PY), "-c", script], input="".join(json.dumps(p) + "\n" for p in probes),
                         capture_output=True, text=True, check=True)
    return [json.loads(x) for x in out.stdout.splitlines()]


def probes(name: str) -> list[str]:
    rows = [json.loads(x) for x in (HERE / "labels" / name).read_text().splitlines() if x]
    lines = [f"### contradiction probes (bench/labels/{name})", ""]
    rejected: Counter[str] = Counter()
    named: Counter[str] = Counter()
    total: Counter[str] = Counter()
    misses = []
    for p in rows:
        rep = audit("", p["chunks"], p["claim"])
        claims = rep["claims"]
        verdict = claims[0]["verdict"] if claims else "no_claim"
        total[p["kind"]] += 1
        if verdict != "supported":
            rejected[p["kind"]] += 1
        if verdict == "contradicted" and p["kind"] != "control":
            named[p["kind"]] += 1
        if (p["expect"] == "reject") == (verdict == "supported"):
            misses.append(f"  - {p['kind']}: {verdict}: {p['claim']}")
    dok = dokis_rejects(rows)
    dok_rej: Counter[str] = Counter()
    if dok is not None:
        for p, r in zip(rows, dok, strict=True):
            dok_rej[p["kind"]] += int(r)
    lines.append("| kind | probes | bosun rejects | named contradicted | dokis 0.3.0 rejects |")
    lines.append("|---|---:|---:|---:|---:|")
    for kind in ("negation", "number", "unit", "date", "quantifier", "named_entity"):
        lines.append(f"| {kind} | {total[kind]} | {rejected[kind]} | {named[kind]} | "
                     f"{dok_rej[kind] if dok is not None else 'n/a'} |")
    n = sum(total[k] for k in total if k != "control")
    r = sum(rejected[k] for k in rejected if k != "control")
    c = sum(named[k] for k in named)
    lines.append(f"| **all contradicted** | {n} | **{r}** | {c} | "
                 f"{sum(dok_rej[k] for k in dok_rej if k != 'control') if dok is not None else 'n/a'} |")
    lines.append(f"| controls (should pass) | {total['control']} | {rejected['control']} wrongly rejected | | "
                 f"{dok_rej['control'] if dok is not None else 'n/a'} |")
    if misses:
        lines.append("")
        lines.append("misses:")
        lines.extend(misses)
    return lines


def extraction(name: str) -> list[str]:
    rows = [json.loads(x) for x in (HERE / "labels" / name).read_text().splitlines() if x]
    tp = sum(1 for r in rows if r["claim"] and is_factual_claim(r["sentence"]))
    fp = sum(1 for r in rows if not r["claim"] and is_factual_claim(r["sentence"]))
    fn = sum(1 for r in rows if r["claim"] and not is_factual_claim(r["sentence"]))
    p = tp / max(1, tp + fp)
    rc = tp / max(1, tp + fn)
    f1 = 2 * p * rc / max(1e-9, p + rc)
    pos = sum(1 for r in rows if r["claim"])
    p_all = pos / len(rows)
    f1_all = 2 * p_all / (p_all + 1)
    out = [f"### claim extraction (bench/labels/{name})", "",
           f"{len(rows)} sentences, {pos} factual claims.", "",
           "| extractor | precision | recall | F1 |", "|---|---:|---:|---:|",
           f"| regex (every sentence) | {p_all:.3f} | 1.000 | {f1_all:.3f} |",
           f"| claimify (default) | {p:.3f} | {rc:.3f} | {f1:.3f} |"]
    wrong = [r for r in rows if bool(r["claim"]) != is_factual_claim(r["sentence"])]
    if wrong:
        out.append("")
        out.append("errors:")
        out.extend(f"  - labelled {'claim' if r['claim'] else 'not a claim'}: {r['sentence']}" for r in wrong)
    return out


if __name__ == "__main__":
    print("\n".join([*probes("contradiction_probes.jsonl"), "", *probes("contradiction_probes_b.jsonl"), "", *extraction("claim_sentences.jsonl"), "",
                     *extraction("claim_sentences_holdout.jsonl")]))
