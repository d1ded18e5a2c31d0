"""Audit latency against dokis 0.3.0 measured in the same run: 10 claims x 10 / 100 / 641 chunks, and 50 x 10.

    .venv/bin/python bench/audit_speed.py

Chunks are unique ExpertQA-dev passages (641 of them, 543 KB), claims are 10 supported ExpertQA
claims whose passages are among the first chunks. dokis runs in its scratch venv ($DOKIS_PYTHON,
default /tmp/dokis-venv/bin/python; `pip install dokis==0.3.0` there, never a bosun dependency);
its timing is taken inside that process, so process start-up is not counted.

- warm: the same chunk set again (bosun: analysis and index cached by chunk digest; dokis: the same
  ProvenanceMiddleware, whose BM25 index is cached by chunk set);
- cold: chunks never seen (bosun: caches cleared; dokis: a new ProvenanceMiddleware).
Rounds are interleaved (bosun, dokis, bosun, ...); reported: medians per round and the median of
the per-round ratios. The first table is the lexical matcher (``bm25``). The second is the default
matcher (semantic + token alignment, as the daemon runs it: one model pass per new text gives its
sentence vector and its token states) against dokis in the same run: warm (every text seen before:
cache lookups), beside the semantic matcher without the alignment; cold (chunks and texts never
seen, so the model runs over the claims and their candidate sentences), beside round 3's two model
passes. BLAS runs one thread, as in the daemon (server/cli.py sets OPENBLAS_NUM_THREADS=1).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the daemon (server/cli.py), before numpy loads

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit_data import expertqa

from bosun.core.audit.align import encoder_from_embedder, one_pass_words
from bosun.core.audit.audit import audit, plan_audit
from bosun.core.audit.config import AuditConfig
from bosun.core.audit.index import clear_caches

DOKIS_PY = Path(os.environ.get("DOKIS_PYTHON", "/tmp/dokis-venv/bin/python"))
ROUNDS = 5
COLD_ROUNDS = 3

DOKIS_TIMER = r"""
import json, sys, time, statistics, logging
logging.disable(logging.CRITICAL)
import dokis
d = json.loads(sys.stdin.read())
chunks = [dokis.Chunk(**c) for c in d["chunks"]]
n, cold = int(sys.argv[1]), sys.argv[2] == "cold"
mw = dokis.ProvenanceMiddleware(dokis.Config())
mw.audit("", chunks, d["response"])
times = []
for _ in range(n):
    if cold:
        mw = dokis.ProvenanceMiddleware(dokis.Config())
    t = time.perf_counter(); mw.audit("", chunks, d["response"]); times.append(time.perf_counter() - t)
print(json.dumps(statistics.median(times)))
"""


def corpus() -> tuple[list[dict[str, Any]], list[str]]:
    """641 unique ExpertQA passages and the supported claims that cite the earliest of them."""
    data = expertqa(own_evidence=False)
    chunks: list[dict[str, Any]] = []
    seen: set[str] = set()
    for ex in data:
        for c in ex.chunks:
            if c["content"] not in seen:
                seen.add(c["content"])
                chunks.append({"content": c["content"], "source_url": c["source_url"]})
    first10 = {c["content"] for c in chunks[:10]}
    near = [ex.claim.strip() for ex in data if ex.label == 1 and any(c["content"] in first10 for c in ex.chunks)]
    rest = [ex.claim.strip() for ex in data if ex.label == 1 and len(ex.claim.split()) >= 8]
    claims = [c if c.endswith(".") else c + "." for c in dict.fromkeys(near + rest)]
    return chunks[:641], claims


def median_time(fn: Callable[[], Any], n: int, before: Callable[[], None] | None = None) -> float:
    times = []
    for _ in range(n):
        if before:
            before()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def dokis_time(chunks: list[dict[str, Any]], response: str, n: int, cold: bool) -> float | None:
    if not DOKIS_PY.exists():
        return None
    out = subprocess.run([str(DOKIS_PY), "-c", DOKIS_TIMER, str(n), "cold" if cold else "warm"],
                         input=json.dumps({"chunks": chunks, "response": response}),
                         capture_output=True, text=True, check=True)
    return float(json.loads(out.stdout))


def versus_dokis(chunks: list[dict[str, Any]], claims: list[str]) -> list[str]:
    cfg = AuditConfig(matcher="bm25")
    response = " ".join(claims[:10])
    lines = ["| chunks | claims | mode | bosun bm25 median (ms) | dokis 0.3.0 median (ms) | ratio (median of rounds) |",
             "|---:|---:|---|---:|---:|---:|"]
    for n_chunks in (10, 100, 641):
        part = chunks[:n_chunks]
        n_claims = len(audit("", part, response, cfg)["claims"])
        for mode in ("warm", "cold"):
            reps = 30 if n_chunks < 641 else 10
            b_all, d_all, ratios = [], [], []
            for _ in range(ROUNDS):
                b = median_time(lambda part=part: audit("", part, response, cfg), reps,
                                clear_caches if mode == "cold" else None)
                d = dokis_time(part, response, reps, mode == "cold")
                b_all.append(b)
                if d is not None:
                    d_all.append(d)
                    ratios.append(b / d)
            dok = f"{statistics.median(d_all) * 1e3:.2f}" if d_all else "n/a"
            ratio = f"**{statistics.median(ratios):.2f}x**" if ratios else "n/a"
            lines.append(f"| {n_chunks} | {n_claims} | {mode} | {statistics.median(b_all) * 1e3:.2f} | {dok} | {ratio} |")
    return lines


def fifty_by_ten(chunks: list[dict[str, Any]], claims: list[str]) -> list[str]:
    cfg = AuditConfig(matcher="bm25")
    part = chunks[:50]
    response = " ".join(claims[:10])
    n_claims = len(audit("", part, response, cfg)["claims"])
    warm = median_time(lambda: audit("", part, response, cfg), 100)
    cold = median_time(lambda: audit("", part, response, cfg), 20, clear_caches)
    return [f"- 50 chunks x {n_claims} claims, bm25: warm median **{warm * 1e3:.2f} ms** (target < 10 ms), "
            f"cold {cold * 1e3:.2f} ms"]


def semantic(chunks: list[dict[str, Any]], claims: list[str]) -> list[str]:
    """The default matcher (semantic + token alignment) with the real model, against dokis in the same run:
    warm (every text seen before) and cold (chunks and texts never seen: the model runs), beside the
    semantic matcher without the alignment (warm) and the previous two-pass way (cold: ``embed`` and the
    token states as two model runs)."""
    try:
        from bosun.core.embedding import CachingEmbedder
        from bosun.server.model import ModelSpec, load_embedder
    except ImportError as exc:
        return [f"- semantic: not measured ({exc})"]
    t = time.perf_counter()
    model = CachingEmbedder(load_embedder(Path(os.environ.get("BOSUN_HOME", str(Path.home() / ".bosun"))), ModelSpec()))
    load = time.perf_counter() - t
    encoder = encoder_from_embedder(model)
    if encoder is None:
        return ["- semantic: the model gives no token states, not measured"]
    cfg = AuditConfig()
    response = " ".join(claims[:10])
    one_pass = one_pass_words(encoder, model)

    def default(part: list[dict[str, Any]]) -> Any:
        return audit("", part, response, cfg, embed=model.embed, words=one_pass)

    def two_pass(part: list[dict[str, Any]]) -> Any:  # round 3: token states, then embed runs the model again
        return audit("", part, response, cfg, embed=model.embed, words=encoder.encode)

    def no_align(part: list[dict[str, Any]]) -> Any:
        return audit("", part, response, cfg, embed=model.embed)

    def forget() -> None:
        clear_caches()
        encoder.clear()
        model.clear()

    lines = [f"model load {load:.2f} s (paid once by the daemon, at start); OPENBLAS_NUM_THREADS="
             f"{os.environ.get('OPENBLAS_NUM_THREADS')}, model threads {ModelSpec().threads}\n",
             "| chunks | texts embedded | mode | default: semantic + alignment (ms) | semantic, no alignment (ms) "
             "| dokis 0.3.0 (ms) | default / dokis (median of rounds) | default / no alignment |",
             "|---:|---:|---|---:|---:|---:|---:|---:|"]
    for n_chunks in (10, 100, 641):
        part = chunks[:n_chunks]
        n_texts = len(plan_audit("", part, response, cfg).texts_to_embed())
        default(part)
        on_all, off_all, d_all, r_dokis, r_off = [], [], [], [], []
        for _ in range(ROUNDS):  # interleaved: default, no alignment, dokis
            on = median_time(lambda part=part: default(part), 10)
            off = median_time(lambda part=part: no_align(part), 10)
            d = dokis_time(part, response, 10, False)
            on_all.append(on)
            off_all.append(off)
            r_off.append(on / off)
            if d is not None:
                d_all.append(d)
                r_dokis.append(on / d)
        lines.append(_row(n_chunks, n_texts, "warm", on_all, off_all, d_all, r_dokis, r_off))
        on_all, off_all, d_all, r_dokis, r_off = [], [], [], [], []
        for _ in range(COLD_ROUNDS):  # interleaved: one pass, two passes, dokis
            on = median_time(lambda part=part: default(part), 1, forget)
            off = median_time(lambda part=part: two_pass(part), 1, forget)
            d = dokis_time(part, response, 3, True)
            on_all.append(on)
            off_all.append(off)
            r_off.append(on / off)
            if d is not None:
                d_all.append(d)
                r_dokis.append(on / d)
        lines.append(_row(n_chunks, n_texts, "cold (model runs)", on_all, off_all, d_all, r_dokis, r_off,
                          "two model passes (round 3)"))
    return lines


def _row(n_chunks: int, n_texts: int, mode: str, on: list[float], off: list[float], dokis: list[float],
         r_dokis: list[float], r_off: list[float], off_name: str = "") -> str:
    dok = f"{statistics.median(dokis) * 1e3:.1f}" if dokis else "n/a"
    rd = f"**{statistics.median(r_dokis):.2f}x**" if r_dokis else "n/a"
    off_cell = f"{statistics.median(off) * 1e3:.1f}" + (f" ({off_name})" if off_name else "")
    return (f"| {n_chunks} | {n_texts} | {mode} | {statistics.median(on) * 1e3:.1f} | {off_cell} | {dok} | {rd} "
            f"| {statistics.median(r_off):.2f}x |")


def main() -> None:
    print(f"({_load()}, {os.cpu_count()} cores)\n")
    chunks, claims = corpus()
    total = sum(len(c["content"]) for c in chunks)
    print(f"### 10 claims against 10 / 100 / 641 chunks ({total / 1e3:.0f} KB of ExpertQA passages)\n")
    print("\n".join(versus_dokis(chunks, claims)))
    print()
    print("\n".join(fifty_by_ten(chunks, claims)))
    print(f"\n### the default matcher (semantic + token alignment), 10 claims ({_load()})\n")
    print("\n".join(semantic(chunks, claims)))
    print(f"\n(load at the end: {_load()})")


def _load() -> str:
    return "load average " + " / ".join(f"{x:.1f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
