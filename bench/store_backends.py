"""The store on SQLite vs PostgreSQL (issue 18): latency, throughput and the journal audit, in one run.

    python bench/store_backends.py [--seconds 60] [--agents 25] [--rounds 200] [--database-url postgresql://...]
                                   [--out bench/results/store_backends.md]

First the small calls alone: one SQLite daemon and one PostgreSQL daemon up together, one client
each, ``--rounds`` rounds of recall (5 lines) / observe (a decision) / plan status, alternating which
backend goes first: the fair form of the issue's "small-call latency within 2x" on a shared machine,
where load drifts between phases. Then the fleet phases, one after the other, each ``--seconds`` long:

* ``sqlite x1``: one daemon on SQLite (its BOSUN_HOME), ``--agents`` SDK agents over HTTP;
* ``postgres x1``: one daemon on PostgreSQL, the same agents;
* ``postgres x1 async``: the same on a database with ``synchronous_commit=off`` (a commit does not wait
  for its WAL flush: SQLite's synchronous=NORMAL trade, so the pair separates the fsync from the rest);
* ``postgres x2``: two daemons (two homes, one database), ``--agents`` agents on EACH.

Every agent loops: ``observe`` (a 1-40 KB result carrying a unique marker; large ones are
offloaded to the ref store), ``recall`` of 5 lines of a shared ref by its short ref (the small
call), ``plan update`` with ``based_on_version`` on a task shared by 5 agents (in the 2-daemon
phase, agents of both daemons share each task; a stale version is a conflict: an answer, not a
failure; the agent then reads the status and goes on). Reported per phase and tool: calls, p50/p99;
per phase: calls/s, failed calls by kind, conflicts, and the journal audit read straight from the
database: lost = acknowledged observes or plan updates missing from the journal (an update must sit
at the version it was acknowledged with), duplicated = markers journaled more than once, gaps =
tasks whose seqs are not 1..n. The PostgreSQL/SQLite ratio of the p50s is the issue's "within 2x".

Without ``--database-url`` the bench starts a throwaway cluster with PostgreSQL's default
durability (fsync on, synchronous_commit on: every commit waits for its WAL flush) on loopback; SQLite
runs as bosun ships it (WAL, synchronous=NORMAL: a commit survives a killed process, the WAL is not
fsynced per commit). The settings in force are printed with the table. Each phase starts fresh
daemons (the model loaded before the clock starts) on a fresh database or BOSUN_HOME.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pwd
import random
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
sys.path.insert(0, str(ROOT / "bench"))
from fleet_load import REF_TEXT, error_kind, rss_kb  # noqa: E402
from transport_bench import clean_env, stop, wait_daemon  # noqa: E402

TOOLS = ("observe", "recall", "plan update")
SHARE = 5  # agents per shared task


@dataclass
class Stats:
    """One phase: latencies per tool, outcomes, and what the agents saw acknowledged."""

    name: str
    daemons: int
    agents: int
    seconds: float = 0.0
    latencies: dict[str, list[float]] = field(default_factory=lambda: {t: [] for t in TOOLS})
    errors: Counter[str] = field(default_factory=Counter)
    conflicts: int = 0
    observed: list[str] = field(default_factory=list)  # acknowledged observe markers
    updates: dict[str, tuple[str, int]] = field(default_factory=dict)  # decision -> (task, acknowledged version)
    tasks: set[str] = field(default_factory=set)
    rss_mb: list[float] = field(default_factory=list)
    lost: int = 0
    duplicated: int = 0
    gaps: int = 0

    def calls(self) -> int:
        return sum(len(v) for v in self.latencies.values())


def pct(values: list[float], q: float) -> float:
    """The q-quantile in ms (nearest rank), NaN when there is none."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000


def p50(values: list[float]) -> float:
    return statistics.median(values) * 1000 if values else float("nan")


async def call(stats: Stats, client: Any, tool: str, label: str, arguments: dict[str, Any]) -> Any:
    """One tool call timed under ``label``; the structured answer, or None (error or conflict, counted)."""
    t0 = time.perf_counter()
    try:
        result = await client.call_tool(tool, arguments)
    except Exception as exc:  # a transport or protocol failure is a failed call
        stats.errors[error_kind(f"{type(exc).__name__}: {exc}")] += 1
        return None
    stats.latencies[label].append(time.perf_counter() - t0)
    if result.is_error:
        text = result.content[0].text if result.content else ""
        if "conflict" in text.lower():
            stats.conflicts += 1
        else:
            stats.errors[error_kind(text)] += 1
        return None
    return result.structured_content


# -- daemons and databases ---------------------------------------------------------------------------


def spawn_daemon(home: Path, database_url: str | None, log: Path) -> subprocess.Popen[bytes]:
    env = clean_env(**({"BOSUN_DATABASE_URL": database_url} if database_url else {}))
    with open(log, "ab") as fh:
        return subprocess.Popen([PY, "-m", "bosun", "serve", "--port", "0", "--home", str(home)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=fh, env=env, cwd=ROOT)


def pg_bindir() -> Path:
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(os.path.realpath(found)).parent
    for initdb in sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), reverse=True):
        return initdb.parent
    raise SystemExit("no PostgreSQL binaries (initdb/pg_ctl): install postgresql or pass --database-url")


@contextmanager
def throwaway_cluster() -> Iterator[str]:
    """A cluster with PostgreSQL's default durability on a free loopback port; yields the admin URL.

    Its directory is its own (under /tmp, owned by the unprivileged user initdb needs under root)."""
    bindir = pg_bindir()
    user = "postgres" if os.getuid() == 0 else None  # initdb refuses root
    prefix = ["runuser", "-u", user, "--"] if user else []
    root = Path(tempfile.mkdtemp(prefix="bosun-bench-pg-"))
    if user:
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    data = root / "data"
    try:
        subprocess.run([*prefix, str(bindir / "initdb"), "-D", str(data), "-U", "bosun", "--auth=trust", "-E",
                        "UTF8", "--locale=C"], check=True, capture_output=True, cwd="/")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        opts = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c max_connections=200"
        subprocess.run([*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(root / "log"), "-w",
                        "start"], check=True, capture_output=True, cwd="/")
        try:
            yield f"postgresql://bosun@127.0.0.1:{port}/postgres"
        finally:
            subprocess.run([*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                           capture_output=True, cwd="/")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def create_database(admin_url: str, name: str, synchronous_commit: str | None = None) -> str:
    """A fresh database (``synchronous_commit`` set for every session on it when given)."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
        if synchronous_commit is not None:
            conn.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = {synchronous_commit}')
    return admin_url.rsplit("/", 1)[0] + "/" + name


def pg_settings(url: str) -> str:
    import psycopg

    with psycopg.connect(url) as conn:
        version = conn.execute("SHOW server_version").fetchone()
        got = {name: conn.execute(f"SHOW {name}").fetchone() for name in ("fsync", "synchronous_commit")}
    values = ", ".join(f"{k}={v[0] if v else '?'}" for k, v in got.items())
    return f"PostgreSQL {version[0] if version else '?'} on loopback ({values})"


def journal_rows(database_url: str | None, db_path: Path, tasks: set[str]) -> list[tuple[str, int, str, dict[str, Any]]]:
    """(task, seq, kind, payload) of the given tasks, read from the database directly."""
    sql = "SELECT task_id, seq, kind, payload_json FROM task_events WHERE task_id = ANY(%s) ORDER BY task_id, seq"
    if database_url:
        import psycopg

        with psycopg.connect(database_url) as conn:
            rows = conn.execute(sql, (sorted(tasks),)).fetchall()
    else:
        marks = ",".join("?" * len(tasks))
        with sqlite3.connect(db_path) as lite:
            rows = lite.execute(sql.replace("= ANY(%s)", f"IN ({marks})"), sorted(tasks)).fetchall()
    return [(str(t), int(s), str(k), p if isinstance(p, dict) else json.loads(p)) for t, s, k, p in rows]


def audit(stats: Stats, rows: list[tuple[str, int, str, dict[str, Any]]]) -> None:
    """lost / duplicated / gaps from the journal against what the agents saw acknowledged."""
    markers: Counter[str] = Counter()
    decided: dict[str, list[tuple[str, int]]] = {}
    seqs: dict[str, list[int]] = {}
    for task, seq, kind, payload in rows:
        seqs.setdefault(task, []).append(seq)
        args = payload.get("args")
        if kind in ("tool_result", "tool_failure") and isinstance(args, dict) and isinstance(args.get("k"), str):
            markers[args["k"]] += 1
        if kind == "decision_added":
            decided.setdefault(str(payload.get("text")), []).append((task, seq))
    stats.lost = sum(1 for m in stats.observed if markers[m] == 0)
    stats.lost += sum(1 for text, at in stats.updates.items() if at not in decided.get(text, []))
    stats.duplicated = sum(1 for n in markers.values() if n > 1) + sum(1 for at in decided.values() if len(at) > 1)
    stats.gaps = sum(1 for s in seqs.values() if s != list(range(1, len(s) + 1)))


# -- the agents --------------------------------------------------------------------------------------


async def run_phase(stats: Stats, urls: list[str], pids: list[int], seconds: float) -> None:
    from mcp import Client

    async with AsyncExitStack() as stack:
        clients = [(await stack.enter_async_context(Client(url)), d) for d, url in enumerate(urls)
                   for _ in range(stats.agents)]
        setup = clients[0][0]
        first = await setup.call_tool("observe", {"task_id": await start(setup, "bench setup", stats),
                                                  "kind": "result", "tool": "cat", "result": REF_TEXT * 6})
        short = first.structured_content["ref"]
        # tasks shared by SHARE agents; in the 2-daemon phase each one is shared across both daemons
        order = sorted(range(len(clients)), key=lambda i: (i % stats.agents, i // stats.agents))
        shared = [await start(setup, f"shared task {n}", stats) for n in range((len(clients) + SHARE - 1) // SHARE)]
        task_of = {i: shared[rank // SHARE] for rank, i in enumerate(order)}
        stop_at = time.monotonic() + seconds
        t0 = time.monotonic()

        async def agent(i: int, client: Any) -> None:
            rng = random.Random(i)
            own = await start(client, f"agent {i} fixes a bug", stats)
            task = task_of[i]
            status = await client.call_tool("plan", {"mode": "status", "task_id": task})
            version = int(status.structured_content["version"])
            n = 0
            while time.monotonic() < stop_at:
                n += 1
                marker = f"m-{i}-{n}"
                body = f"{marker}\n" + "".join(f"{marker} line {j}: ok\n" for j in range(rng.randint(50, 2000)))
                if await call(stats, client, "observe", "observe", {"task_id": own, "kind": "result", "tool": "pytest",
                                                                    "args": {"k": marker}, "result": body}):
                    stats.observed.append(marker)
                await call(stats, client, "recall", "recall", {"ref": short, "op": "head", "lines": 5})
                decision = f"d-{i}-{n}"
                got = await call(stats, client, "plan", "plan update", {
                    "mode": "update", "task_id": task, "based_on_version": version, "decisions": [decision]})
                if got is not None:
                    version = int(got["version"])
                    stats.updates[decision] = (task, version)
                else:
                    status = await client.call_tool("plan", {"mode": "status", "task_id": task})
                    version = int(status.structured_content["version"]) if not status.is_error else version

        await asyncio.gather(*(agent(i, c) for i, (c, _) in enumerate(clients)))
        stats.seconds = time.monotonic() - t0
    stats.rss_mb = [rss_kb(pid) / 1024 for pid in pids]


async def start(client: Any, objective: str, stats: Stats) -> str:
    got = await client.call_tool("plan", {"mode": "start", "objective": objective, "steps": ["a", "b"]})
    if got.is_error:
        raise RuntimeError(f"plan start failed: {got.content}")
    task = str(got.structured_content["task_id"])
    stats.tasks.add(task)
    return task


async def phase(name: str, daemons: int, agents: int, seconds: float, root: Path,
                database_url: str | None) -> Stats:
    stats = Stats(name, daemons, agents)
    procs = []
    try:
        homes = [root / f"{name.replace(' ', '-')}-{d}" for d in range(daemons)]
        for home in homes:
            procs.append(spawn_daemon(home, database_url, root / f"{home.name}.log"))
        urls = [str((await wait_daemon(h, p.pid, ready=True))["url"]) for h, p in zip(homes, procs, strict=True)]
        await run_phase(stats, urls, [p.pid for p in procs], seconds)
    finally:
        for proc in procs:
            stop(proc)
    audit(stats, journal_rows(database_url, homes[0] / "bosun.db", stats.tasks))
    return stats


# -- small calls, one client, the two backends interleaved -------------------------------------------

SMALL = ("recall 5 lines", "observe a decision", "plan status")


async def small_calls(root: Path, database_url: str, rounds: int) -> dict[str, dict[str, list[float]]]:
    """One SQLite daemon and one PostgreSQL daemon up at once, one client each, nothing else from this
    bench running: each round times the three small calls on both, alternating which goes first, so
    load that drifts during the run weighs on both alike. Returns backend -> call -> latencies."""
    from mcp import Client

    homes = {"sqlite": root / "small-sqlite", "postgres": root / "small-postgres"}
    procs = {name: spawn_daemon(home, database_url if name == "postgres" else None, root / f"{home.name}.log")
             for name, home in homes.items()}
    out: dict[str, dict[str, list[float]]] = {name: {c: [] for c in SMALL} for name in homes}
    try:
        urls = {name: str((await wait_daemon(homes[name], proc.pid, ready=True))["url"])
                for name, proc in procs.items()}
        async with Client(urls["sqlite"]) as lite, Client(urls["postgres"]) as pg:
            clients = {"sqlite": lite, "postgres": pg}
            setup: dict[str, tuple[str, str]] = {}
            for name, client in clients.items():
                stats = Stats(name, 1, 1)
                task = await start(client, "small calls", stats)
                stored = await client.call_tool("observe", {"task_id": task, "kind": "result", "tool": "cat",
                                                            "result": REF_TEXT * 6})
                setup[name] = (task, str(stored.structured_content["ref"]))
            for r in range(rounds):
                for name in (("sqlite", "postgres") if r % 2 == 0 else ("postgres", "sqlite")):
                    task, ref = setup[name]
                    calls: list[tuple[str, dict[str, Any]]] = [
                        ("recall", {"ref": ref, "op": "head", "lines": 5}),
                        ("observe", {"task_id": task, "kind": "decision", "text": f"small call {r}"}),
                        ("plan", {"mode": "status", "task_id": task}),
                    ]
                    for label, (tool, arguments) in zip(SMALL, calls, strict=True):
                        t0 = time.perf_counter()
                        result = await clients[name].call_tool(tool, arguments)
                        if result.is_error:
                            raise RuntimeError(f"{name} {label} failed: {result.content}")
                        out[name][label].append(time.perf_counter() - t0)
    finally:
        for proc in procs.values():
            stop(proc)
    return out


def render_small(small: dict[str, dict[str, list[float]]], rounds: int) -> list[str]:
    lines = ["", f"Small calls, one client per backend, {rounds} rounds alternating SQLite and PostgreSQL "
                 "(the issue's \"within 2x\" is the last column):", "",
             "| call | SQLite p50 / p99 ms | PostgreSQL p50 / p99 ms | PostgreSQL / SQLite p50 |", "|---|---|---|---|"]
    for label in SMALL:
        lite, pg = small["sqlite"][label], small["postgres"][label]
        lines.append(f"| {label} | {p50(lite):.2f} / {pct(lite, 0.99):.2f} | {p50(pg):.2f} / {pct(pg, 0.99):.2f} | "
                     f"{p50(pg) / p50(lite):.2f}x |")
    return lines


# -- the report --------------------------------------------------------------------------------------


def render(phases: list[Stats], head: list[str], small: list[str]) -> str:
    lines = [*head, "",
             "| phase | daemons x agents | calls/s | observe p50 / p99 ms | recall p50 / p99 ms | "
             "plan update p50 / p99 ms | failed calls | conflicts | lost / duplicated / gaps | daemon RSS MB |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for s in phases:
        cells = " | ".join(f"{p50(s.latencies[t]):.1f} / {pct(s.latencies[t], 0.99):.1f}" for t in TOOLS)
        errors = ", ".join(f"{k}: {v}" for k, v in s.errors.most_common()) or "0"
        rss = " + ".join(f"{r:.0f}" for r in s.rss_mb)
        lines.append(f"| {s.name} | {s.daemons} x {s.agents} | {s.calls() / s.seconds:.1f} | {cells} | {errors} | "
                     f"{s.conflicts} | {s.lost} / {s.duplicated} / {s.gaps} | {rss} |")
    by_name = {s.name: s for s in phases}
    lite = by_name.get("sqlite x1")
    for name in ("postgres x1", "postgres x1 async"):
        pg = by_name.get(name)
        if lite is None or pg is None:
            continue
        lines += ["", f"{name} / sqlite x1, one daemon, same agents, same run (p50 ratio; the target is <= 2.0x):",
                  ""]
        for t in TOOLS:
            lines.append(f"- {t}: {p50(pg.latencies[t]) / p50(lite.latencies[t]):.2f}x "
                         f"(p99 {pct(pg.latencies[t], 0.99) / pct(lite.latencies[t], 0.99):.2f}x)")
        lines.append(f"- throughput: {(pg.calls() / pg.seconds) / (lite.calls() / lite.seconds):.2f}x")
    return "\n".join(lines + small) + "\n"


async def main(args: argparse.Namespace) -> str:
    with tempfile.TemporaryDirectory(prefix="bosun-backends-") as tmp:
        root = Path(tmp)
        with (throwaway_cluster() if args.database_url is None
              else _given(args.database_url)) as admin_url:
            settings = pg_settings(admin_url)
            small = render_small(await small_calls(root, create_database(admin_url, "bosun_bench_small"),
                                                   args.rounds), args.rounds)
            phases = [await phase("sqlite x1", 1, args.agents, args.seconds, root, None)]
            url = create_database(admin_url, "bosun_bench_x1")
            phases.append(await phase("postgres x1", 1, args.agents, args.seconds, root, url))
            # the commit's WAL flush apart: the durability SQLite's synchronous=NORMAL gives (a killed
            # daemon loses nothing; a crash of the database server may lose the last commits)
            url = create_database(admin_url, "bosun_bench_x1_async", synchronous_commit="off")
            phases.append(await phase("postgres x1 async", 1, args.agents, args.seconds, root, url))
            url = create_database(admin_url, "bosun_bench_x2")
            phases.append(await phase("postgres x2", 2, args.agents, args.seconds, root, url))
    load = os.getloadavg()
    head = [f"store_backends: {args.seconds:.0f} s per phase, {args.agents} agents per daemon over HTTP, "
            f"{os.cpu_count()} CPUs, load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1/5/15 min) at the end",
            f"SQLite: WAL, synchronous=NORMAL (bosun's setting); {settings}"]
    return render(phases, head, small)


@contextmanager
def _given(url: str) -> Iterator[str]:
    yield url


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0, help="length of each phase (<= 120)")
    parser.add_argument("--agents", type=int, default=25, help="agents per daemon (<= 50)")
    parser.add_argument("--rounds", type=int, default=200, help="rounds of the interleaved small-call probe")
    parser.add_argument("--database-url", default=None,
                        help="an existing server's admin URL (databases bosun_bench_x1/_x2 are re-created there)")
    parser.add_argument("--out", type=Path, default=None)
    ns = parser.parse_args()
    if ns.seconds > 120 or ns.agents > 50:
        parser.error("keep runs bounded: --seconds <= 120 and --agents <= 50 (the machine is shared)")
    report = asyncio.run(main(ns))
    print(report)
    if ns.out is not None:
        ns.out.write_text(report)
