"""``bosun stats [--json]``: what bosun saved, routed, blocked and audited, from a shell.

Asks the running daemon of the home for the dashboard's snapshot (``/dashboard/api/stats``);
with no daemon running, builds the same snapshot from the store and the telemetry file directly
(the policy index is then not loaded: routing shows the recorded outcomes without the corpus).
Exit 0, or 2 when there is no bosun state at the home yet.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

NAME = "stats"
HELP = "per-task and overall savings, routing shares and latency, precheck blocks, audits (--json for the raw figures)"
EXAMPLE = "bosun stats --json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the snapshot as JSON (the dashboard's data)")
    parser.add_argument("--tasks", type=int, default=10, help="tasks listed in the text report (default 10)")
    parser.add_argument("--home", help="state directory (default $BOSUN_HOME or ~/.bosun)")


def _n(value: Any) -> str:
    return f"{int(value or 0):,}"


def _pct(share: float) -> str:
    return f"{100 * share:.1f}%"


def render(s: dict[str, Any], max_tasks: int = 10) -> str:
    """The snapshot as a short text report (the figures a person looks for first)."""
    d, sav, r, g, a = s["daemon"], s["savings"]["overall"], s["routing"], s["guard"], s["audits"]
    if s.get("source") == "store":
        where = "from the store: no daemon is running"
    else:
        where = f"from the daemon: bosun {d.get('version', '?')}, up {d.get('uptime_s', 0) / 60:.0f} min"
    lines = [f"bosun stats  ({where})", ""]
    lines += render_fleet(s.get("fleet"))
    cost = sav.get("cost_usd", {})
    lines += [
        f"Savings over {sav.get('tasks', 0)} task(s)",
        f"  offloaded     {_n(sav['offloaded_tokens']):>12} tokens in {_n(sav['offloaded_count'])} result(s)"
        f" ({_n(sav['pending_drop_tokens'])} awaiting a drop receipt)",
        f"  credited      {_n(sav['credited_tokens']):>12} tokens ({_n(sav['dropped_count'])} drop receipt(s))",
        f"  overhead      {_n(sav['overhead_tokens']):>12} tokens (stubs and receipts the agent carried)",
        f"  recalled      {_n(sav['recalled_tokens']):>12} tokens",
        f"  net saved     {_n(sav['net_tokens']):>12} tokens  ~ ${cost.get('net_savings', 0):.4f}"
        f" at ${cost.get('usd_per_mtok', 0):g}/M",
        "",
    ]
    tasks = s["tasks"][:max_tasks]
    if tasks:
        lines.append(f"Tasks (most recent {len(tasks)} of {len(s['tasks'])})")
        lines.append(f"  {'task':<16} {'status':<8} {'v':>4} {'offloaded':>10} {'net':>9} {'blocked':>7} {'drift':<15} objective")
        for t in tasks:
            obj = t["objective"] if len(t["objective"]) <= 50 else t["objective"][:49] + "…"
            lines.append(f"  {t['task_id']:<16} {t['status']:<8} {t['version']:>4} {_n(t['ledger']['offloaded_tokens']):>10} "
                         f"{_n(t['ledger']['net_tokens']):>9} {t['guard']['block']:>7} {t['last_drift'] or '-':<15} {obj}")
        lines.append("")
    if r["attempts"]:
        lat = r["latency_ms"]
        lines.append(f"Routing: {r['attempts']} attempt(s): routed {_pct(r['shares']['routed'])}, abstained "
                     f"{_pct(r['shares']['abstained'])}, failed {_pct(r['shares']['failed'])}; delivered p50 "
                     f"{lat['delivered_p50']:.1f} ms, p99 {lat['delivered_p99']:.1f} ms")
        if r["top_policies"]:
            lines.append("  top policies: " + ", ".join(f"{p['name']} ({p['count']})" for p in r["top_policies"]))
        if r.get("never_routed"):
            lines.append("  never routed: " + ", ".join(r["never_routed"]))
        if r.get("failure_classes"):
            lines.append("  failures: " + ", ".join(f"{k} {v}" for k, v in r["failure_classes"].items()))
    else:
        lines.append("Routing: no route recorded yet")
    verdicts = g["verdicts"]
    lines.append(f"Prechecks: {g['prechecks']}: " + (", ".join(f"{k} {v}" for k, v in sorted(verdicts.items())) or "none"))
    if g["top_rules"]:
        lines.append("  rules that fired: " + ", ".join(f"{x['rule']} ({x['count']})" for x in g["top_rules"]))
    lines.append(f"Audits: {a['count']}: {a['passed']} passed, {a['failed']} failed")
    if a["top_failure_reasons"]:
        lines.append("  most frequent failure reasons: "
                     + ", ".join(f"{x['reason']} ({x['count']})" for x in a["top_failure_reasons"]))
    if not s["telemetry"]["enabled"]:
        lines.append("(telemetry is off: routing, prechecks and audits are not recorded; BOSUN_TELEMETRY=on)")
    return "\n".join(lines)


def render_fleet(fleet: dict[str, Any] | None) -> list[str]:
    """The daemons sharing this state (PostgreSQL: every sidecar and worker that beat recently)."""
    if not fleet or not fleet.get("members"):
        return []
    if fleet.get("error"):
        return [f"Fleet: unknown ({fleet['error']})", ""]
    lines = [f"Fleet: {fleet['daemons']} daemon(s) on {fleet['hosts']} host(s): {_n(fleet['calls'])} calls, "
             f"{_n(fleet['errors'])} failed, {fleet['sessions']} recent session(s)"]
    for m in fleet["members"]:
        worker = f" worker {m['worker']}" if m.get("worker") is not None else ""
        state = "alive" if m["alive"] else "gone"
        lines.append(f"  {m['host']} pid {m['pid']}{worker}  {state:<5} {_n(m['calls']):>9} calls "
                     f"{_n(m['errors']):>6} failed {m['sessions']:>4} sessions {m['rss_kb'] / 1024:7.0f} MB")
    return [*lines, ""]


async def local_snapshot(config: Any) -> dict[str, Any]:
    """The snapshot built in this process from the store (no model loaded, no policy index)."""
    from bosun.server.dashboard.fleet import fleet_snapshot
    from bosun.server.engine import Engine
    from bosun.server.services.stats import StatsService

    def no_model(_config: Any) -> Any:
        raise RuntimeError("not loaded by `bosun stats` (no daemon is running)")

    import logging

    logging.getLogger("bosun.engine").setLevel(logging.CRITICAL)  # the model is not loaded on purpose
    engine = Engine(config, embedder_factory=no_model)
    await engine.open(watch_policies=False)
    try:
        snap = await StatsService(engine).snapshot()
        snap["fleet"] = await fleet_snapshot(engine)
    finally:
        await engine.close()
    snap["daemon"] = {"version": snap["daemon"].get("version"), "uptime_s": 0, "reachable": False,
                      "store": snap["daemon"].get("store")}
    return snap


def snapshot(config: Any) -> dict[str, Any] | None:
    """From the daemon when one answers, else from the store; None when the home has no state."""
    import asyncio

    from bosun.server.commands._daemon import DaemonUnreachable, daemon_base, get_json

    try:
        base, token = daemon_base(config.home)
        status, body = get_json(base, "/dashboard/api/stats", token)
        if status == 200:
            body["source"] = "daemon"
            return body
    except DaemonUnreachable:
        pass
    if not config.database_url and not config.db_path.exists():
        return None
    snap = asyncio.run(local_snapshot(config))
    snap["source"] = "store"
    return snap


def run(args: argparse.Namespace) -> int:
    from bosun.server.commands import config_of

    config = config_of(args)
    snap = snapshot(config)
    if snap is None:
        print(f"no bosun state at {config.home} yet: start the daemon (`bosun serve`) and connect a harness",
              file=sys.stderr)
        return 2
    print(json.dumps(snap, indent=2) if args.json else render(snap, args.tasks))
    return 0
