"""Speed of select_context, against a plain numpy greedy MMR measured in the same run.

    /work/venv/bin/python bench/select_speed.py

Candidates are real HotpotQA passages (their embeddings cached by select_data.py).
- warm: 20 of 200 and 20 of 2,000 with the vectors in hand (core.select), medians of
  interleaved repetitions, and the ratio to the reference MMR on the same inputs;
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

from select_data import bench_home, embed_all, hotpot_cases

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


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def bench_warm(goal_text: str, texts: list[str], vecs: dict[str, Vectors], lines: list[str]) -> None:
    goal = vecs[goal_text]
    cands = np.stack([vecs[t] for t in texts])
    tokens = [estimate_tokens(t) for t in texts]
    pool = Pool(goal=goal, candidates=cands, tokens=tokens, labels=[str(i) for i in range(len(texts))],
                candidate_texts=texts, goal_text=goal_text)
    params = Params(max_items=20)
    runs: dict[str, list[float]] = {"reference numpy MMR": [], "mmr": [], "psi0": [], "baseline": [],
                                    "hybrid (pool seen before)": [], "hybrid (new pool: lexical view built)": []}
    for _ in range(REPS):
        runs["reference numpy MMR"].append(timed(lambda: reference_mmr(goal, cands, 20)))
        for s in ("mmr", "psi0", "baseline"):
            runs[s].append(timed(lambda s=s: select(pool, 10**9, s, params)))  # type: ignore[misc]
        runs["hybrid (pool seen before)"].append(timed(lambda: select(pool, 10**9, "hybrid", params)))
        select_lexical._VIEWS.clear()  # as if these candidates had never been selected from
        runs["hybrid (new pool: lexical view built)"].append(timed(lambda: select(pool, 10**9, "hybrid", params)))
    ref = statistics.median(runs["reference numpy MMR"])
    for name, values in runs.items():
        med = statistics.median(values)
        lines.append(f"| 20 of {len(texts)} | {name} | {med:.3f} | {med / ref:.2f}x |")


async def bench_tool(goal_text: str, texts: list[str], lines: list[str]) -> None:
    from bosun.server.config import Config
    from bosun.server.engine import Engine
    from bosun.server.services.select import run_selection

    engine = Engine(Config(home=bench_home(), policies=[]))
    await engine.open()
    try:
        await run_selection(engine, goal_text, texts, None, 10**9, "mmr", Params(max_items=20))
        for strategy in ("mmr", "hybrid"):
            values = []
            for _ in range(REPS // 3):
                t0 = time.perf_counter()
                await run_selection(engine, goal_text, texts, None, 10**9, strategy, Params(max_items=20))
                values.append((time.perf_counter() - t0) * 1000)
            lines.append(f"| 20 of {len(texts)} | tool path, {strategy} (cached embeddings) | "
                         f"{statistics.median(values):.3f} | |")
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
                         f"embed {out.timings_ms.get('embed', 0):.1f} ms |")
        finally:
            await engine.close()


def main() -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, help="also write the table to this markdown file")
    args = ap.parse_args()
    cases = hotpot_cases()
    texts = [t for c in cases for t in c.candidates]
    goal_text = cases[0].goal
    vecs = asyncio.run(embed_all([goal_text, *texts]))
    lines = ["| pool | method | median ms | vs reference |", "|---|---|---:|---:|"]
    bench_warm(goal_text, texts[:200], vecs, lines)
    bench_warm(goal_text, texts[:2000], vecs, lines)
    asyncio.run(bench_tool(goal_text, texts[:200], lines))
    asyncio.run(bench_cold(lines))
    print("\n".join(lines))
    if args.out:
        load = os.getloadavg()[0]
        args.out.write_text(
            "# select_context speed\n\nCommand: `/work/venv/bin/python bench/select_speed.py --out "
            "bench/results/select_speed.md` (one BLAS thread, set by the script). Candidates are real "
            f"HotpotQA passages; medians of {REPS} interleaved runs (tool path: {REPS // 3}); "
            f"load average {load:.1f} on a shared 2-core machine.\n\n" + "\n".join(lines) + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
