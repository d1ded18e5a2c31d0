"""False-positive rate of core/redact.py on real agent output (miniswe-dev trajectories).

SWE-bench runs hold no live credentials, so every redaction is a candidate false
positive; each one is printed with its context for a hand label. The script also
counts git SHAs, sha256 digests and UUIDs before and after scrubbing: they must all survive.

    python bench/redact_eval.py [--show N] [--set miniswe-dev|tau-airline]

miniswe-dev is the set the rules were checked on while writing them; tau-airline (airline
customer-service tool calls, never looked at while writing rules) measures transfer.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import time
from collections import Counter
from pathlib import Path

from bosun.core.redact import Redactor

SHARED = Path(os.environ.get("BOSUN_SHARED", Path(__file__).resolve().parents[1].parent / "shared"))
IDS = {
    "git_sha40": re.compile(r"\b[0-9a-f]{40}\b"),
    "sha256": re.compile(r"\b[0-9a-f]{64}\b"),
    "short_sha": re.compile(r"\b[0-9a-f]{7,12}\b(?=.*\d)"),
    "uuid": re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--show", type=int, default=60, help="print this many redactions with context")
    ap.add_argument("--set", default="miniswe-dev", help="trajectory set under shared/data/trajectories")
    args = ap.parse_args()
    path = SHARED / "data" / "trajectories" / f"{args.set}.jsonl.gz"
    with gzip.open(path, "rt") as fh:
        runs = [json.loads(line) for line in fh]
    r = Redactor()
    texts: list[str] = []
    for run in runs:
        for call in run["calls"]:
            out = call.get("output") or ""
            texts.append(out if isinstance(out, str) else json.dumps(out))
            texts.append(json.dumps(call.get("args") or {}))
    total_bytes = sum(len(t.encode()) for t in texts)
    rule_counts: Counter[str] = Counter()
    touched = 0
    shown = 0
    ids_before: Counter[str] = Counter()
    ids_after: Counter[str] = Counter()
    t0 = time.perf_counter()
    outs = [r.redact(t) for t in texts]
    elapsed = time.perf_counter() - t0
    for text, out in zip(texts, outs, strict=True):
        for k, rx in IDS.items():
            ids_before[k] += len(rx.findall(text))
            ids_after[k] += len(rx.findall(out.text))
        if out.counts:
            touched += 1
            rule_counts.update(out.counts)
            if shown < args.show:
                for m in re.finditer(r"\[REDACTED:[a-z_0-9]+\]", out.text):
                    lo = max(0, m.start() - 80)
                    print(f"--- {m.group(0)} :: {out.text[lo:m.end() + 40]!r}")
                    shown += 1
    print()
    print(f"texts scanned: {len(texts)} ({total_bytes / 1e6:.1f} MB) in {elapsed:.2f}s "
          f"({elapsed / (total_bytes / 1e6) * 1000:.1f} ms/MB)")
    print(f"texts with any redaction: {touched} ({touched / len(texts):.3%})")
    print(f"redactions by rule: {dict(rule_counts)}")
    for k in IDS:
        print(f"{k}: {ids_before[k]} before, {ids_after[k]} after scrubbing")


if __name__ == "__main__":
    main()
