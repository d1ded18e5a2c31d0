"""Audit latency: bosun (lexical, warm) vs dokis 0.3.0 measured in the same run, plus 50x10 and semantic.

    /work/venv/bin/python bench/audit_speed.py

1. dokis's sample_audit.json (3 chunks, 3 claims), default config for both, interleaved rounds:
   each round times 200 bosun audits in-process and 200 dokis audits in its scratch venv
   ($DOKIS_PYTHON, default /tmp/dokis-venv/bin/python; timing is inside that process, so its
   start-up is not counted). Reported: per-round medians and the median of the per-round ratios.
2. 50 chunks x 10 claims (ExpertQA passages and claims): cold (new chunk set) and warm (same chunks).
3. The semantic matcher on the same 50x10, warm (model loaded, embeddings cached by content hash).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit_data import expertqa, shared_dir

from bosun.core.audit.audit import _CHUNK_CACHE, _INDEX_CACHE, audit
from bosun.core.audit.config import AuditConfig

DOKIS_PY = Path(os.environ.get("DOKIS_PYTHON", "/tmp/dokis-venv/bin/python"))
ROUNDS = 7
N = 200

DOKIS_TIMER = r"""
import json, sys, time, statistics, logging
logging.disable(logging.CRITICAL)
import dokis
d = json.loads(sys.stdin.read())
chunks = [dokis.Chunk(**c) for c in d["chunks"]]
mw = dokis.ProvenanceMiddleware(dokis.Config())
mw.audit(d["query"], chunks, d["response"])
times = []
for _ in range(int(sys.argv[1])):
    t = time.perf_counter(); mw.audit(d["query"], chunks, d["response"]); times.append(time.perf_counter() - t)
print(json.dumps(statistics.median(times)))
"""


def median_time(fn, n: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def sample_vs_dokis() -> list[str]:
    sample = json.loads((shared_dir() / "data" / "claims" / "dokis-samples" / "sample_audit.json").read_text())
    cfg = AuditConfig()
    rep = audit(sample["query"], sample["chunks"], sample["response"], cfg)
    assert len(rep["claims"]) == 3
    lines = ["### sample_audit.json (3 chunks, 3 claims), lexical matcher, warm", "",
             "| round | bosun median (ms) | dokis 0.3.0 median (ms) | ratio |", "|---:|---:|---:|---:|"]
    ratios = []
    for r in range(ROUNDS):
        b = median_time(lambda: audit(sample["query"], sample["chunks"], sample["response"], cfg), N)
        if DOKIS_PY.exists():
            out = subprocess.run([str(DOKIS_PY), "-c", DOKIS_TIMER, str(N)], input=json.dumps(sample),
                                 capture_output=True, text=True, check=True)
            d = json.loads(out.stdout)
            ratios.append(b / d)
            lines.append(f"| {r + 1} | {b * 1e3:.3f} | {d * 1e3:.3f} | {b / d:.2f} |")
        else:
            lines.append(f"| {r + 1} | {b * 1e3:.3f} | n/a | n/a |")
    if ratios:
        lines.append(f"\nmedian ratio bosun/dokis: **{statistics.median(ratios):.2f}x** (target < 0.5x)")
    return lines


def fifty_by_ten() -> tuple[list[dict], str]:
    data = expertqa()
    chunks: list[dict] = []
    seen: set[str] = set()
    claims: list[str] = []
    for ex in data:
        for c in ex.chunks:
            if c["content"] not in seen and len(chunks) < 50:
                seen.add(c["content"])
                chunks.append(c)
        if ex.label == 1 and len(claims) < 10 and any(c["content"] in seen for c in ex.chunks):
            claims.append(ex.claim.rstrip() if ex.claim.rstrip().endswith(".") else ex.claim.rstrip() + ".")
        if len(chunks) >= 50 and len(claims) >= 10:
            break
    return chunks, " ".join(claims)


def big() -> list[str]:
    chunks, response = fifty_by_ten()
    cfg = AuditConfig()
    lines = ["", "### 50 chunks x 10 claims (ExpertQA passages)", ""]
    colds = []
    for _ in range(20):
        _CHUNK_CACHE.clear()
        _INDEX_CACHE.clear()
        t = time.perf_counter()
        rep = audit("", chunks, response, cfg)
        colds.append(time.perf_counter() - t)
    n_claims = len(rep["claims"])
    warm = median_time(lambda: audit("", chunks, response, cfg), 200)
    lines.append(f"- lexical, cold (chunks never seen): median {statistics.median(colds) * 1e3:.2f} ms")
    lines.append(f"- lexical, warm (same chunks): median **{warm * 1e3:.2f} ms** ({len(chunks)} chunks, {n_claims} claims; target < 10 ms)")
    try:
        from bosun.core.embedding import CachingEmbedder
        from bosun.server.model import ModelSpec, load_embedder

        t = time.perf_counter()
        model = CachingEmbedder(load_embedder(Path(os.environ.get("BOSUN_HOME", str(Path.home() / ".bosun"))), ModelSpec()))
        load = time.perf_counter() - t
        scfg = AuditConfig(matcher="semantic")
        t = time.perf_counter()
        audit("", chunks, response, scfg, embed=model.embed)
        first = time.perf_counter() - t
        sem = median_time(lambda: audit("", chunks, response, scfg, embed=model.embed), 50)
        lines.append(f"- semantic, warm model + cached embeddings: median **{sem * 1e3:.2f} ms** "
                     f"(first call, embedding every sentence: {first * 1e3:.0f} ms; model load {load:.2f} s, paid once by the daemon)")
    except Exception as exc:  # report, do not hide
        lines.append(f"- semantic: not measured ({type(exc).__name__}: {exc})")
    return lines


if __name__ == "__main__":
    print("\n".join(sample_vs_dokis() + big()))
