"""Audit with and without the judge, in one run: WiCE and ExpertQA (strict protocol), blind probes, and
claim sets the judge never saw.

    .venv/bin/python bench/judge_audit_eval.py [--judge-dir DIR] [--grid]

Rows:
* WiCE / ExpertQA held-out fifth (seed 23; no judge or audit weight was trained on it): the headline;
* the same on the dev part (the judge trained on these four fifths: in-sample, reported for the gap);
* blind probe files (bench/labels/blind_probes_*.jsonl): changed claims rejected, paraphrases accepted;
* COVID-Fact and HealthVer (../shared/data/training/claim_verification_eval_only.jsonl.gz, evaluation only,
  a domain the judge never saw): the claim against its evidence, supported vs not (seeded sample).
Each item is audited as an outside scorer does (``audit("", chunks, claim)``, shipped default config, the real
embedding model); "supported" only when every claim's verdict is ``supported``. ``--grid`` adds the judge's
P(supported) bar swept on its own (no rules), to show where the shipped bar sits.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit_data import Example, expertqa, holdout, strict_label, wice
from audit_eval import metrics
from audit_eval_common import default_embedder, default_words
from bench_io import read_jsonl, shared_dir
from judge_route_eval import load_judge

from bosun.core.audit.audit import audit
from bosun.core.audit.config import AuditConfig

LABELS = Path(__file__).resolve().parent / "labels"
PROBES = ["blind_probes_dev.jsonl", "blind_probes_dev2.jsonl", "blind_probes_holdout.jsonl",
          "blind_probes_holdout2.jsonl", "blind_probes_holdout3.jsonl"]


def run(ex: Example, embed: Any, words: Any, judge: Any) -> tuple[int, float]:
    """(supported under the shipped decision, the judge's lowest P(supported) over the claims, or -1)."""
    rep = audit("", ex.chunks, ex.claim, AuditConfig(), embed=embed, words=words, judge=judge)
    verdicts = [c["verdict"] for c in rep["claims"]]
    sup = int(bool(verdicts) and all(v == "supported" for v in verdicts))
    ps = [c["judge"]["supported"] for c in rep["claims"] if "judge" in c]
    return sup, (min(ps) if ps and len(ps) == len(verdicts) else -1.0)


def table(name: str, data: list[Example], embed: Any, words: Any, judge: Any, grid: bool) -> list[str]:
    y = np.array([strict_label(e.label) for e in data])
    t0 = time.perf_counter()
    base = np.array([run(e, embed, words, None)[0] for e in data])
    t1 = time.perf_counter()
    judged = [run(e, embed, words, judge) for e in data]
    t2 = time.perf_counter()
    sup = np.array([s for s, _ in judged])
    p = np.array([q for _, q in judged])
    lines = [f"| {name} | {len(y)} | first: rules only | {metrics(y, base)['bal_acc']:.3f} | {t1 - t0:.1f} s |",
             f"| {name} | {len(y)} | judge (shipped decision) | **{metrics(y, sup)['bal_acc']:.3f}** | "
             f"{t2 - t1:.1f} s |"]
    if grid:
        for bar in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8):
            lines.append(f"| {name} | {len(y)} | judge alone, P(supported) >= {bar} | "
                         f"{metrics(y, (p >= bar).astype(int))['bal_acc']:.3f} | |")
    return lines


def probes(name: str, embed: Any, words: Any, judge: Any) -> str:
    rows = [json.loads(x) for x in (LABELS / name).read_text().splitlines() if x.strip()]
    out = []
    for j in (None, judge):
        right: Counter[str] = Counter()
        total: Counter[str] = Counter()
        for r in rows:
            ex = Example("probe", r["id"], r["claim"],
                         [{"content": s, "source_url": "https://example.org/source"} for s in r["evidence"]],
                         1 if r["label"] == "supported" else 0)
            s, _ = run(ex, embed, words, j)
            side = "supported" if r["label"] == "supported" else "changed"
            total[side] += 1
            right[side] += s == (side == "supported")
        out.append(f"{right['changed']}/{total['changed']} changed rejected, "
                   f"{right['supported']}/{total['supported']} paraphrases accepted")
    return f"| {name} | rules only: {out[0]} | judge: **{out[1]}** |"


def unseen(n: int) -> list[Example]:
    rows = list(read_jsonl(shared_dir() / "data" / "training" / "claim_verification_eval_only.jsonl.gz"))
    rows = random.Random(5).sample(rows, min(n, len(rows)))
    return [Example(r["source"], r["claim"], r["claim"], [{"content": r["evidence"], "source_url": "https://x.org/"}],
                    1 if r["label"] == "supported" else 0) for r in rows]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--judge-dir", type=Path)
    ap.add_argument("--grid", action="store_true")
    ap.add_argument("--window", type=int, default=0, help="evidence words per claim window (default: shipped)")
    ap.add_argument("--unseen", type=int, default=400, help="COVID-Fact/HealthVer items sampled (0: skip)")
    ap.add_argument("--skip-dev", action="store_true", help="skip the dev-part rows (in-sample for the judge)")
    args = ap.parse_args()
    embed, words = default_embedder(), default_words()
    judge = load_judge(args.judge_dir)
    if args.window:  # the run's window size, everywhere the audit reads claims
        import bosun.core.audit.judged as judged

        judged.read_claims.__defaults__ = (args.window,)
    lines = ["| set | n | system | balanced accuracy | time |", "|---|---:|---|---:|---:|"]

    def part(examples: list[Example], held: bool) -> list[Example]:
        return [e for e in examples if strict_label(e.label) is not None and e.judgeable and holdout(e.group) == held]

    for held in ([True] if args.skip_dev else [True, False]):
        tag = "held-out fifth" if held else "dev part (judge in-sample)"
        lines += table(f"WiCE {tag}", part(wice(), held), embed, words, judge, args.grid)
        lines += table(f"ExpertQA {tag}", part(expertqa(), held), embed, words, judge, args.grid)
        print("\n".join(lines), flush=True)
        lines = []
    if args.unseen:
        data = unseen(args.unseen)
        for src in sorted({e.dataset for e in data}):
            lines += table(f"unseen {src}", [e for e in data if e.dataset == src], embed, words, judge, args.grid)
    lines += ["", "| probe file | without the judge | with the judge |", "|---|---|---|"]
    lines += [probes(n, embed, words, judge) for n in PROBES]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
