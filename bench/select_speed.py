"""Speed of select_context, against a plain numpy greedy MMR measured in the same run.

    python bench/select_speed.py [--out bench/results/select_speed.md]

Candidates are real texts with cached vectors: HotpotQA passages, then WiCE sentences and MetaTool
queries (vectors cached by select_data.py and route_common.embed_cached) to reach 20,000.
- warm: 20 picks from 200, 2,000 and 20,000 candidates with the vectors in hand (core.select), medians
  of interleaved repetitions, as wall time and as this thread's CPU time (on a loaded machine the CPU
  time is the steadier of the two), and each method's ratio to the reference MMR on the same inputs;
  ``hybrid`` with the pool's lexical view already built (selecting again from a pool seen before), with
  it built in the call (a new pool), and with the forensic view of the rejections read as the tool does;
- tool path: the same through ``run_selection`` on an Engine whose embedding cache is warm
  (validation, token estimates, cache lookups by content hash included);
- cold: 200 short candidates never seen before, embedded by a fresh Engine.
"""

from __future__ import annotations

import os

# One BLAS thread: on this shared 2-core machine OpenBLAS's threads fight the other
# processes and a 2,000 x 384 product can take 50 ms instead of 0.1 ms. Set it before numpy loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_io import read_jsonl, shared_dir
from select_data import (
    bench_home,
    cached_vectors,
    embed_all,
    hotpot_cases,
    route_cached_vectors,
    wice_cases,
)

from bosun.core.embedding import Vectors
from bosun.core.selection import lexical as select_lexical
from bosun.core.selection.select import Params, Pool, select
from bosun.core.tokens import estimate_tokens

REPS = 60


def reference_mmr(goal: Vectors, cands: Vectors, k: int, lam: float = 0.7) -> list[int]:
    """Textbook greedy MMR in numpy: the yardstick (no budget, no forensics)."""
    rel = cands @ goal
    maxsim = np.full(len(cands), -np.inf, dtype=np.float32)
    chosen: list[int] = []
    avail = np.ones(len(cands), dtype=bool)
    for _ in range(k):
        red = np.where(np.isfinite(maxsim), maxsim, 0.0)
        score = np.where(avail, lam * rel - (1 - lam) * red, -np.inf)
        i = int(score.argmax())
        chosen.append(i)
        avail[i] = False
        maxsim = np.maximum(maxsim, cands @ cands[i])
    return chosen


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall ms, this thread's CPU ms) of one call."""
    w0, c0 = time.perf_counter(), time.thread_time()
    fn()
    return (time.perf_counter() - w0) * 1000, (time.thread_time() - c0) * 1000


def reps_for(n: int) -> int:
    return REPS if n <= 200 else (REPS // 2 if n <= 2000 else REPS // 6)


def bench_warm(goal_text: str, texts: list[str], vecs: dict[str, Vectors], lines: list[str]) -> None:
    goal = vecs[goal_text]
    cands = np.stack([vecs[t] for t in texts])
    tokens = [estimate_tokens(t) for t in texts]
    pool = Pool(goal=goal, candidates=cands, tokens=tokens, labels=[str(i) for i in range(len(texts))],
                candidate_texts=texts, goal_text=goal_text)
    params = Params(max_items=20)
    names = ["reference numpy MMR", "mmr", "psi0", "baseline", "hybrid (pool seen before)",
             "hybrid + forensic view read", "hybrid (new pool: lexical view built)"]
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    select(pool, 10**9, "hybrid", params)  # the pool's view, as after a first selection
    for _ in range(reps_for(len(texts))):
        runs["reference numpy MMR"].append(timed(lambda: reference_mmr(goal, cands, 20)))
        for s in ("mmr", "psi0", "baseline"):
            runs[s].append(timed(lambda s=s: select(pool, 10**9, s, params)))  # type: ignore[misc]
        runs["hybrid (pool seen before)"].append(timed(lambda: select(pool, 10**9, "hybrid", params)))
        runs["hybrid + forensic view read"].append(timed(lambda: select(pool, 10**9, "hybrid", params).rejected))
        select_lexical._VIEWS.clear()  # as if these candidates had never been selected from
        runs["hybrid (new pool: lexical view built)"].append(timed(lambda: select(pool, 10**9, "hybrid", params)))
    ref_w = statistics.median(w for w, _ in runs["reference numpy MMR"])
    ref_c = statistics.median(c for _, c in runs["reference numpy MMR"])
    for name, values in runs.items():
        w = statistics.median(v for v, _ in values)
        c = statistics.median(v for _, v in values)
        lines.append(f"| 20 of {len(texts):,} | {name} | {w:.3f} | {w / ref_w:.2f}x | {c:.3f} | {c / ref_c:.2f}x |")


def speed_texts(n: int) -> tuple[str, list[str], dict[str, Vectors]]:
    """A goal and up to ``n`` real texts with vectors: HotpotQA passages first (embedded once when no bench
    store holds them: ~2,600 passages; on a fresh machine the pool would otherwise be other texts and
    measure another workload), then WiCE sentences and MetaTool queries that are already cached, then
    as many more WiCE sentences as the largest pool needs, embedded once (the 20,000 row was skipped
    on machines whose bench stores held fewer vectors)."""
    cases = hotpot_cases()
    hotpot = [t for c in cases for t in c.candidates]
    goal = cases[0].goal
    vecs = cached_vectors([goal, *hotpot])
    missing = [t for t in dict.fromkeys([goal, *hotpot]) if t not in vecs]
    if missing:
        vecs.update(asyncio.run(embed_all(missing)))
    texts = [t for t in dict.fromkeys(hotpot) if t in vecs]
    if len(texts) < n:
        wice = list(dict.fromkeys(s for c in wice_cases() for s in c.candidates))
        more = cached_vectors(wice)
        queries = [r["query"] for r in read_jsonl(shared_dir() / "data" / "routing" / "metatool-queries-dev.jsonl.gz")]
        more.update(route_cached_vectors(queries))
        vecs.update(more)
        seen = set(texts)
        texts += [t for t in (*wice, *queries) if t in more and t not in seen and not seen.add(t)]  # type: ignore[func-returns-value]
        if len(texts) < n:  # fill the pool with WiCE sentences embedded now (cached for the next run)
            fill = [t for t in wice if t not in seen][: n - len(texts)]
            vecs.update(asyncio.run(embed_all(fill)))
            texts += [t for t in fill if t in vecs]
    return goal, texts[:n], vecs


async def bench_tool(goal_text: str, texts: list[str], lines: list[str]) -> None:
    from bosun.server.config import Config
    from bosun.server.engine import Engine
    from bosun.server.services.select import run_selection, to_result

    engine = Engine(Config(home=bench_home(), policies=[]))
    await engine.open()
    try:
        await run_selection(engine, goal_text, texts, None, 10**9, "mmr", Params(max_items=20))
        for strategy in ("mmr", "hybrid"):
            wall, cpu = [], []
            for _ in range(REPS // 3):
                w0, c0 = time.perf_counter(), time.thread_time()
                to_result(await run_selection(engine, goal_text, texts, None, 10**9, strategy, Params(max_items=20)))
                wall.append((time.perf_counter() - w0) * 1000)
                cpu.append((time.thread_time() - c0) * 1000)
            lines.append(f"| 20 of {len(texts)} | tool path, {strategy} (cached embeddings, answer built) | "
                         f"{statistics.median(wall):.3f} | | {statistics.median(cpu):.3f} | |")
    finally:
        await engine.close()


async def bench_cold(lines: list[str]) -> None:
    from bosun.server.config import Config
    from bosun.server.engine import Engine
    from bosun.server.services.select import run_selection

    stamp = time.time_ns()
    texts = [f"note {stamp} {i}: retry the upload with backoff when the server answers {500 + i % 4}" for i in range(200)]
    with tempfile.TemporaryDirectory() as home:
        engine = Engine(Config(home=Path(home), policies=[]))
        await engine.open()
        try:
            await engine.embedder()  # model load is not part of the selection
            t0 = time.perf_counter()
            out = await run_selection(engine, "how should uploads retry", texts, None, 10**9, "hybrid",
                                      Params(max_items=20))
            total = (time.perf_counter() - t0) * 1000
            lines.append(f"| 20 of 200 | cold: embed 200 short candidates + hybrid | {total:.1f} | "
                         f"embed {out.timings_ms.get('embed', 0):.1f} ms | | |")
        finally:
            await engine.close()


def main() -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, help="also write the table to this markdown file")
    ap.add_argument("--sizes", default="200,2000,20000", help="pool sizes (comma-separated)")
    ap.add_argument("--no-tool", action="store_true", help="skip the tool-path and cold rows")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    goal_text, texts, vecs = speed_texts(max(sizes))
    lines = ["| pool | method | median ms (wall) | vs reference | median ms (CPU) | vs reference |",
             "|---|---|---:|---:|---:|---:|"]
    for n in sizes:
        if len(texts) < n:
            lines.append(f"| 20 of {n:,} | not run: only {len(texts):,} texts have cached vectors | | | | |")
            continue
        bench_warm(goal_text, texts[:n], vecs, lines)
        print(lines[-1], file=sys.stderr, flush=True)
    if not args.no_tool:
        asyncio.run(bench_tool(goal_text, texts[:200], lines))
        asyncio.run(bench_cold(lines))
    print("\n".join(lines))
    load = os.getloadavg()
    print(f"\nload average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min)")
    if args.out:
        args.out.write_text(
            "# select_context speed\n\nCommand: `python bench/select_speed.py --out "
            "bench/results/select_speed.md` (one BLAS thread, set by the script). Candidates are real "
            f"texts (HotpotQA passages, then WiCE sentences and MetaTool queries); medians of {REPS} / "
            f"{REPS // 2} / {REPS // 6} interleaved runs at 200 / 2,000 / 20,000 (tool path: {REPS // 3}); "
            f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} on a shared 2-core machine.\n\n"
            + "\n".join(lines) + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
