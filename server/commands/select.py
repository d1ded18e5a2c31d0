"""``bosun select FILE``: run select_context on a JSON file and print a readable table.

FILE holds ``{"goal": ..., "candidates": [...], "context": [...], "budget": N}``
(``budget_tokens`` is accepted too; ``-`` reads stdin). It runs standalone with
the embedded model on a private Engine over ``--home`` (default $BOSUN_HOME), so
embeddings are cached there and a second run does not re-embed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

NAME = "select"
HELP = "pick the context that fits a token budget (select_context on a JSON file)"
EXAMPLE = "bosun select examples/select-request.json --compare"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help='JSON file {goal, candidates, context, budget} ("-" for stdin)')
    parser.add_argument("--strategy", choices=["hybrid", "psi0", "mmr", "baseline"], help="default: the file's, else hybrid")
    parser.add_argument("--budget", type=int, help="override the file's budget (tokens)")
    parser.add_argument("--mmr-lambda", type=float, default=0.7)
    parser.add_argument("--floor", type=float, default=None,
                        help="relative relevance floor (share of the best candidate's relevance; default the tool's)")
    parser.add_argument("--one-shot", action="store_true", help="iterative=false: score once against the context")
    parser.add_argument("--rejected", type=int, default=5, help="how many rejected items to show")
    parser.add_argument("--json", action="store_true", help="print the tool's JSON result instead of a table")
    parser.add_argument("--compare", action="store_true",
                        help="also run psi0 and baseline on the same input and show what each chose differently")
    parser.add_argument("--home", help="state directory (default $BOSUN_HOME or ~/.bosun)")


def load_request(path: str) -> dict[str, Any]:
    """Read and shape-check the request file; SystemExit-friendly ValueError on bad input."""
    try:
        raw = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror or exc}") from exc
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected an object {{goal, candidates, context, budget}}")
    unknown = sorted(set(data) - {"goal", "candidates", "context", "budget", "budget_tokens", "strategy"})
    if unknown:
        raise ValueError(f"{path}: unknown keys {unknown} (accepted: goal, candidates, context, budget, strategy)")
    return data


def render_table(result: dict[str, Any], goal: str) -> str:
    """The forensic view as plain text columns."""
    lines = [f"goal: {goal}", f"strategy: {result['strategy']}   budget: {result['budget_tokens']} tokens   "
             f"used: {result['tokens_used']}   candidates: {result['candidates']}", ""]
    if result.get("note"):
        lines += [f"note: {result['note']}", ""]
    if result["selected"]:
        lines.append(f"{'#':>2}  {'id':<24} {'tokens':>6} {'relev':>6} {'novel':>6} {'score':>6}  why")
        for row in result["selected"]:
            lines.append(f"{row['rank']:>2}  {_cut(row['id'], 24):<24} {row['tokens']:>6} {row['relevance']:>6.2f} "
                         f"{row['novelty']:>6.2f} {row['score']:>6.2f}  {row['why']}")
        lines.append("")
    if result["rejected"]:
        lines.append(f"rejected (strongest {len(result['rejected'])} of {result['rejected_total']}):")
        lines.append(f"    {'id':<24} {'tokens':>6} {'relev':>6}  {'reason':<12} why")
        for row in result["rejected"]:
            lines.append(f"    {_cut(row['id'], 24):<24} {row['tokens']:>6} {row['relevance']:>6.2f}  "
                         f"{row['reason']:<12} {row['why']}")
    return "\n".join(lines).rstrip() + "\n"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def run(args: argparse.Namespace) -> int:
    import asyncio

    from bosun.core.errors import BosunError
    from bosun.core.selection.select import Params
    from bosun.server.commands import config_of
    from bosun.server.engine import Engine
    from bosun.server.services.select import run_selection, to_result

    floor = {} if args.floor is None else {"relevance_floor": args.floor}
    params = Params(mmr_lambda=args.mmr_lambda, iterative=not args.one_shot, **floor)

    try:
        req = load_request(args.file)
    except ValueError as exc:
        print(f"bosun select: {exc}", file=sys.stderr)
        return 2
    budget = args.budget if args.budget is not None else req.get("budget", req.get("budget_tokens", 2000))
    strategy = args.strategy or req.get("strategy") or "hybrid"
    config = config_of(args)

    strategies = [strategy] + ([s for s in ("psi0", "baseline") if s != strategy] if args.compare else [])

    async def go() -> list[dict[str, Any]]:
        from bosun.server.commands.progress import Progress

        engine = Engine(config)
        # a big pool (or a --compare over it) embeds for a while first: say so on a terminal
        with Progress("loading the model", total=None) as bar:
            await engine.open()
            try:
                results = []
                bar.stage("selecting", total=len(strategies))
                for name in strategies:  # the embeddings are cached after the first run
                    out = await run_selection(engine, req.get("goal"), req.get("candidates"), req.get("context"),
                                              budget, name, params, explain=args.rejected)
                    results.append(to_result(out, show_rejected=args.rejected))
                    bar.advance(note=name)
                return results
            finally:
                await engine.close()

    try:
        results = asyncio.run(go())
    except BosunError as exc:
        print(f"bosun select: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(results[0] if len(results) == 1 else {r["strategy"]: r for r in results}, indent=2))
        return 0
    for i, result in enumerate(results):
        if i:
            sys.stdout.write("\n")
        sys.stdout.write(render_table(result, str(req.get("goal"))))
    if len(results) > 1:
        sys.stdout.write("\n" + render_comparison(results))
    return 0


def render_comparison(results: list[dict[str, Any]]) -> str:
    """psi-loop's task forensics: what the first strategy chose that the others did not, and back."""
    first = results[0]
    mine = [s["id"] for s in first["selected"]]
    lines = [f"comparison ({first['strategy']} vs " + ", ".join(r["strategy"] for r in results[1:]) + "):"]
    for other in results[1:]:
        theirs = [s["id"] for s in other["selected"]]
        only_mine = [x for x in mine if x not in theirs]
        only_theirs = [x for x in theirs if x not in mine]
        if not only_mine and not only_theirs:
            lines.append(f"  {other['strategy']}: same selection" + (" (same order)" if mine == theirs else ""))
            continue
        lines.append(f"  only {first['strategy']}: {', '.join(only_mine) or '-'};  only {other['strategy']}: "
                     f"{', '.join(only_theirs) or '-'}")
    return "\n".join(lines) + "\n"
