"""Error and cost of the sampled token estimate that observe uses on large payloads.

``fast_tokens`` estimates a payload over 96,000 characters from short slices instead of running
the estimator over every character. This compares it with the full ``estimate_tokens`` on
payloads of 100 KB-1 MB cut from real agent output (consecutive miniswe-dev tool outputs, as a
long session's log would be), and times both on the largest.

    python bench/token_sampling.py [--payloads 120] [--seed 7 --seed 11 --seed 23]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from bench_io import read_jsonl, shared_dir

from bosun.core.offload.offload import fast_tokens
from bosun.core.tokens import estimate_tokens

DATA = shared_dir() / "data" / "trajectories" / "miniswe-dev.jsonl.gz"
SIZES = (100_000, 200_000, 500_000, 1_000_000)


def outputs() -> list[str]:
    return [c["output"] for run in read_jsonl(DATA) for c in run["calls"] if c.get("output")]


def payloads(outs: list[str], count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        size = rng.choice(SIZES)
        i = rng.randrange(len(outs))
        parts: list[str] = []
        total = 0
        while total < size:
            parts.append(outs[i % len(outs)])
            total += len(parts[-1])
            i += 1
        out.append("\n".join(parts)[:size])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--payloads", type=int, default=120)
    ap.add_argument("--seed", type=int, action="append")
    args = ap.parse_args()
    outs = outputs()
    errors: list[float] = []
    for seed in args.seed or [7, 11, 23]:
        for p in payloads(outs, args.payloads, seed):
            exact = estimate_tokens(p)
            errors.append(abs(fast_tokens(p) - exact) / exact)
    errors.sort()
    big = payloads(outs, 8, 3)[0]
    big = (big * (1_000_000 // len(big) + 1))[:1_000_000]
    full, sampled = [], []
    for _ in range(9):
        t0 = time.perf_counter()
        estimate_tokens(big)
        full.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        fast_tokens(big)
        sampled.append(time.perf_counter() - t0)
    print(f"{len(errors)} payloads of 100 KB-1 MB: |sampled - full| / full "
          f"median {statistics.median(errors):.1%}, p90 {errors[int(0.9 * len(errors))]:.1%}, max {errors[-1]:.1%}")
    print(f"1 MB: full estimate {statistics.median(full) * 1000:.1f} ms, sampled {statistics.median(sampled) * 1000:.2f} ms")


if __name__ == "__main__":
    main()
