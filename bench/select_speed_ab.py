"""select_context speed, this checkout against an earlier revision, interleaved in one process.

    python bench/select_speed_ab.py [--rev be9025b] [--out FILE]

On a shared machine the load moves between runs by 30-50%; timing both versions (and the
reference numpy MMR of select_speed.py) in the same loop keeps the comparison fair. Times are this
thread's CPU time (``time.thread_time``), the steadier measure on a loaded machine. The old
``core/selection/select.py`` and ``core/selection/lexical.py`` are read with ``git show REV:...`` into a
temporary package. Same inputs as select_speed.py: real HotpotQA passages, cached embeddings.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import asyncio
import importlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from select_data import embed_all, hotpot_cases
from select_speed import reference_mmr

import bosun.core.selection.select as current
from bosun.core.selection import lexical as select_lexical
from bosun.core.tokens import estimate_tokens

REPO = Path(__file__).resolve().parents[1]
REPS = 100


def load_old(rev: str, into: Path) -> tuple[ModuleType, ModuleType]:
    """``core/selection/select.py`` and ``core/selection/lexical.py`` at ``rev``, importable as ``select_old``."""
    pkg = into / "select_old"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name, moved in (("select", "selection/select"), ("select_lexical", "selection/lexical")):
        shown = subprocess.run(["git", "show", f"{rev}:core/{moved}.py"], cwd=REPO, capture_output=True, text=True)
        if shown.returncode != 0:  # a revision from before the wings
            shown = subprocess.run(["git", "show", f"{rev}:core/{name}.py"], cwd=REPO, check=True,
                                   capture_output=True, text=True)
        src = shown.stdout.replace("bosun.core.selection.lexical", "select_old.select_lexical")
        (pkg / f"{name}.py").write_text(src.replace("bosun.core.select_lexical", "select_old.select_lexical"))
    sys.path.insert(0, str(into))
    return importlib.import_module("select_old.select"), importlib.import_module("select_old.select_lexical")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rev", default="be9025b", help="the earlier revision (default: before the speed-up)")
    ap.add_argument("--out", type=Path, help="also write the table to this markdown file")
    args = ap.parse_args()
    cases = hotpot_cases()
    texts = [t for c in cases for t in c.candidates]
    goal_text = cases[0].goal
    vecs = asyncio.run(embed_all([goal_text, *texts]))
    lines = [f"| pool | method | {args.rev} CPU ms | this checkout CPU ms | speed-up |", "|---|---|---:|---:|---:|"]
    with tempfile.TemporaryDirectory() as tmp:
        old, old_lex = load_old(args.rev, Path(tmp))
        versions: list[tuple[Any, ModuleType]] = [(old, old_lex), (current, select_lexical)]
        for n in (200, 2000):
            sub = texts[:n]
            fields = dict(goal=vecs[goal_text], candidates=np.stack([vecs[t] for t in sub]),
                          tokens=[estimate_tokens(t) for t in sub], labels=[str(i) for i in range(n)],
                          candidate_texts=sub, goal_text=goal_text)
            runs: dict[tuple[str, int], list[float]] = {}
            ref: list[float] = []
            for _ in range(REPS):
                t0 = time.thread_time()
                reference_mmr(fields["goal"], fields["candidates"], 20)
                ref.append((time.thread_time() - t0) * 1000)
                for v, (mod, lex) in enumerate(versions):
                    pool, params = mod.Pool(**fields), mod.Params(max_items=20)
                    for name in ("mmr", "psi0", "hybrid", "hybrid-new"):
                        if name == "hybrid-new":
                            lex._VIEWS.clear()  # as if these candidates had never been selected from
                        t0 = time.thread_time()
                        mod.select(pool, 10**9, name.removesuffix("-new"), params)
                        runs.setdefault((name, v), []).append((time.thread_time() - t0) * 1000)
            r = statistics.median(ref)
            lines.append(f"| 20 of {n} | reference numpy MMR | {r:.3f} | {r:.3f} | |")
            for name in ("mmr", "psi0", "hybrid", "hybrid-new"):
                a, b = statistics.median(runs[(name, 0)]), statistics.median(runs[(name, 1)])
                label = {"hybrid": "hybrid (pool seen before)", "hybrid-new": "hybrid (new pool)"}.get(name, name)
                lines.append(f"| 20 of {n} | {label} | {a:.3f} ({a / r:.2f}x) | {b:.3f} ({b / r:.2f}x) | "
                             f"{a / b:.2f}x |")
    print("\n".join(lines))
    if args.out:
        load = os.getloadavg()[0]
        args.out.write_text(
            f"# select_context speed: this checkout against {args.rev}\n\nCommand: `python "
            f"bench/select_speed_ab.py --rev {args.rev} --out {args.out}` (one BLAS thread). Both versions and "
            f"the reference run interleaved in one process, medians of {REPS} (CPU time); in brackets the ratio to the "
            f"reference; load average {load:.1f} on a shared 2-core machine.\n\n" + "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
