"""Overhead modes on real runs: what bosun costs and saves per mode, and what ``auto`` picks.

    python bench/overhead_modes.py [--out bench/results/overhead_modes.md] [--runs N]

Data: ``$BOSUN_SHARED/data/trajectories/{miniswe-dev,tau-airline}.jsonl.gz`` (real coding-agent and
customer-service runs). Every run is replayed call by call under each mode of
``core/task/overhead.py`` (bystander, light, standard, full), under ``auto`` (which picks the mode
online with ``overhead.choose``, from what the run produced so far: no fitted thresholds), and
without bosun (the baseline).

Model (tokens are ``core/tokens.py`` estimates):
- "carried": every prompt holds every earlier output, so an item entering at call i costs its tokens
  in each of the n - i later prompts; the manifest (carried by light/standard/full) sits in every
  prompt from the start;
- an output is offloaded when the mode's prune mode says so and its real stub (outline + stub, as
  observe builds them) costs at most half of it; else it passes through whole;
- precheck calls the agent makes (standard: calls that write or run a program; full: every call)
  enter the context: the request (task id, tool, args, seal) and the answer of the real
  ``core.guard.precheck.evaluate`` on the replayed state. A duplicate verdict on a call the oracle
  confirms as wasted (the same call returned the same output earlier, numbers masked) spares that
  output; other duplicate verdicts spare nothing;
- not modelled: recalls of offloaded content (bench/offload_replay.py measures them for cache_ttl),
  bosun's tool listing (a fixed cost per turn, the same for every mode: bench/tool_tokens.py).

Runs are split as in bench/loop_eval.py (seeded, 30 % held out); auto has nothing fitted, both
halves are reported anyway, per data set (coding vs API agents: the cross-set view).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from loop_eval import DATASETS, Journal, held_out, load, norm_output, output_tokens

from bosun.core.actions import args_hash, error_signature, shell_command, short_args
from bosun.core.guard.invariants import RuleSet
from bosun.core.guard.loopguard import is_mutating_tool
from bosun.core.guard.precheck import evaluate
from bosun.core.guard.shell_effects import analyse
from bosun.core.offload.offload import MODES as PRUNE_MODES
from bosun.core.offload.offload import answer_tokens, build_stub, decide, short_ref, worth_it
from bosun.core.offload.outline import build_outline, detect_kind
from bosun.core.task.manifest import build_manifest
from bosun.core.task.overhead import MODES, Costs, add_call, add_manifest, choose
from bosun.core.tokens import estimate_tokens

ROOT = Path(__file__).resolve().parents[1]
BUCKETS = ((0, 2_000, "< 2k"), (2_000, 8_000, "2k-8k"), (8_000, 32_000, "8k-32k"), (32_000, 10**12, ">= 32k"))
SEAL = "sha256:" + "0" * 64
TASK = "t_000000000000"
NAMES = (*MODES, "auto")


@dataclass
class RunResult:
    dataset: str
    traj_id: str
    calls: int
    baseline: int  # carried tokens without bosun
    entered: int  # output tokens entering the context once (the size of the task)
    carried: dict[str, int] = field(default_factory=dict)  # mode -> carried tokens with bosun
    overhead: dict[str, int] = field(default_factory=dict)  # mode -> bosun's own tokens carried
    auto_modes: list[str] = field(default_factory=list)


def stub_cost(text: str, tokens: int, prune: str, command: str | None) -> int | None:
    """Tokens of the stub observe would return under ``prune``, or None when the output passes through."""
    mode = PRUNE_MODES[prune]
    if not decide(tokens, mode, command).offload:
        return None
    kind = detect_kind(text, command)
    budget = mode.outline_budget(tokens)
    if kind in ("json", "jsonl"):
        budget = max(budget, min(120, tokens // 4))
    outline = build_outline(text, budget=budget, command=command, kind=kind)
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    cost = answer_tokens({"offloaded": True, **build_stub(short_ref(digest), len(text), tokens,
                                                          text.count("\n") + 1, outline)})
    return cost if worth_it(tokens, cost) else None


def replay_run(name: str, run: dict[str, Any]) -> RunResult:
    calls = run["calls"]
    n = len(calls)
    journal = Journal(run["traj_id"])
    state = journal.append("task_started", {"objective": f"replay {run['traj_id']}", "plan": []})
    manifest = estimate_tokens(build_manifest(state))
    seen: dict[str, str] = {}
    per_mode_entered: dict[str, list[int]] = {m: [] for m in NAMES}
    per_mode_overhead: dict[str, list[int]] = {m: [] for m in NAMES}  # per call: precheck + stub tokens
    costs = Costs.empty()
    add_manifest(costs, manifest)
    auto_mode = "bystander"
    auto_modes: list[str] = []
    auto_manifest_from: int | None = None
    entered_total = 0
    for i, call in enumerate(calls):
        tool, args, output = call["tool"], call["args"], call.get("output") or ""
        tokens = output_tokens(call)
        entered_total += tokens
        command = shell_command(tool, args)
        effect = analyse(command) if command else None
        runs = (effect is not None and (effect.writes or effect.reads is None)) or (
            command is None and is_mutating_tool(tool))
        answer = evaluate(tool, args, state, RuleSet(), journal.guard)
        pre = estimate_tokens(json.dumps({"task_id": TASK, "tool": tool, "args": args, "seal": SEAL},
                                         separators=(",", ":"))) + answer_tokens(answer)
        key = args_hash(args) + tool
        wasted = key in seen and seen[key] == norm_output(output)
        duplicate = answer["verdict"] == "suggest_alternative" and wasted
        stubs = {p: stub_cost(output, tokens, p, command) for p in {m.prune_mode for m in MODES.values()}}
        saving = {m: (tokens - stubs[mode.prune_mode]) if stubs[mode.prune_mode] is not None else 0  # type: ignore[operator]
                  for m, mode in MODES.items()}
        costs.next_prompt()  # the prompt of call i holds calls < i
        auto_mode = choose(costs, auto_mode)
        if auto_manifest_from is None and MODES[auto_mode].manifest:
            auto_manifest_from = i
        auto_modes.append(auto_mode)
        for m in NAMES:
            mode = MODES[auto_mode if m == "auto" else m]
            prechecked = mode.precheck == "all" or (mode.precheck == "runs" and runs)
            stub = stubs[mode.prune_mode]
            own = pre if prechecked else 0
            if prechecked and duplicate:
                per_mode_entered[m].append(0)  # not run: the stored result is reused
            else:
                per_mode_entered[m].append(stub if stub is not None else tokens)
                own += stub or 0
            per_mode_overhead[m].append(own)
        # auto: fold this call into every mode's account and settle the mode for the next call
        dup_saving = max(0, (stubs["conservative"] or tokens) - answer_tokens(answer)) if duplicate else 0
        add_call(costs, saving, pre, runs, dup_saving)
        # observe: the journal event for the real outcome
        digest = hashlib.sha256(output.encode("utf-8", "surrogatepass")).hexdigest()
        payload: dict[str, Any] = {"tool": tool, "args_hash": args_hash(args), "args": short_args(args),
                                   "sha256": digest, "bytes": len(output), "tokens": tokens, "ref": None,
                                   "stored_ref": "mem://sha256:" + digest, "offloaded": False}
        if call.get("error"):
            payload["error_signature"] = error_signature(output)
            payload["error"] = output.strip().splitlines()[0][:300] if output.strip() else ""
            state = journal.append("tool_failure", payload)
        else:
            payload["result_signature"] = digest[:16]
            state = journal.append("tool_result", payload)
        seen[key] = norm_output(output)
    weights = [n - i for i in range(n)]  # prompts that hold the item entering at call i
    baseline = sum(output_tokens(c) * w for c, w in zip(calls, weights, strict=True))
    res = RunResult(name, run["traj_id"], n, baseline, entered_total, auto_modes=auto_modes)
    for m in NAMES:
        carried_manifest = 0
        if m == "auto":
            carried_manifest = manifest * (n - auto_manifest_from) if auto_manifest_from is not None else 0
        elif MODES[m].manifest:
            carried_manifest = manifest * n
        res.carried[m] = sum(e * w for e, w in zip(per_mode_entered[m], weights, strict=True)) + carried_manifest
        res.overhead[m] = sum(o * w for o, w in zip(per_mode_overhead[m], weights, strict=True)) + carried_manifest
    return res


def bucket(tokens: int) -> str:
    return next(label for lo, hi, label in BUCKETS if lo <= tokens < hi)


def report(results: list[RunResult]) -> list[str]:
    lines = ["# Overhead modes on the replays (issue 19)", "",
             "Generated by `bench/overhead_modes.py`. Net = carried tokens without bosun minus with bosun "
             "(positive: bosun saves). Overhead = bosun's own tokens carried (manifest, stubs, agent prechecks). "
             "Bucket = the run's output tokens entering the context once. Medians per run; `net<0` = share of "
             "runs where the mode cost more than it saved.", ""]
    for split in ("tune", "held_out"):
        for ds in DATASETS:
            group = [r for r in results if r.dataset == ds and held_out(r.traj_id) == (split == "held_out")]
            if not group:
                continue
            lines += [f"## {ds}, {split} ({len(group)} runs)", "",
                      "| bucket | runs | median baseline | " + " | ".join(
                          f"{m}: median net / overhead / net<0" for m in NAMES) + " |",
                      "|---|---:|---:|" + "---:|" * len(NAMES)]
            for _lo, _hi, label in (*BUCKETS, (0, 0, "all")):
                runs = group if label == "all" else [r for r in group if bucket(r.entered) == label]
                if not runs:
                    continue
                cells = []
                for m in NAMES:
                    nets = [r.baseline - r.carried[m] for r in runs]
                    over = [r.overhead[m] for r in runs]
                    neg = sum(1 for x in nets if x < 0) / len(nets)
                    cells.append(f"{statistics.median(nets):,.0f} / {statistics.median(over):,.0f} / {neg:.0%}")
                lines.append(f"| {label} | {len(runs)} | {statistics.median(r.baseline for r in runs):,.0f} | "
                             + " | ".join(cells) + " |")
            totals = {m: sum(r.baseline - r.carried[m] for r in group) for m in NAMES}
            base = sum(r.baseline for r in group)
            lines += ["", "Total net over the runs: " + ", ".join(
                f"{m} {totals[m]:,} ({totals[m] / base:+.1%})" for m in NAMES) + f" of {base:,} carried.", ""]
            final = [r.auto_modes[-1] for r in group if r.auto_modes]
            lines.append("auto's mode at the end of each run: " + ", ".join(
                f"{m} {final.count(m)}" for m in MODES) + ".")
            lines.append("")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "overhead_modes.md"))
    parser.add_argument("--runs", type=int, default=0, help="at most this many runs per data set (0: all)")
    args = parser.parse_args()
    results: list[RunResult] = []
    for ds in DATASETS:
        runs = load(ds)
        if args.runs:
            runs = runs[: args.runs]
        for run in runs:
            results.append(replay_run(ds, run))
    lines = report(results)
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
