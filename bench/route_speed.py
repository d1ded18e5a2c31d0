"""Route latency and index build/reload times, with same-run baselines. Medians; run by hand.

For each corpus size (15 / 200 / 1000 / 6000 documents, synthesised from the
MetaTool tool descriptions: the first 199 are real, larger corpora combine two
descriptions per document so every surface is distinct) it measures:

* build: the first load of the corpus (cold: every surface phrase is embedded)
  and a full rebuild with embeddings cached (what a daemon restart pays);
* reload: one file edited, the poller's rebuild (one new embedding + TF-IDF fit);
* route in-process (PolicyService.route: embed the prompt + score + decide),
  and over MCP (in-memory client, `route` tool), each on prompts never seen;
* cached: the same prompt again (served from the result cache);
* baseline: embedding one query with the same model (called directly, and through
  ``engine.embed`` as every bosun tool does: a worker thread + the SQLite cache) + a no-op
  MCP tool call.

    python bench/route_speed.py [--sizes 15,200,1000] [--queries 40]
    python bench/route_speed.py --cpu [--sizes 1000,10000]   # core route CPU, hash embedder, no model

``--cpu`` times ``route()`` alone (scoring + decision, the prompt vector given) with a 384-dimensional
hash embedder, as the thread's CPU time (``time.thread_time``): what a route costs besides the model.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mcp import Client
from mcp.server import MCPServer
from route_common import metatool_docs, metatool_queries

from bosun.server.app import create_server
from bosun.server.config import Config
from bosun.server.engine import Engine
from bosun.server.services.policies import PolicyService


def synth_documents(n: int) -> list[tuple[str, str]]:
    """``n`` routing documents (file name, markdown) from MetaTool's tools; past 199, pairs of them."""
    docs = metatool_docs()
    out = []
    for i in range(n):
        a = docs[i % len(docs)]
        if i < len(docs):
            surface, name = a.surface, a.name
        else:
            b = docs[(i * 7 + 3) % len(docs)]
            surface, name = f"{a.surface} Also: {b.surface}", f"{a.name}-{b.name}-{i}"
        safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in name)[:100]
        out.append((f"{safe}.md", f"# {safe}\n\n**Agent-trigger:** {surface}\n"))
    return out


def synth_corpus(root: Path, n: int) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in synth_documents(n):
        (root / name).write_text(text)


def synth_policies(n: int) -> list[Any]:
    """The documents of ``synth_corpus`` as parsed policies (for the in-process CPU bench)."""
    from bosun.core.routing.corpus import parse_policy

    out = []
    for name, text in synth_documents(n):
        pol = parse_policy(name, text)
        assert pol is not None
        out.append(pol)
    return out


def cpu_bench(sizes: list[int], nq: int) -> None:
    """Route CPU besides the model: the whole prompt alone, and as the server routes it (with its clauses)."""
    from threadpoolctl import threadpool_limits

    from bosun.core.embedding import HashEmbedder
    from bosun.core.routing.abstain import SHIPPED
    from bosun.core.routing.route import build_index_with, clause_texts, route

    emb = HashEmbedder(384)
    qs = [q["query"] for q in metatool_queries() if q["kind"] == "single"][::37][:nq]
    qvecs = emb.embed(qs)
    clause_sets = [[(c, emb.embed([c])[0]) for c in clause_texts(q)] for q in qs]
    split = sum(1 for cs in clause_sets if cs)
    print(f"{split} of {len(qs)} prompts have clauses")
    # the shipped prompt adapter's matrices (384 x 32): the hash embedder has no adapter of its own, so the
    # served cost is measured by switching these on and off in the same run (the numbers do not matter)
    from bosun.core.routing import adapter as adapter_mod

    shipped = next((a for m in ("all-MiniLM-L6-v2-int8",) if (a := adapter_mod.shipped(m)) is not None), None)
    print("| docs | build s | route CPU p50 ms | route CPU p90 ms | with clauses p50 ms | with clauses p90 ms "
          "| with clauses + adapter p50 ms |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n in sizes:
        pols = synth_policies(n)
        t0 = time.perf_counter()
        index = build_index_with(pols, emb)
        build = time.perf_counter() - t0
        times: dict[str, list[float]] = {"whole": [], "clauses": [], "adapter": []}
        with threadpool_limits(limits=1, user_api="blas"):  # as PolicyService.route runs it
            for rep in range(3):
                for q, v, cs in zip(qs, qvecs, clause_sets, strict=True):
                    for mode in times:
                        index.adapter = shipped if mode == "adapter" else None
                        t0 = time.thread_time()
                        route(index, q, v, SHIPPED, clause_vecs=cs if mode != "whole" else [])
                        if rep:
                            times[mode].append(time.thread_time() - t0)
        index.adapter = None
        cells = []
        for key in ("whole", "clauses"):
            ts = sorted(times[key])
            cells += [f"{med(ts) * 1000:.2f}", f"{ts[int(len(ts) * 0.9)] * 1000:.2f}"]
        cells.append(f"{med(times['adapter']) * 1000:.2f}" if shipped is not None else "")
        print(f"| {n} | {build:.2f} | " + " | ".join(cells) + " |", flush=True)


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


async def bench_size(n: int, queries: list[str], home: Path, work: Path, judge: str = "on") -> dict[str, float]:
    """``judge``: BOSUN_JUDGE for this engine (bench/judge_speed.py runs both in one run)."""
    corpus = work / f"corpus-{n}"
    if not corpus.exists():
        synth_corpus(corpus, n)
    engine = Engine(Config(home=home, policies=[corpus], judge=judge))
    server = create_server(engine)
    noop = MCPServer("noop")

    @noop.tool()
    async def ping() -> str:
        """No-op."""
        return "ok"

    out: dict[str, float] = {"docs": n}
    async with Client(server) as client, Client(noop) as noop_client:
        svc: PolicyService = engine.policies
        await engine.embedder()
        t0 = time.perf_counter()
        await svc.ready()
        out["first_served_s"] = time.perf_counter() - t0  # an index from whole surfaces answers routes
        while svc.index_state()["state"] not in ("ready", "failed"):
            await asyncio.sleep(0.01)
        out["build_first_s"] = time.perf_counter() - t0  # cold unless this home has embedded the corpus before
        t0 = time.perf_counter()
        await svc.reload()
        out["rebuild_cached_s"] = time.perf_counter() - t0
        victim = sorted(corpus.iterdir())[0]
        victim.write_text(victim.read_text().replace("**Agent-trigger:** ", f"**Agent-trigger:** edited {time.time()} "))
        t0 = time.perf_counter()
        await svc.reload()
        out["reload_one_edit_s"] = time.perf_counter() - t0
        emb = await engine.embedder()
        for q in queries[:5]:  # warm-up
            await svc.route(f"{q} warm {n}")
            await noop_client.call_tool("ping", {})
        inproc, mcp_t, embed_t, noop_t, cached, eng_t = [], [], [], [], [], []
        for i, q in enumerate(queries):
            t0 = time.perf_counter()
            emb.inner.embed([f"{q} base {n} {i}"])
            embed_t.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await engine.embed([f"{q} engine {n} {i}"])
            eng_t.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await noop_client.call_tool("ping", {})
            noop_t.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await svc.route(f"{q} in {n} {i}")
            inproc.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            res = await client.call_tool("route", {"prompt": f"{q} mcp {n} {i}"})
            assert not res.is_error, res.content
            mcp_t.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await svc.route(f"{q} in {n} {i}")
            cached.append(time.perf_counter() - t0)
        out.update({
            "embed_one_ms": med(embed_t) * 1000, "noop_mcp_ms": med(noop_t) * 1000,
            "route_inproc_ms": med(inproc) * 1000, "route_mcp_ms": med(mcp_t) * 1000,
            "route_cached_ms": med(cached) * 1000, "engine_embed_ms": med(eng_t) * 1000,
        })
        out["mcp_ratio"] = out["route_mcp_ms"] / (out["embed_one_ms"] + out["noop_mcp_ms"])
        out["mcp_ratio_engine"] = out["route_mcp_ms"] / (out["engine_embed_ms"] + out["noop_mcp_ms"])
    return out


async def main_async(sizes: list[int], nq: int) -> None:
    qs = [q["query"] for q in metatool_queries() if q["kind"] == "single"][::37][:nq]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        # a fresh home per size: "first build" is cold (every text embedded), "rebuild" is a restart
        print("| docs | first served s | first build s | rebuild (cached) s | reload 1 edit s | embed 1 query ms | no-op MCP ms "
              "| route in-process ms | route MCP ms | MCP / (embed+no-op) | engine.embed ms | MCP / (engine.embed+no-op) "
              "| cached ms |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for n in sizes:
            r = await bench_size(n, qs, work / f"home-{n}", work)
            print(f"| {n} | {r['first_served_s']:.2f} | {r['build_first_s']:.2f} | {r['rebuild_cached_s']:.3f} | {r['reload_one_edit_s']:.3f} "
                  f"| {r['embed_one_ms']:.2f} | {r['noop_mcp_ms']:.2f} | {r['route_inproc_ms']:.2f} "
                  f"| {r['route_mcp_ms']:.2f} | {r['mcp_ratio']:.2f} | {r['engine_embed_ms']:.2f} | {r['mcp_ratio_engine']:.2f} "
                  f"| {r['route_cached_ms']:.3f} |", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="15,200,1000,6000")
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--cpu", action="store_true", help="time route() alone with a hash embedder")
    args = ap.parse_args()
    if args.cpu:
        cpu_bench([int(s) for s in args.sizes.split(",")], args.queries)
        return 0
    asyncio.run(main_async([int(s) for s in args.sizes.split(",")], args.queries))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
