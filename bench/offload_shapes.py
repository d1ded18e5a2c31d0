"""observe of outputs with awkward shapes, beside a baseline measured in the same run.

Real tool output is mostly short lines of text; this bench is for the rest, where a per-hit or per-line
cost in Python turns quadratic: 1 MB on one line, a secret shape every few bytes, 200,000 blank lines,
JSON nested 50,000 levels deep. Each shape is observed in process (``observe_output``: redaction,
measuring, outline, stub, journal) and, repeated to 6 MB, through the offload worker's file path
(``observe_files`` with windows: what a huge output takes), beside sha256 + one store put of the same bytes.
A shape whose time per MB grows with the size, or that fails, is a defect.

    python bench/offload_shapes.py [--mb 1] [--repeat 3] [--worker-x 6] [--only blank_lines,urls]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bosun.core.embedding import HashEmbedder
from bosun.server.config import Config
from bosun.server.engine import Engine
from bosun.server.offload_worker import observe_files


def shapes(size: int) -> dict[str, Callable[[], str]]:
    """Name -> a text of about ``size`` bytes (built on demand)."""
    rng = random.Random(1)
    return {
        "random text (reference)": lambda: "".join(rng.choice("abcdefghij \n=:/_-") for _ in range(size)),
        "blank lines": lambda: "x\n" + "\n" * size,
        "one line, no newline": lambda: "a" * size,
        "two-byte lines": lambda: "a\n" * (size // 2),
        "every line an error": lambda: "ERROR failed here\n" * (size // 18),
        "credential words, one line": lambda: "key token secret password passw " * (size // 32),
        "api_key = , one line": lambda: "api_key = " * (size // 10),
        "password assignments, one line": lambda: "password=hunter2 " * (size // 17),
        "URLs with passwords, one line": lambda: "https://user:pw@host.example.com/x " * (size // 36),
        "eyJ fragments, one line": lambda: "eyJhbGciOi." * (size // 11),
        "JSON 50,000 levels deep": lambda: "[" * 50_000 + "]" * 50_000,
        "JSON list of records": lambda: json.dumps([{"a": i, "b": "x" * 10} for i in range(size // 25)]),
        "spaces only": lambda: " " * size,
        "CRLF lines": lambda: "line\r\n" * (size // 6),
        "non-ASCII lines": lambda: "é✓漢\n" * (size // 11),
        "tracebacks": lambda: ('Traceback (most recent call last):\n  File "x.py", line 1, in <module>\n'
                               "ValueError: bad\n") * (size // 90),
    }


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=1.0, help="size of each in-process observe")
    ap.add_argument("--repeat", type=int, default=3, help="observes per shape (median)")
    ap.add_argument("--worker-x", type=int, default=6, help="the worker's file is the text this many times")
    ap.add_argument("--only", default="", help="comma-separated shape names (a prefix is enough)")
    args = ap.parse_args()
    size = int(args.mb * 1_000_000)
    engine = Engine(Config(home=Path(tempfile.mkdtemp(prefix="bosun-shapes-")), policies=[]),
                    embedder_factory=lambda _c: HashEmbedder(8))
    await engine.open(watch_policies=False)
    base_engine = Engine(Config(home=Path(tempfile.mkdtemp(prefix="bosun-shapes-base-")), policies=[]),
                         embedder_factory=lambda _c: HashEmbedder(8))
    await base_engine.open(watch_policies=False)
    tid = (await engine.tasks.start(objective="shapes")).task_id
    work = Path(tempfile.mkdtemp(prefix="bosun-shapes-files-"))
    wanted = [w.strip() for w in args.only.split(",") if w.strip()]
    print(f"Command: `python bench/offload_shapes.py --mb {args.mb:g} --repeat {args.repeat} --worker-x "
          f"{args.worker_x}`; load average {os.getloadavg()[0]:.1f} at start\n")
    print(f"| shape | bytes | sha256 + put (baseline) | observe | vs baseline | observe, failed | "
          f"worker, {args.worker_x}x on file | worker ms per MB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, make in shapes(size).items():
        if wanted and not any(name.startswith(w) for w in wanted):
            continue
        text = make()
        base: list[float] = []
        ok: list[float] = []
        failed: list[float] = []
        error = ""
        for i in range(args.repeat):
            variant = text + f"\nrun {i}\n"  # fresh bytes: no INSERT OR IGNORE shortcut
            t0 = time.perf_counter()
            data = variant.encode()
            hashlib.sha256(data).hexdigest()
            await base_engine.refs.put(data)
            base.append(time.perf_counter() - t0)
            try:
                t0 = time.perf_counter()
                await engine.observe.observe_output(tid, False, "bash", {"command": "x"}, variant)
                ok.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                await engine.observe.observe_output(tid, True, "bash", {"command": "x"}, variant + "!")
                failed.append(time.perf_counter() - t0)
            except Exception as exc:  # a defect this bench exists to show
                error = f"{type(exc).__name__}: {str(exc)[:60]}"
                break
        src = work / "src"
        big = (text * args.worker_x).encode()
        src.write_bytes(big)
        t0 = time.perf_counter()
        try:
            observe_files({"sources": [{"path": str(src)}], "out": str(work / "out"), "window_above": 0,
                           "failed": True})
            worker = f"{(time.perf_counter() - t0) * 1000:.0f} ms"
            per_mb = f"{(time.perf_counter() - t0) * 1000 / (len(big) / 1e6):.0f}"
        except Exception as exc:
            worker, per_mb = f"{type(exc).__name__}", ""
        b = statistics.median(base) * 1000
        if error:
            print(f"| {name} | {len(text.encode()):,} | {b:.1f} ms | FAILS ({error}) | | | {worker} | {per_mb} |")
            continue
        o, f = statistics.median(ok) * 1000, statistics.median(failed) * 1000
        print(f"| {name} | {len(text.encode()):,} | {b:.1f} ms | {o:.1f} ms | {o / b:.1f}x | {f:.1f} ms | "
              f"{worker} | {per_mb} |", flush=True)
    await engine.close()
    await base_engine.close()
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    asyncio.run(main())
