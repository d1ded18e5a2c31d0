"""precheck round trip over MCP against a no-op tool on the same transport, in the same run.

    /work/venv/bin/python bench/precheck_speed.py [--calls 400] [--rounds 5] [--transport memory stdio]

Two servers reached through the same transport, in the same run:
  * a bare ``MCPServer`` with one no-op tool (the baseline: protocol + SDK cost only);
  * bosun with a task whose journal holds a realistic history (the first calls of a
    coding-agent run, as observe would journal them) and the example invariants.
Transports: the SDK's in-memory ``Client`` (no I/O at all: the harshest ratio) and stdio
(child processes: ``bosun serve --stdio --no-http`` and this script's ``noop-server``, what an
``mcpServers`` entry runs). Calls alternate between the two servers so noise hits both alike.
Reported: median and p90 per call, and the ratio of medians (target: within 1.5x), for
precheck with no new journal events and for precheck right after an observe-style append
(the loop guard must fold one new event first).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.server import MCPServer

from bosun.core.actions import args_hash
from bosun.core.embedding import HashEmbedder
from bosun.server.app import create_server
from bosun.server.config import Config
from bosun.server.engine import Engine

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("BOSUN_SHARED", ROOT.parent / "shared"))


def noop_server() -> MCPServer[Any]:
    mcp: MCPServer[Any] = MCPServer("noop", log_level="WARNING")

    @mcp.tool(structured_output=True)
    async def noop(task_id: str, tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        """Do nothing (same argument shape as precheck)."""
        return {"verdict": "allow"}

    return mcp


def history() -> list[dict[str, Any]]:
    path = SHARED / "data/trajectories/miniswe-dev.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        run = json.loads(fh.readline())
    return [c for c in run["calls"]][:40]


def payload(call: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    out = call.get("output") or ""
    digest = hashlib.sha256(out.encode()).hexdigest()
    body: dict[str, Any] = {"tool": call["tool"], "args_hash": args_hash(call["args"]), "args": call["args"],
                            "sha256": digest, "bytes": len(out), "tokens": len(out) // 4, "ref": None,
                            "stored_ref": "mem://sha256:" + digest, "offloaded": False}
    if call.get("error"):
        body["error_signature"] = "x"
        body["error"] = out[:200]
        return "tool_failure", body
    body["result_signature"] = digest[:16]
    return "tool_result", body


async def timed(client: Client, name: str, args: dict[str, Any]) -> float:
    t0 = time.perf_counter()
    res = await client.call_tool(name, args)
    dt = time.perf_counter() - t0
    if res.is_error:
        raise RuntimeError(f"{name} failed: {res.content}")
    return dt


def stats(xs: list[float]) -> str:
    xs = sorted(xs)
    return f"median {statistics.median(xs) * 1e3:.3f} ms, p90 {xs[int(len(xs) * 0.9)] * 1e3:.3f} ms"


async def prepare(home: Path) -> str:
    """A task with a realistic journal in ``home`` (for the stdio leg, written before the server starts)."""
    engine = Engine(Config(home=home, policies=[]), embedder_factory=lambda _c: HashEmbedder(64))
    async with Client(create_server(engine)):
        svc = engine.tasks
        state = await svc.start("replay a coding task", plan=["reproduce", "fix", "test"])
        await svc.append_many(state.task_id, [payload(c) for c in history()])
        return state.task_id


async def stdio_leg(calls: int, rounds: int) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        tid = await prepare(home)
        env = {k: v for k, v in os.environ.items() if k in ("HOME", "PATH", "LANG", "SSL_CERT_FILE")}
        env.update(BOSUN_HOME=str(home), BOSUN_INVARIANTS=str(ROOT / "invariants.example.toml"))
        bosun_params = StdioServerParameters(command=str(Path(sys.executable).parent / "bosun"),
                                             args=["serve", "--stdio", "--no-http", "--home", str(home)], env=env)
        noop_params = StdioServerParameters(command=sys.executable, args=[str(Path(__file__).resolve()), "noop-server"],
                                            env=env)
        hist = history()
        probe = [{"task_id": tid, "tool": c["tool"], "args": c["args"]} for c in hist]
        async with Client(noop_params) as noop, Client(bosun_params) as bosun:
            for i in range(40):
                await timed(noop, "noop", probe[i % len(probe)])
                await timed(bosun, "precheck", probe[i % len(probe)])
            await asyncio.sleep(10)  # let the server's background model load finish before timing
            base: list[float] = []
            pre: list[float] = []
            for _ in range(rounds):
                for i in range(calls // rounds):
                    args = probe[i % len(probe)]
                    base.append(await timed(noop, "noop", args))
                    pre.append(await timed(bosun, "precheck", args))
        return ["", "### stdio (child processes, legacy and modern eras as the SDK client negotiates)", "",
                "| call | latency | ratio to no-op (medians) | paired ratio (median of per-pair ratios) |",
                "|---|---|---:|---:|",
                f"| no-op tool | {stats(base)} | 1.00 | 1.00 |",
                f"| precheck | {stats(pre)} | {statistics.median(pre) / statistics.median(base):.2f} | "
                f"{statistics.median([p / b for p, b in zip(pre, base, strict=True)]):.2f} |"]


async def main(calls: int, rounds: int, transports: list[str]) -> list[str]:
    lines: list[str] = []
    if "memory" in transports:
        lines += await memory_leg(calls, rounds)
    if "stdio" in transports:
        lines += await stdio_leg(calls, rounds)
    return lines


async def memory_leg(calls: int, rounds: int) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["BOSUN_INVARIANTS"] = str(ROOT / "invariants.example.toml")
        engine = Engine(Config(home=Path(tmp) / "home", policies=[]), embedder_factory=lambda _c: HashEmbedder(64))
        hist = history()
        async with Client(noop_server()) as noop, Client(create_server(engine)) as bosun:
            svc = engine.tasks
            state = await svc.start("replay a coding task", plan=["reproduce", "fix", "test"])
            tid = state.task_id
            await svc.append_many(tid, [payload(c) for c in hist])
            probe = [{"task_id": tid, "tool": c["tool"], "args": c["args"]} for c in hist]
            for i in range(20):  # warm up both
                await timed(noop, "noop", probe[i % len(probe)])
                await timed(bosun, "precheck", probe[i % len(probe)])
            base: list[float] = []
            quiet: list[float] = []
            after: list[float] = []
            base2: list[float] = []
            extra = history()
            for _ in range(rounds):
                for i in range(calls // rounds):
                    args = probe[i % len(probe)]
                    base.append(await timed(noop, "noop", args))
                    quiet.append(await timed(bosun, "precheck", args))
                for i in range(calls // rounds // 4):
                    call = extra[i % len(extra)]
                    await svc.append(tid, *payload(call))  # what observe does between two prechecks
                    args = {"task_id": tid, "tool": call["tool"], "args": call["args"]}
                    base2.append(await timed(noop, "noop", args))
                    after.append(await timed(bosun, "precheck", args))
        lines = ["## precheck round trip vs a no-op tool (same transport, same run)", "",
                 "### in-memory transport (SDK `Client(server)`, no I/O)", "",
                 f"Journal: {len(hist) + 1} events before timing; example invariants loaded; {len(quiet)} + "
                 f"{len(after)} precheck calls interleaved with no-op calls.", "",
                 "| call | latency | ratio to no-op (medians) |", "|---|---|---:|",
                 f"| no-op tool | {stats(base)} | 1.00 |",
                 f"| precheck (no new events) | {stats(quiet)} | {statistics.median(quiet) / statistics.median(base):.2f} |",
                 f"| no-op tool (paired with the next row) | {stats(base2)} | 1.00 |",
                 f"| precheck after one observe append | {stats(after)} | "
                 f"{statistics.median(after) / statistics.median(base2):.2f} |"]
        return lines


if __name__ == "__main__":
    if sys.argv[1:] == ["noop-server"]:
        noop_server().run()
        raise SystemExit(0)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--transport", nargs="+", default=["memory", "stdio"], choices=["memory", "stdio"])
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "precheck_speed.md"))
    a = parser.parse_args()
    out = ["# precheck speed", "", "Generated by `bench/precheck_speed.py`.", "", *asyncio.run(main(a.calls, a.rounds, a.transport))]
    Path(a.out).write_text("\n".join(out) + "\n", encoding="utf-8")
    print("\n".join(out))
