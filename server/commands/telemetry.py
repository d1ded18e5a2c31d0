"""``bosun telemetry report [FILE]``: is routing working? Shares, latency, documents that never route.

Reads the route events of the local telemetry file ($BOSUN_TELEMETRY_PATH, else
$BOSUN_HOME/telemetry.jsonl, rotated files included; on unless BOSUN_TELEMETRY=off). A turn that
produced no routes because something failed and one where nothing applied are
different lines here; the delivered latency is printed beside the warm route
latency; documents that never routed are named (their routing surfaces are not
discriminating), given the corpus with ``--policies``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

NAME = "telemetry"
HELP = "summarise route telemetry ($BOSUN_HOME/telemetry.jsonl): outcomes, latency, documents never routed"
EXAMPLE = "bosun telemetry report"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="telemetry_what", required=True)
    rp = sub.add_parser("report", help="print the report")
    rp.add_argument("file", nargs="?", help="events JSONL (default $BOSUN_TELEMETRY_PATH or $BOSUN_HOME/telemetry.jsonl)")
    rp.add_argument("--home", help="state directory (default $BOSUN_HOME or ~/.bosun)")
    rp.add_argument("--policies", action="append", metavar="DIR",
                    help="corpus directory, to name documents that never routed (default: $BOSUN_POLICIES or the demo corpus)")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    idx = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[idx]


def summarise(events: list[dict[str, Any]], corpus: list[str] | None) -> str:
    """The report over the route events among ``events`` (tool events are the dashboard's)."""
    from bosun.server.telemetry import is_route

    events = [e for e in events if is_route(e)]
    n = len(events)
    lines = [f"bosun telemetry: {n} route attempt(s)", ""]
    if not n:
        return "\n".join([*lines, "no events yet"])
    outcomes = Counter(e.get("outcome", "?") for e in events)
    for outcome in ("routed", "abstained", "failed"):
        lines.append(f"  {outcome:<10} {outcomes.get(outcome, 0):>6}  ({100 * outcomes.get(outcome, 0) / n:.1f}%)")
        if outcome == "failed":
            classes = Counter(e.get("failure_class", "?") for e in events if e.get("outcome") == "failed")
            for cls, count in classes.most_common():
                lines.append(f"      {cls:<10} {count:>6}")
    degraded = sum(1 for e in events if e.get("degraded"))
    lines.append(f"  {'degraded':<10} {degraded:>6}  ({100 * degraded / n:.1f}%)")
    cached = sum(1 for e in events if e.get("cached"))
    lines.append(f"  {'cached':<10} {cached:>6}  ({100 * cached / n:.1f}%)")
    delivered = [float(e["delivered_ms"]) for e in events if "delivered_ms" in e and e.get("outcome") != "failed"]
    warm = [float(e["route_ms"]) for e in events if "route_ms" in e]
    lines.append("")
    if delivered:
        lines.append(f"  delivered  p50 {percentile(delivered, 50):.2f} ms   p99 {percentile(delivered, 99):.2f} ms")
    if warm:
        lines.append(f"  route      p50 {percentile(warm, 50):.2f} ms   p99 {percentile(warm, 99):.2f} ms")
        if delivered and percentile(delivered, 50) > 0:
            share = 100 * percentile(warm, 50) / percentile(delivered, 50)
            lines.append(f"             route is {share:.1f}% of delivered (p50)")
    by_via = Counter(e.get("via", "?") for e in events)
    lines.append("  via        " + ", ".join(f"{k} {v}" for k, v in sorted(by_via.items())))
    sizes = sorted({int(e["corpus_size"]) for e in events if e.get("corpus_size")})
    if sizes:
        lines.append(f"  corpus size {', '.join(map(str, sizes))}")
    routed_names = Counter(name for e in events for name in e.get("names") or [])
    lines.append("")
    if corpus is not None:
        lines.append(f"  documents routed at least once: {sum(1 for c in corpus if routed_names[c])}/{len(corpus)}")
        never = [c for c in corpus if not routed_names[c]]
        if never:
            lines.append("  NEVER ROUTED (their routing surfaces may not be discriminating):")
            lines.extend(f"      {c}" for c in never)
    for name, count in routed_names.most_common(10):
        lines.append(f"  {count:>6}  {name}")
    return "\n".join(lines)


def read_events(path: Path) -> list[dict[str, Any]]:
    """The events of a file and of its rotated generations, oldest first."""
    from bosun.server.telemetry import read_events as read

    return read(path)


def run(args: argparse.Namespace) -> int:
    from bosun.server import telemetry
    from bosun.server.commands import config_of

    config = config_of(args)
    target = args.file or telemetry.sink_of(config.telemetry, config.telemetry_path, config.home)
    if not target:
        print("telemetry is off (BOSUN_TELEMETRY=off): pass FILE", file=sys.stderr)
        return 2
    path = Path(target).expanduser()
    if not telemetry.generations(path):
        print(f"{path}: no events yet (has a daemon with telemetry on served a route?)", file=sys.stderr)
        return 2
    from bosun.server.services.policies import CorpusError, demo_corpus_dir, scan_corpus

    dirs = [Path(d).expanduser() for d in (args.policies or [])]
    if not dirs:
        env = [Path(p).expanduser() for p in os.environ.get("BOSUN_POLICIES", "").split(":") if p.strip()]
        dirs = env or [demo_corpus_dir()]
    try:
        corpus: list[str] | None = sorted(p.name for p in scan_corpus(dirs).policies)
    except CorpusError as exc:
        print(f"warning: {exc}; not naming unrouted documents", file=sys.stderr)
        corpus = None
    print(summarise(read_events(path), corpus))
    return 0
