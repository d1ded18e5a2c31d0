"""plan(update) + seal check round trip vs a no-op tool, same transport, same run; manifest size.

Baseline: a bare MCPServer with one ``noop`` tool, on the same transport. Calls are
interleaved (noop, plan, noop, plan, ...) so machine noise hits both alike; the
result is the ratio of medians. Transports: in-memory (both servers in this
process: bosun's server-side cost only), and streamable HTTP on loopback with
``python -m bosun serve`` and the no-op server each in their own process (what a
harness talking to the daemon pays).

Run: /work/venv/bin/python bench/plan_bench.py [--calls 400]  (writes bench/results/plan.md)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import uvicorn
from mcp import Client
from mcp.server import MCPServer

from bosun.core.embedding import HashEmbedder
from bosun.core.task.manifest import MAX_TOKENS
from bosun.core.tokens import estimate_tokens
from bosun.server.app import create_server
from bosun.server.config import Config
from bosun.server.engine import Engine
from bosun.server.transport.serve import bind_socket

ROOT = Path(__file__).resolve().parents[1]


def noop_server() -> MCPServer[Any]:
    mcp: MCPServer[Any] = MCPServer("noop", log_level="WARNING")

    @mcp.tool(structured_output=True)
    async def noop() -> dict[str, Any]:
        """Do nothing."""
        return {"ok": True}

    return mcp


async def timed(fn: Callable[[], Awaitable[Any]]) -> float:
    t0 = time.perf_counter()
    result = await fn()
    dt = time.perf_counter() - t0
    if getattr(result, "is_error", False):
        raise RuntimeError(result.content[0].text)
    return dt


async def run(bosun_target: Any, noop_target: Any, calls: int) -> dict[str, Any]:
    async with Client(bosun_target) as b, Client(noop_target) as n:
        st = (await b.call_tool("plan", {"mode": "start", "objective": "benchmark the seal round trip",
                                         "steps": [f"step {i}" for i in range(8)],
                                         "constraints": ["never edit tests/"], "decisions": ["use sqlite"]})
              ).structured_content
        assert st is not None
        carried = {"seal": st["seal"], "version": st["version"]}
        task_id = st["task_id"]

        async def plan_update(i: int) -> Any:
            step = f"step {i % 8}"
            args: dict[str, Any] = {"mode": "update", "task_id": task_id, "seal": carried["seal"],
                                    "based_on_version": carried["version"]}
            args.update({"start_step": step} if i % 2 == 0 else {"more": {"complete": [step]}})
            r = await b.call_tool("plan", args)
            if r.is_error:
                return r
            sc = r.structured_content
            assert sc is not None and sc["drift"]["verdict"] == "ok"
            carried.update(seal=sc["seal"], version=sc["version"])
            return r

        async def plan_status(_: int) -> Any:
            return await b.call_tool("plan", {"mode": "status", "task_id": task_id, "seal": carried["seal"]})

        for i in range(30):  # warm-up
            await n.call_tool("noop", {})
            await plan_update(i)
        noop_t: list[float] = []
        upd_t: list[float] = []
        status_t: list[float] = []
        order = random.Random(11)
        for i in range(calls):
            jobs: list[tuple[list[float], Callable[[], Awaitable[Any]]]] = [
                (noop_t, lambda: n.call_tool("noop", {})),
                (upd_t, lambda i=i: plan_update(i)),  # type: ignore[misc]
            ]
            if i % 4 == 0:
                jobs.append((status_t, lambda i=i: plan_status(i)))  # type: ignore[misc]
            order.shuffle(jobs)  # no kind always goes first (the first call of a round pays for idle wake-ups)
            for sink, job in jobs:
                sink.append(await timed(job))
        manifest = (await b.call_tool("plan", {"mode": "resume", "task_id": task_id})).structured_content
        assert manifest is not None
    med = statistics.median
    paired = [u / z for u, z in zip(upd_t, noop_t, strict=True)]  # same round: same machine load
    paired_status = [st / noop_t[4 * k] for k, st in enumerate(status_t)]
    return {
        "paired_update": med(paired), "paired_status": med(paired_status),
        "noop_ms": med(noop_t) * 1000, "update_ms": med(upd_t) * 1000, "status_ms": med(status_t) * 1000,
        "ratio_update": med(upd_t) / med(noop_t), "ratio_status": med(status_t) / med(noop_t),
        "p90_update_ms": sorted(upd_t)[int(0.9 * len(upd_t))] * 1000,
        "p90_noop_ms": sorted(noop_t)[int(0.9 * len(noop_t))] * 1000,
        "calls": calls, "journal_events": carried["version"], "manifest": manifest["manifest"],
    }


def manifest_sizes() -> dict[str, Any]:
    """Manifest size in estimated tokens (and cl100k when installed) over varied task states."""
    from bosun.core.task.manifest import build_manifest
    from bosun.core.task.replay import rebuild
    from bosun.core.task.state import Event

    rng = random.Random(3)
    words = ["fix", "the", "flaky", "integration", "test", "in", "payments", "service", "and", "keep", "public",
             "API", "stable", "while", "migrating", "profile", "loader", "to", "UTF-8", "with", "a", "regression",
             "for", "PowerShell", "5.1", "users"]
    est: list[int] = []
    real: list[int] = []
    enc = None
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    with contextlib.suppress(ImportError):
        from token_estimate import cl100k

        enc = cl100k()
    for i in range(200):
        obj = " ".join(rng.choice(words) for _ in range(rng.randint(3, 60)))
        steps = [" ".join(rng.choice(words) for _ in range(rng.randint(2, 12))) for _ in range(rng.randint(0, 12))]
        events = [Event("t", 1, "task_started", {"objective": obj, "plan": steps,
                                                 "constraints": [f"c{j}" for j in range(rng.randint(0, 30))],
                                                 "budget": {"tokens": 100000}})]
        if steps:
            events.append(Event("t", 2, "step_started", {"step": steps[0]}))
        m = build_manifest(rebuild(events, f"t_{i:012x}"))
        est.append(estimate_tokens(m))
        if enc is not None:
            real.append(enc(m))
    out: dict[str, Any] = {"n": len(est), "est_median": statistics.median(est), "est_max": max(est)}
    if real:
        out.update(cl100k_median=statistics.median(real), cl100k_max=max(real))
    return out


@contextlib.contextmanager
def daemons(home: Path) -> Iterator[tuple[str, str]]:
    """`python -m bosun serve` and the no-op server, each in its own process (as harnesses meet them)."""
    port_file = home / "noop.port"
    noop = subprocess.Popen([sys.executable, __file__, "--serve-noop", str(port_file)], stderr=subprocess.DEVNULL)
    bosun = subprocess.Popen([sys.executable, "-m", "bosun", "serve", "--home", str(home / "bosun"), "--port", "0"],
                             stderr=subprocess.DEVNULL)
    try:
        daemon = home / "bosun" / "daemon.json"
        deadline = time.monotonic() + 120
        while not (port_file.exists() and port_file.read_text() and daemon.exists()):
            if time.monotonic() > deadline or noop.poll() is not None or bosun.poll() is not None:
                raise RuntimeError("a server did not start")
            time.sleep(0.05)
        url = json.loads(daemon.read_text())["url"]
        health = url.rsplit("/mcp", 1)[0] + "/healthz"
        while time.monotonic() < deadline:  # wait for the model load to finish: it competes for the CPU
            with contextlib.suppress(OSError), urllib.request.urlopen(health, timeout=2) as resp:  # 503 raises
                if resp.status == 200:
                    break
            time.sleep(0.2)
        yield url, f"http://127.0.0.1:{port_file.read_text()}/mcp"
    finally:
        for proc in (noop, bosun):
            proc.send_signal(signal.SIGTERM)
        for proc in (noop, bosun):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()


async def main_async(calls: int) -> str:
    lines = ["# plan bench", "",
             f"Interleaved calls (noop, plan update, every 4th round a plan status; order shuffled per round), "
             f"{calls} rounds, medians; paired ratio = median over rounds of (plan / noop in the same round); "
             "one run, machine shared with other work.", "",
             "| transport | noop ms | plan(update)+seal ms | ratio of medians | paired ratio | "
             "plan(status)+seal ms | paired ratio | p90 noop / update ms |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    manifest = ""
    for transport in ("in-memory (server cost only)", "streamable HTTP, servers in their own processes"):
        with tempfile.TemporaryDirectory() as home:
            if transport.startswith("in-memory"):
                engine = Engine(Config(home=Path(home), policies=[]), embedder_factory=lambda _c: HashEmbedder(64))
                r = await run(create_server(engine), noop_server(), calls)
            else:
                with daemons(Path(home)) as (bosun_url, noop_url):
                    r = await run(bosun_url, noop_url, calls)
        manifest = r["manifest"]
        lines.append(f"| {transport} | {r['noop_ms']:.2f} | {r['update_ms']:.2f} | {r['ratio_update']:.2f}x | "
                     f"{r['paired_update']:.2f}x | {r['status_ms']:.2f} | {r['paired_status']:.2f}x | "
                     f"{r['p90_noop_ms']:.2f} / {r['p90_update_ms']:.2f} |")
    sizes = manifest_sizes()
    lines += ["", "Target: plan(update)+seal within 1.5x of the no-op tool over the daemon's transport.", "",
              "## Manifest size", "",
              f"Over {sizes['n']} varied task states (objective 3-60 words, 0-12 steps, 0-30 constraints): "
              f"estimate_tokens median {sizes['est_median']}, max {sizes['est_max']} (limit {MAX_TOKENS})"
              + (f"; cl100k_base median {sizes['cl100k_median']}, max {sizes['cl100k_max']}."
                 if "cl100k_median" in sizes else "."),
              "", "The manifest carried at the end of the HTTP run:", "", "```", manifest, "```",
              f"estimate_tokens: {estimate_tokens(manifest)}"]
    return "\n".join(lines)


def serve_noop(port_file: str) -> int:
    """Child process: the no-op MCPServer over streamable HTTP (the baseline daemon)."""
    sock = bind_socket("127.0.0.1", 0)
    Path(port_file).write_text(str(sock.getsockname()[1]))
    server = uvicorn.Server(uvicorn.Config(noop_server().streamable_http_app(host="127.0.0.1"), log_level="warning",
                                           access_log=False, lifespan="on"))
    asyncio.run(server.serve(sockets=[sock]))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--serve-noop", metavar="PORT_FILE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_noop:
        return serve_noop(args.serve_noop)
    text = asyncio.run(main_async(args.calls))
    print(text)
    out = ROOT / "bench/results/plan.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
