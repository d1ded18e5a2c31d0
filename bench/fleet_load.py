"""A fleet on one daemon (issue 13): N concurrent agents for a fixed time, against a no-op server baseline.

    python bench/fleet_load.py [--clients 10 50] [--seconds 20] [--bridges 0.2] [--out bench/results/fleet.md]

Every agent is an SDK ``Client``: most over streamable HTTP, a share (``--bridges``) through a
``bosun stdio`` bridge process, as a fleet of mixed hosts would be. Phases, in one run and on one
machine, each ``--seconds`` long per client count:

* ``noop``: the baseline, an ``MCPServer`` with one no-op tool served the same way
  (``bench/transport_bench.py noop-server``), called by the same agents (HTTP and bridged alike).
* ``small``: bosun's smallest real call, ``recall`` of 5 lines of a stored 25 KB ref by its 16-hex
  short ref (the lookup that made writes fail with "database is locked").
* ``mixed``: each agent loops over observe (a 2-40 KB result, offloaded when large) -> recall by short ref
  (grep) -> plan update with ``based_on_version`` (a stale version is a conflict: an answer, not a
  failure) -> precheck.

Reported per phase: calls/s, p50/p99 latency, errors by kind, the daemon's CPU time per call
(``/proc/<pid>/stat``: steadier than calls/s on a loaded machine), and for ``mixed`` the journal
audit: every observe carries a unique marker; "lost" = acknowledged observes missing from the
journal, "duplicated" = markers journaled more than once. The daemon's RSS (VmRSS) before and after
each phase. The machine is shared, so the load average is printed with the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
sys.path.insert(0, str(ROOT / "bench"))
from transport_bench import clean_env, noop_cmd, spawn, stop, wait_daemon  # noqa: E402

REF_TEXT = "".join(f"line {i:03d}: bosun stores large tool output once and recalls only a slice\n" for i in range(60))


@dataclass
class Phase:
    name: str
    clients: int
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    conflicts: int = 0
    acknowledged: list[str] = field(default_factory=list)  # observe markers answered without error
    rss_before_kb: int = 0
    rss_after_kb: int = 0
    cpu_s: float = 0.0  # the daemon's CPU time (user + system) during the phase
    lost: int | None = None
    duplicated: int | None = None

    def row(self) -> str:
        lat = sorted(self.latencies)
        n = len(lat)
        p50 = statistics.median(lat) * 1000 if lat else float("nan")
        p99 = lat[min(n - 1, int(n * 0.99))] * 1000 if lat else float("nan")
        errs = ", ".join(f"{k}: {v}" for k, v in self.errors.most_common()) or "0"
        audit = "" if self.lost is None else f"{self.lost} / {self.duplicated}"
        calls = n + sum(self.errors.values()) + self.conflicts
        cpu = self.cpu_s * 1000 / calls if calls else float("nan")
        return (f"| {self.name} | {self.clients} | {n / self.seconds:.1f} | {p50:.1f} | {p99:.1f} | {errs} | "
                f"{self.conflicts} | {audit} | {cpu:.2f} | "
                f"{self.rss_before_kb / 1024:.0f} -> {self.rss_after_kb / 1024:.0f} |")


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def wait_warm(url: str, timeout: float = 300.0) -> None:
    """Until the daemon's policy index is built (``/healthz`` route_index ready): the model and the index
    build in the background after start, and their CPU would otherwise count against the first phase.
    A fleet shares one warm daemon, so the phases measure that."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url.removesuffix("/mcp") + "/healthz", timeout=5) as resp:
                body = json.loads(resp.read())
            if (body.get("route_index") or {}).get("state") in ("ready", "failed"):
                return
        except (OSError, ValueError):
            pass
        await asyncio.sleep(0.5)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc/<pid>/stat): per call, it varies far less with
    the machine's load than calls/s does."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def error_kind(text: str) -> str:
    """A short, stable label for an error text (ids and numbers dropped)."""
    low = text.lower()
    for needle, label in (("database is locked", "database is locked"), ("busy", "busy (admission)"),
                          ("storage", "storage error"), ("internal error", "internal error"),
                          ("timed out", "timeout"), ("unavailable", "daemon unavailable")):
        if needle in low:
            return label
    return text[:60]


async def timed(phase: Phase, client: Any, tool: str, arguments: dict[str, Any]) -> Any:
    """One tool call, its latency and its outcome recorded in ``phase``; the result, or None on error."""
    t0 = time.perf_counter()
    try:
        result = await client.call_tool(tool, arguments)
    except Exception as exc:  # a transport or protocol failure counts as a failed call
        phase.errors[error_kind(f"{type(exc).__name__}: {exc}")] += 1
        return None
    phase.latencies.append(time.perf_counter() - t0)
    if getattr(result, "is_error", False):
        text = result.content[0].text if result.content else ""
        if "conflict" in text.lower():
            phase.conflicts += 1  # a stale version is an answer, not a failure
        else:
            phase.errors[error_kind(text)] += 1
        return None
    return result


async def open_clients(stack: AsyncExitStack, url: str, home: Path, n: int, bridges: int) -> list[Any]:
    from mcp import Client, StdioServerParameters

    clients = []
    for i in range(n):
        if i < bridges:
            env = clean_env(BOSUN_HOME=str(home), HOME=os.environ.get("HOME", "/tmp"))
            params = StdioServerParameters(command=PY, args=["-m", "bosun", "stdio"], env=env)
            clients.append(await stack.enter_async_context(Client(params)))
        else:
            clients.append(await stack.enter_async_context(Client(url)))
    return clients


async def run_phase(phase: Phase, clients: list[Any], agent: Callable[[Any, int, float], Awaitable[None]],
                    pid: int) -> None:
    phase.rss_before_kb = rss_kb(pid)
    cpu0 = cpu_seconds(pid)
    stop_at = time.monotonic() + phase.seconds
    t0 = time.monotonic()
    await asyncio.gather(*(agent(c, i, stop_at) for i, c in enumerate(clients)))
    phase.seconds = time.monotonic() - t0
    phase.cpu_s = cpu_seconds(pid) - cpu0
    phase.rss_after_kb = rss_kb(pid)


async def noop_phase(url: str, home: Path, pid: int, n: int, seconds: float, bridges: int) -> Phase:
    """The same agents (HTTP and bridged alike: a bridge attaches to any daemon.json) calling a no-op tool."""
    phase = Phase("noop (baseline)", n, seconds)
    async with AsyncExitStack() as stack:
        clients = await open_clients(stack, url, home, n, bridges)

        async def agent(client: Any, _: int, stop_at: float) -> None:
            while time.monotonic() < stop_at:
                await timed(phase, client, "noop", {})

        await run_phase(phase, clients, agent, pid)
    return phase


async def bosun_phases(url: str, home: Path, pid: int, n: int, seconds: float, bridges: int) -> list[Phase]:
    small = Phase("small: recall 5 lines by short ref", n, seconds)
    mixed = Phase("mixed: observe, recall, plan update, precheck", n, seconds)
    async with AsyncExitStack() as stack:
        clients = await open_clients(stack, url, home, n, bridges)
        setup = clients[-1]
        started = await setup.call_tool("plan", {"mode": "start", "objective": "fleet bench setup"})
        tid0 = started.structured_content["task_id"]
        stored = await setup.call_tool("observe", {"task_id": tid0, "kind": "result", "tool": "cat",
                                                   "result": REF_TEXT * 6})  # large enough to be offloaded
        short = stored.structured_content["ref"]

        async def small_agent(client: Any, _: int, stop_at: float) -> None:
            while time.monotonic() < stop_at:
                await timed(small, client, "recall", {"ref": short, "op": "head", "lines": 5})

        await run_phase(small, clients, small_agent, pid)

        async def agent(client: Any, i: int, stop_at: float) -> None:
            await mixed_agent(mixed, client, i, stop_at)

        await run_phase(mixed, clients, agent, pid)
    journal = journal_markers(home / "bosun.db")
    mixed.lost = sum(1 for m in mixed.acknowledged if journal.get(m, 0) == 0)
    mixed.duplicated = sum(1 for m in mixed.acknowledged if journal.get(m, 0) > 1)
    return [small, mixed]


SELECT_CANDIDATES = [
    "the failing test imports a module that was renamed in the last commit",
    "the CI runner has 2 cores and a 10 minute limit per job",
    "flaky network tests are marked and retried twice",
    "the database migrations run before the test suite starts",
    "the coverage report is uploaded after every merge to main",
    "a disk full error on the runner fails the build with exit code 1",
    "the linter runs on changed files only",
    "the release notes are generated from the merged pull requests",
]


async def mixed_agent(phase: Phase, client: Any, i: int, stop_at: float, lines: tuple[int, int] = (100, 2000),
                      last: str = "precheck", tag: str = "m") -> None:
    """One agent of the mixed phase until ``stop_at``: observe a result of ``lines`` lines (each ~22 bytes;
    offloaded when large), recall it by its short ref (grep), a plan update with ``based_on_version`` (a
    stale version is a conflict: an answer, not a failure), then ``last``: a precheck, or a select_context
    over a few candidate notes (the model's share of the mix). Every observe carries the marker
    ``<tag>-<i>-<n>`` (its ``args.k``), so the journal can be audited against what was acknowledged."""
    rng = random.Random(i)
    got = await client.call_tool("plan", {"mode": "start", "objective": f"agent {i} fixes a bug",
                                          "steps": ["reproduce", "fix", "test"]})
    tid, version = got.structured_content["task_id"], got.structured_content["version"]
    n_call = 0
    while time.monotonic() < stop_at:
        n_call += 1
        marker = f"{tag}-{i}-{n_call}"
        body = f"{marker}\n" + "\n".join(f"{marker} line {j}: ok" for j in range(rng.randint(*lines)))
        obs = await timed(phase, client, "observe", {
            "task_id": tid, "kind": "result", "tool": "pytest", "args": {"k": marker}, "result": body})
        if obs is None:
            continue
        phase.acknowledged.append(marker)
        ref = obs.structured_content.get("ref")
        if ref:
            await timed(phase, client, "recall", {"ref": ref, "op": "grep", "pattern": "line 1", "task_id": tid})
        upd = await timed(phase, client, "plan", {
            "mode": "update", "task_id": tid, "based_on_version": version, "decisions": [f"{marker} done"]})
        if upd is None:
            status = await client.call_tool("plan", {"mode": "status", "task_id": tid})
            version = status.structured_content["version"] if not status.is_error else version
        else:
            version = upd.structured_content["version"]
        if last == "select_context":
            await timed(phase, client, "select_context", {
                "goal": f"why does {marker} fail on the runner", "budget_tokens": 200,
                "candidates": rng.sample(SELECT_CANDIDATES, 5)})
        else:
            await timed(phase, client, "precheck", {"task_id": tid, "tool": "bash",
                                                    "args": {"cmd": f"pytest -k {marker}"}})


def journal_markers(db: Path, database_url: str | None = None) -> Counter[str]:
    """How many tool_result events carry each observe marker (the marker is the tool's args.k), read from
    the SQLite file or, with ``database_url``, from PostgreSQL."""
    sql = "SELECT payload_json FROM task_events WHERE kind IN ('tool_result', 'tool_failure')"
    if database_url:
        import psycopg

        with psycopg.connect(database_url) as pg:
            rows = pg.execute(sql).fetchall()
    else:
        with sqlite3.connect(db) as conn:
            rows = conn.execute(sql).fetchall()
    out: Counter[str] = Counter()
    for (payload,) in rows:
        args = (payload if isinstance(payload, dict) else json.loads(payload)).get("args")
        if isinstance(args, dict) and isinstance(args.get("k"), str):
            out[args["k"]] += 1
    return out


async def main(args: argparse.Namespace) -> str:
    lines = ["| phase | clients | calls/s | p50 ms | p99 ms | errors | conflicts | lost / duplicated | "
             "daemon CPU ms/call | RSS MB |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    notes = []
    with tempfile.TemporaryDirectory(prefix="bosun-fleet-") as tmp:
        for n in args.clients:
            bridges = round(n * args.bridges)
            noop_home = Path(tmp) / f"noop-{n}"
            noop = spawn(noop_cmd(noop_home, False), Path(tmp) / f"noop-{n}.log")
            try:
                daemon = await wait_daemon(noop_home, noop.pid)
                base = await noop_phase(str(daemon["url"]), noop_home, noop.pid, n, args.seconds, bridges)
            finally:
                stop(noop)
            home = Path(tmp) / f"bosun-{n}"
            proc = spawn(["-m", "bosun", "serve", "--port", "0", "--home", str(home)], Path(tmp) / f"bosun-{n}.log")
            try:
                daemon = await wait_daemon(home, proc.pid, ready=True)
                await wait_warm(str(daemon["url"]))
                phases = await bosun_phases(str(daemon["url"]), home, proc.pid, n, args.seconds, bridges)
            finally:
                stop(proc)
            lines.append(base.row())
            lines += [p.row() for p in phases]
            small_ratio = (len(phases[0].latencies) / phases[0].seconds) / max(1e-9, len(base.latencies) / base.seconds)
            cpu_ratio = (phases[0].cpu_s / max(1, len(phases[0].latencies))) / max(
                1e-9, base.cpu_s / max(1, len(base.latencies)))
            notes.append(f"- {n} clients ({bridges} through `bosun stdio` bridges): small calls at "
                         f"{small_ratio:.2f}x the no-op server's throughput; the daemon spends {cpu_ratio:.2f}x "
                         "the no-op's CPU per call")
    load = os.getloadavg()
    head = [f"fleet_load: {args.seconds:.0f} s per phase, {os.cpu_count()} CPUs, load average "
            f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1/5/15 min) at the end", ""]
    return "\n".join(head + lines + [""] + notes) + "\n"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, nargs="+", default=[10, 50])
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each phase (<= 60)")
    parser.add_argument("--bridges", type=float, default=0.2, help="share of agents behind a bosun stdio bridge")
    parser.add_argument("--out", type=Path, default=None)
    ns = parser.parse_args()
    if ns.seconds > 60 or max(ns.clients) > 50:
        parser.error("keep runs bounded: --seconds <= 60 and at most 50 clients (the machine is shared)")
    report = asyncio.run(main(ns))
    print(report)
    if ns.out is not None:
        ns.out.write_text(report)
