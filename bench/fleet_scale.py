"""One daemon or several: the fleet mix on SQLite, on PostgreSQL, and on two daemons behind HAProxy.

    python bench/fleet_scale.py [--sessions 20 100 200] [--seconds 20] [--workers] [--profile]
                                [--out bench/results/fleet_scale.md]

In one run, on one machine, each configuration serves the same agents (SDK clients over streamable
HTTP, all in this process) for ``--seconds`` per session count:

* ``sqlite x1``: one ``bosun serve`` on SQLite;
* ``postgres x1``: one ``bosun serve`` on a throwaway PostgreSQL (``fsync=off``, ``synchronous_commit=on``);
* ``postgres x2 haproxy``: two ``bosun serve`` on that PostgreSQL behind Debian's haproxy running the
  shipped ``deploy/haproxy.cfg`` (affinity on ``Mcp-Session-Id``; the compose template replaced by the
  two local addresses, as the tests do);
* ``postgres --workers 2`` (with ``--workers``): ``bosun serve --workers 2`` on one port.

Every agent loops over the mix of ``bench/fleet_load.py``'s ``mixed_agent``: observe of a 5-50 KB result
(offloaded when large), recall by short ref, plan update with ``based_on_version``, select_context. Per
phase: calls/s, p50/p99, errors, conflicts (stale versions: answers, not failures), lost and duplicated
observes (the journal audited against what was acknowledged), the CPU seconds and RSS of every process
(daemons, haproxy, PostgreSQL's processes summed, this load generator).

``--profile``: afterwards, one more 100-session phase on ``postgres x1`` with ``py-spy record`` attached to
the daemon (``PY_SPY`` or ``py-spy`` on PATH), summarised as the functions holding the most samples.
The load generator shares the machine's cores with the daemons; it is reported so its share is seen.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))
from fleet_load import Phase, cpu_seconds, journal_markers, mixed_agent, rss_kb, wait_warm  # noqa: E402
from store_backends import create_database, spawn_daemon, throwaway_cluster  # noqa: E402
from transport_bench import clean_env, stop, wait_daemon  # noqa: E402

LINES = (230, 2300)  # ~22 bytes a line: 5-50 KB per observe


@dataclass
class Proc:
    label: str
    pid: int


@dataclass
class Config:
    name: str
    url: str
    procs: list[Proc]
    database_url: str | None
    db_path: Path
    handles: list[Any] = field(default_factory=list)


def pg_pids() -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() in ("postgres", "postmaster"):
                    out.append(int(entry.name))
            except OSError:
                pass
    return out


def safe_cpu(pid: int) -> float:
    try:
        return cpu_seconds(pid)
    except OSError:
        return 0.0


def safe_rss(pid: int) -> int:
    try:
        return rss_kb(pid)
    except OSError:
        return 0


async def phase(cfg: Config, n: int, seconds: float, tag: str) -> dict[str, Any]:
    from mcp import Client

    ph = Phase(cfg.name, n, seconds)
    async with AsyncExitStack() as stack:
        # opened one by one: an SDK client must be entered and left in the same task
        clients = [await stack.enter_async_context(Client(cfg.url)) for _ in range(n)]
        procs = [*cfg.procs, *(Proc("postgres", p) for p in (pg_pids() if cfg.database_url else []))]
        me = os.getpid()
        cpu0 = {p.pid: safe_cpu(p.pid) for p in procs} | {me: safe_cpu(me)}
        stop_at = time.monotonic() + seconds
        t0 = time.monotonic()
        await asyncio.gather(*(mixed_agent(ph, c, i, stop_at, LINES, "select_context", tag)
                               for i, c in enumerate(clients)))
        ph.seconds = time.monotonic() - t0
        cpu = {pid: safe_cpu(pid) - c0 for pid, c0 in cpu0.items()}
        rss = {p.pid: safe_rss(p.pid) for p in procs} | {me: safe_rss(me)}
    markers = journal_markers(cfg.db_path, cfg.database_url)
    ph.lost = sum(1 for m in ph.acknowledged if markers.get(m, 0) == 0)
    ph.duplicated = sum(1 for m in ph.acknowledged if markers.get(m, 0) > 1)
    per_proc: Counter[str] = Counter()
    per_rss: Counter[str] = Counter()
    for p in procs:
        per_proc[p.label] += cpu.get(p.pid, 0.0)
        per_rss[p.label] += rss.get(p.pid, 0)
    per_proc["load generator"] += cpu[me]
    per_rss["load generator"] += rss[me]
    lat = sorted(ph.latencies)
    return {
        "config": cfg.name, "sessions": n, "seconds": ph.seconds, "calls": len(lat),
        "rate": len(lat) / ph.seconds, "p50": statistics.median(lat) * 1000 if lat else float("nan"),
        "p99": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000 if lat else float("nan"),
        "errors": dict(ph.errors), "conflicts": ph.conflicts, "acknowledged": len(ph.acknowledged),
        "lost": ph.lost, "duplicated": ph.duplicated,
        "cpu": {k: round(v, 1) for k, v in per_proc.items()}, "rss_mb": {k: round(v / 1024) for k, v in per_rss.items()},
    }


def haproxy_config(servers: list[str], port: int) -> str:
    from tests.test_scale import local_config

    return local_config(servers, port)


async def start_daemons(root: Path, name: str, count: int, database_url: str | None) -> list[tuple[Any, str, Path]]:
    out = []
    for i in range(count):
        home = root / f"{name}-{i}"
        proc = spawn_daemon(home, database_url, root / f"{name}-{i}.log")
        out.append((proc, home))
    started = []
    for proc, home in out:
        daemon = await wait_daemon(home, proc.pid, ready=True)
        await wait_warm(str(daemon["url"]))
        started.append((proc, str(daemon["url"]), home))
    return started


async def configs(root: Path, admin_url: str, which: list[str]) -> Any:
    """Yield each configuration, started and warm; stopped after its phases."""
    for name in which:
        handles: list[Any] = []
        if name == "sqlite x1":
            (proc, url, home), = await start_daemons(root, "sqlite", 1, None)
            cfg = Config(name, url, [Proc("daemon", proc.pid)], None, home / "bosun.db", [proc])
        elif name == "postgres x1":
            db = create_database(admin_url, "scale_x1")
            (proc, url, home), = await start_daemons(root, "pg1", 1, db)
            cfg = Config(name, url, [Proc("daemon", proc.pid)], db, home / "bosun.db", [proc])
        elif name == "postgres x2 haproxy":
            db = create_database(admin_url, "scale_x2")
            pair = await start_daemons(root, "pg2", 2, db)
            import socket

            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = int(s.getsockname()[1])
            cfg_file = root / "haproxy.cfg"
            cfg_file.write_text(haproxy_config([u.removeprefix("http://").removesuffix("/mcp") for _, u, _ in pair], port))
            haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
            with open(root / "haproxy.log", "wb") as log:
                lb = subprocess.Popen([haproxy, "-db", "-f", str(cfg_file)], stdout=subprocess.DEVNULL, stderr=log)
            url = f"http://127.0.0.1:{port}/mcp"
            await wait_warm(url)
            await asyncio.sleep(3)  # both servers' first health checks (inter 2s) mark them up
            handles = [p for p, _, _ in pair] + [lb]
            cfg = Config(name, url, [Proc("daemon", p.pid) for p, _, _ in pair] + [Proc("haproxy", lb.pid)], db,
                         root / "none.db", handles)
        elif name == "postgres --workers 2":
            db = create_database(admin_url, "scale_workers")
            home = root / "workers"
            env = clean_env(BOSUN_DATABASE_URL=db)
            with open(root / "workers.log", "wb") as log:
                sup = subprocess.Popen([sys.executable, "-m", "bosun", "serve", "--workers", "2", "--port", "0",
                                        "--home", str(home)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=log, env=env, cwd=ROOT)
            daemon = await wait_daemon(home, sup.pid, ready=True)
            await wait_warm(str(daemon["url"]))
            kids = Path(f"/proc/{sup.pid}/task/{sup.pid}/children").read_text().split()
            cfg = Config(name, str(daemon["url"]), [Proc("supervisor", sup.pid)] + [Proc("daemon", int(k)) for k in kids],
                         db, home / "bosun.db", [sup])
        else:
            raise SystemExit(f"unknown configuration {name!r}")
        try:
            yield cfg
        finally:
            for h in reversed(cfg.handles):
                stop(h)


def row(r: dict[str, Any]) -> str:
    errs = ", ".join(f"{k}: {v}" for k, v in r["errors"].items()) or "0"
    cpu = ", ".join(f"{k} {v}" for k, v in r["cpu"].items())
    rss = ", ".join(f"{k} {v}" for k, v in r["rss_mb"].items())
    return (f"| {r['config']} | {r['sessions']} | {r['rate']:.1f} | {r['p50']:.0f} | {r['p99']:.0f} | {errs} | "
            f"{r['conflicts']} | {r['lost']} / {r['duplicated']} of {r['acknowledged']} | {cpu} | {rss} |")


def summarise_profile(raw: Path, top: int = 25) -> list[str]:
    """py-spy's collapsed stacks -> the leaf functions and the bosun functions holding the most samples."""
    leaf: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        leaf[re.sub(r" \(.*?\)$", "", frames[-1]) if frames else "?"] += n
        for f in set(frames):
            name = f.split(" (")[0]
            where = f[f.find("(") + 1:].split(":")[0] if "(" in f else ""
            if "bosun" in where or "/work/main/" in where:
                inclusive[f"{name} ({where.split('/main/')[-1]})"] += n
    lines = [f"{total} samples", "", "| leaf function (self) | share |", "|---|---|"]
    lines += [f"| {k} | {100 * v / total:.1f}% |" for k, v in leaf.most_common(top)]
    lines += ["", "| bosun function (inclusive) | share |", "|---|---|"]
    lines += [f"| {k} | {100 * v / total:.1f}% |" for k, v in inclusive.most_common(top)]
    return lines


async def main(args: argparse.Namespace) -> str:
    which = ["sqlite x1", "postgres x1", "postgres x2 haproxy"] + (["postgres --workers 2"] if args.workers else [])
    results: list[dict[str, Any]] = []
    notes: list[str] = []
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bosun-scale-") as tmp, throwaway_cluster() as admin:
        root = Path(tmp)
        from store_backends import pg_settings

        notes.append(f"- PostgreSQL: {pg_settings(admin)}")
        async for cfg in configs(root, admin, which):
            for n in args.sessions:
                r = await phase(cfg, n, args.seconds, f"{cfg.name.split()[0]}{len(cfg.procs)}-{n}")
                results.append(r)
                print(row(r), flush=True)
        profile: list[str] = []
        if args.profile:
            spy = os.environ.get("PY_SPY") or shutil.which("py-spy")
            if spy is None:
                raise SystemExit("--profile needs py-spy (PY_SPY=/path/to/py-spy or on PATH)")
            async for cfg in configs(root, admin, ["postgres x1"]):
                raw = root / "profile.txt"
                rec = subprocess.Popen([spy, "record", "-p", str(cfg.procs[0].pid), "-d", str(int(args.seconds) + 5),
                                        "-r", "50", "-f", "raw", "-o", str(raw)], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
                r = await phase(cfg, 100, args.seconds, "profile")
                rec.wait(timeout=120)
                profile = [f"Profiled phase (py-spy at 50 Hz attached): {row(r)}", "", *summarise_profile(raw)]
    load = os.getloadavg()
    head = [f"fleet_scale: {args.seconds:.0f} s per phase, {os.cpu_count()} CPUs, load average "
            f"{load0[0]:.1f} at the start, {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1/5/15 min) at the end", "",
            "| configuration | sessions | calls/s | p50 ms | p99 ms | errors | conflicts | lost / duplicated | "
            "CPU s in the phase | RSS MB |", "|---|---|---|---|---|---|---|---|---|---|"]
    by = {(r["config"], r["sessions"]): r for r in results}
    for n in args.sessions:
        one, two = by.get(("postgres x1", n)), by.get(("postgres x2 haproxy", n))
        if one and two:
            notes.append(f"- {n} sessions: 2 daemons behind haproxy at {two['rate'] / one['rate']:.2f}x the "
                         f"throughput of 1 daemon on the same PostgreSQL")
        w = by.get(("postgres --workers 2", n))
        if one and w:
            notes.append(f"- {n} sessions: `--workers 2` at {w['rate'] / one['rate']:.2f}x")
    out = head + [row(r) for r in results] + [""] + notes
    if args.profile:
        out += ["", *profile]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, nargs="+", default=[20, 100, 200])
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each phase (<= 60)")
    parser.add_argument("--workers", action="store_true", help="also run bosun serve --workers 2")
    parser.add_argument("--profile", action="store_true", help="profile the PostgreSQL daemon at 100 sessions")
    parser.add_argument("--out", type=Path, default=None)
    ns = parser.parse_args()
    if ns.seconds > 60 or max(ns.sessions) > 200:
        parser.error("keep runs bounded: --seconds <= 60 and at most 200 sessions (the machine is shared)")
    report = asyncio.run(main(ns))
    print(report)
    if ns.out is not None:
        ns.out.write_text(report)
