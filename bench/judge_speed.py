"""What the judge costs, against the same run without it (BOSUN_JUDGE=off). Medians; run by hand.

    .venv/bin/python bench/judge_speed.py [--docs 1000] [--queries 40] [--rounds 2]
    .venv/bin/python bench/judge_speed.py --judge-dir DIR --audit-only   # a candidate judge: audit cost only

* route over MCP at ``--docs`` documents (bench/route_speed.py's corpus and client), judge on vs off,
  rounds interleaved; the ratio of the medians;
* audit of 10 claims x 20 chunks (ExpertQA passages), run_audit alone with warm embeddings: the judge's added
  time (one onnxruntime thread, as the daemon's default BOSUN_MODEL_THREADS=1);
* resident memory: a fresh process's RSS after loading the embedder, then after loading the judge too;
* start: Engine.open -> embedder ready, with and without the judge loading beside it.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the daemon (server/cli.py), before numpy loads

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit_data import expertqa
from route_common import metatool_queries
from route_speed import bench_size

from bosun.server.config import Config
from bosun.server.engine import Engine

RSS_SCRIPT = r"""
import resource, sys, tempfile
from pathlib import Path
def rss():
    return int(next(l for l in open('/proc/self/status') if l.startswith('VmRSS')).split()[1]) / 1024
from bosun.server.model import load_embedder
emb = load_embedder(Path(tempfile.mkdtemp()))
emb.embed(["warm up the embedder"])
a = rss()
from bosun.server.judge_model import load_shipped
j = load_shipped()
j.claim_probs([("warm up", "the judge " * 60)] * 8)
j.relevance([("warm up", "the judge")] * 10)
print(f"{a:.1f} {rss():.1f}")
"""


async def start_time(judge: str) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        eng = Engine(Config(home=Path(tmp), policies=[], judge=judge))
        t0 = time.perf_counter()
        await eng.open(watch_policies=False)
        await eng.embedder()
        took = time.perf_counter() - t0
        await eng.judge()
        await eng.close()
        return took


def audit_cost(rounds: int, judge_dir: Path | None) -> tuple[float, float]:
    from audit_eval_common import default_embedder, default_words
    from judge_route_eval import load_judge

    from bosun.core.audit.audit import plan_audit, run_audit
    from bosun.core.audit.config import AuditConfig

    exs = [e for e in expertqa() if e.label == 1 and e.chunks][:10]
    chunks = [c for e in exs for c in e.chunks][:20]
    while len(chunks) < 20:
        chunks.append(chunks[len(chunks) % 10])
    answer = " ".join(e.claim.rstrip(".") + "." for e in exs)
    embed, words = default_embedder(), default_words()
    judge = load_judge(judge_dir)
    plan = plan_audit("", chunks, answer, AuditConfig(matcher="semantic"))
    texts = plan.texts_to_embed()
    vecs, states = embed(texts), words(texts)
    off, on = [], []
    for _ in range(rounds * 5):
        plan = plan_audit("", chunks, answer, AuditConfig(matcher="semantic"))
        t0 = time.perf_counter()
        run_audit(plan, None, vecs, states)
        off.append(time.perf_counter() - t0)
        plan = plan_audit("", chunks, answer, AuditConfig(matcher="semantic"))
        t0 = time.perf_counter()
        rep = run_audit(plan, None, vecs, states, judge)
        on.append(time.perf_counter() - t0)
    print(f"audit: {len(plan.claims)} claims x {len(chunks)} chunks", file=sys.stderr)
    assert rep["judge"]
    return statistics.median(off) * 1000, statistics.median(on) * 1000


async def main_async(args: argparse.Namespace) -> None:
    if args.audit_only:
        a_off, a_on = audit_cost(args.rounds, args.judge_dir)
        print(f"| audit run, 10 claims x 20 chunks, warm embeddings | {a_off:.1f} ms | {a_on:.1f} ms | "
              f"+{a_on - a_off:.1f} ms |")
        return
    qs = [q["query"] for q in metatool_queries() if q["kind"] == "single"][::37][: args.queries]
    rows: dict[str, list[float]] = {"on": [], "off": []}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for r in range(args.rounds):
            for judge in ("off", "on") if r % 2 == 0 else ("on", "off"):
                out = await bench_size(args.docs, qs, work / f"home-{judge}", work, judge=judge)
                rows[judge].append(out["route_mcp_ms"])
    on, off = statistics.median(rows["on"]), statistics.median(rows["off"])
    print(f"| route over MCP, {args.docs} docs, p50 of {args.queries} prompts x {args.rounds} rounds | "
          f"{off:.1f} ms | {on:.1f} ms | {on / off:.2f}x |")
    a_off, a_on = audit_cost(args.rounds, args.judge_dir)
    print(f"| audit run, 10 claims x 20 chunks, warm embeddings | {a_off:.1f} ms | {a_on:.1f} ms | "
          f"+{a_on - a_off:.1f} ms |")
    rss = subprocess.run([sys.executable, "-c", RSS_SCRIPT], capture_output=True, text=True, check=True).stdout.split()
    print(f"| resident memory, embedder loaded -> judge loaded too | {float(rss[0]):.0f} MB | {float(rss[1]):.0f} MB | "
          f"+{float(rss[1]) - float(rss[0]):.0f} MB |")
    starts = {"off": [], "on": []}
    for _ in range(args.rounds * 2):
        for judge in ("off", "on"):
            starts[judge].append(await start_time(judge))
    s_off, s_on = statistics.median(starts["off"]), statistics.median(starts["on"])
    print(f"| start: open -> embedder ready | {s_off:.2f} s | {s_on:.2f} s | {s_on / s_off:.2f}x |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--judge-dir", type=Path, help="the audit row with this judge (default: the shipped one)")
    ap.add_argument("--audit-only", action="store_true", help="only the audit row")
    args = ap.parse_args()
    print("| what | judge off | judge on | ratio / added |\n|---|---:|---:|---:|")
    asyncio.run(main_async(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
