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
the per-round ratios. The semantic (default) matcher is timed warm with the real model and cached
embeddings, and cold with the embedding time counted separately (it depends on the model's load);
the token alignment (the default whenever the model's ONNX session is at hand) is timed against the
semantic matcher without it, interleaved, and the word states of new texts separately.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit_data import expertqa

from bosun.core.audit.align import encoder_from_embedder
from bosun.core.audit.audit import audit, plan_audit
from bosun.core.audit.config import AuditConfig
from bosun.core.audit.index import clear_caches

DOKIS_PY = Path(os.environ.get("DOKIS_PYTHON", "/tmp/dokis-venv/bin/python"))
ROUNDS = 5

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
    """The default matcher with the real model: model load, first (embedding) call, warm calls."""
    try:
        from bosun.core.embedding import CachingEmbedder
        from bosun.server.model import ModelSpec, load_embedder
    except ImportError as exc:
        return [f"- semantic: not measured ({exc})"]
    t = time.perf_counter()
    model = CachingEmbedder(load_embedder(Path(os.environ.get("BOSUN_HOME", str(Path.home() / ".bosun"))), ModelSpec()))
    load = time.perf_counter() - t
    cfg = AuditConfig()
    response = " ".join(claims[:10])
    lines = [f"- semantic (default): model load {load:.2f} s (paid once by the daemon, at start)"]
    encoder = encoder_from_embedder(model)
    for n_chunks in (10, 100, 641):
        part = chunks[:n_chunks]
        clear_caches()
        t = time.perf_counter()
        audit("", part, response, cfg, embed=model.embed)
        first = time.perf_counter() - t
        warm = median_time(lambda part=part: audit("", part, response, cfg, embed=model.embed), 20)
        lines.append(f"- semantic without token alignment, 10 claims x {n_chunks} chunks: first call {first * 1e3:.0f} ms "
                     f"(embeds the claims and their candidate sentences only), warm median **{warm * 1e3:.2f} ms**")
        if encoder is None:
            lines.append("- token alignment: the model exposes no ONNX session, not measured")
            continue
        texts = plan_audit("", part, response, cfg).texts_to_embed()
        encoder._cache.clear()
        t = time.perf_counter()
        encoder.encode(texts)
        states = time.perf_counter() - t
        rounds: list[tuple[float, float]] = []
        for _ in range(ROUNDS):  # interleaved: without, with
            off = median_time(lambda part=part: audit("", part, response, cfg, embed=model.embed), 10)
            on = median_time(lambda part=part: audit("", part, response, cfg, embed=model.embed, words=encoder.encode), 10)
            rounds.append((off, on))
        off_m = statistics.median(r[0] for r in rounds)
        on_m = statistics.median(r[1] for r in rounds)
        ratio = statistics.median(r[1] / r[0] for r in rounds)
        lines.append(f"- default (semantic + token alignment), 10 claims x {n_chunks} chunks: word states of "
                     f"{len(texts)} texts {states * 1e3:.0f} ms when new (paid once per text, cached by digest); "
                     f"warm median **{on_m * 1e3:.2f} ms** vs {off_m * 1e3:.2f} ms without (**{ratio:.2f}x**, "
                     f"median of {ROUNDS} interleaved rounds)")
    return lines


def main() -> None:
    chunks, claims = corpus()
    total = sum(len(c["content"]) for c in chunks)
    print(f"### 10 claims against 10 / 100 / 641 chunks ({total / 1e3:.0f} KB of ExpertQA passages)\n")
    print("\n".join(versus_dokis(chunks, claims)))
    print()
    print("\n".join(fifty_by_ten(chunks, claims)))
    print("\n".join(semantic(chunks, claims)))


if __name__ == "__main__":
    main()
