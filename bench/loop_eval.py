"""Replay real agent runs through observe + precheck semantics and measure the loop guard.

    /work/venv/bin/python bench/loop_eval.py [--dump-sample FILE] [--out bench/results/precheck.md]

Data: ``$BOSUN_SHARED/data/trajectories/{miniswe-dev,tau-airline}.jsonl.gz`` (default: the
``shared`` folder next to the repo). For every call of every run, in order:

1. ``precheck``: ``core.precheck.evaluate`` (the function the MCP tool calls) with the task
   state folded by the real reducer and a LoopGuard caught up with the journal;
2. ``observe``: the call's outcome becomes the journal event observe writes
   (``tool_result`` with ``result_signature`` = sha256[:16] of the output, or ``tool_failure``
   with ``error_signature`` and the first error line; args redacted, strings cut to 400 chars).

Reported: how often each pattern fires; an automatic oracle ("wasted" = the same call was
made before and returned the same output, numbers masked so timings and tmp names do not
count); hand labels (``bench/labels/loop_labels.jsonl``, one line per sampled firing or
non-firing, written by a person who read the calls) giving precision and recall of "a real
loop or a wasted call"; calls and tokens a run would have saved; memory per 1,000 calls.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import random
import re
import statistics
import sys
import time
import tracemalloc
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bosun.core.actions import (
    args_hash,
    error_signature,
    short_args,  # what observe journals: the same cut
)
from bosun.core.guard.invariants import RuleSet, parse_rules
from bosun.core.guard.loopguard import LoopGuard, is_mutating_tool
from bosun.core.guard.precheck import evaluate
from bosun.core.guard.shell_effects import analyse
from bosun.core.redact import Redactor, redact_value
from bosun.core.task.replay import apply_event
from bosun.core.task.state import Event, TaskState
from bosun.core.tokens import estimate_tokens

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("BOSUN_SHARED", ROOT.parent / "shared"))
DATASETS = {"miniswe": "data/trajectories/miniswe-dev.jsonl.gz", "tau": "data/trajectories/tau-airline.jsonl.gz"}
LABELS = ROOT / "bench" / "labels" / "loop_labels.jsonl"
_NUM = re.compile(r"\d+")
# issue 19: a held-out split of the runs, fixed by this seed before any loop-guard rule was changed;
# rules are tuned on the other runs ("tune") and the held-out figures are reported next to them
SPLIT_SEED = "issue19-loop-split"
HELD_OUT_FRACTION = 0.3
FAMILIES = ("pytest", "npm", "make", "cargo", "go", "gradle", "pip")
# program (or "python -m module") -> family; a command belongs to the first family among its programs
_FAMILY_OF = {
    "pytest": "pytest", "py.test": "pytest", "-m pytest": "pytest",
    "npm": "npm", "npx": "npm", "yarn": "npm", "pnpm": "npm",
    "make": "make", "cmake": "make", "ninja": "make", "gmake": "make",
    "cargo": "cargo", "go": "go",
    "gradle": "gradle", "gradlew": "gradle", "./gradlew": "gradle", "mvn": "gradle", "mvnw": "gradle",
    "pip": "pip", "pip3": "pip", "-m pip": "pip",
}


def append_outcome(journal: Any, payload: dict[str, Any], output: str, failed: bool) -> Any:
    """Journal one replayed call as observe does: a failure with its signature and first line, or a result."""
    if failed:
        payload["error_signature"] = error_signature(output)
        payload["error"] = next((ln.strip() for ln in output.splitlines() if ln.strip()), "")[:300]
        return journal.append("tool_failure", payload)
    payload["result_signature"] = payload["sha256"][:16]
    return journal.append("tool_result", payload)


def held_out(traj_id: str) -> bool:
    """Whether a run belongs to the held-out split (a pure function of the seed and the run id)."""
    digest = hashlib.sha256(f"{SPLIT_SEED}:{traj_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big") / 2**32 < HELD_OUT_FRACTION


def command_family(tool: str, args: Any) -> str:
    """The family of a call: that of the first of its programs that has one, else "shell"; "api" for non-shell."""
    command = args.get("command") if isinstance(args, dict) else None
    if not isinstance(command, str):
        return "api"
    for prog in analyse(command).programs:
        name = _FAMILY_OF.get(prog) or _FAMILY_OF.get(prog[prog.find(" -m "):].strip() if " -m " in prog else "")
        if name:
            return name
    return "shell"


def norm_output(text: str) -> str:
    """Output with numbers masked: timings, tmp dir counters and addresses do not make a re-run 'new'."""
    return _NUM.sub("0", text)


def output_tokens(call: dict[str, Any]) -> int:
    """Tokens of a call's output, counting the part the agent elided (len(output) + elided_chars)."""
    out = call.get("output") or ""
    elided = int(call.get("elided_chars") or 0)
    return estimate_tokens(out) + (elided // 4)


@dataclass
class Firing:
    dataset: str
    traj_id: str
    i: int
    verdict: str
    rule: str
    patterns: list[str]
    wasted: bool  # oracle: same call earlier with the same (number-masked) output
    repeat: bool  # the same call was made before
    tokens: int
    later_calls: int
    prompt_tokens: int | None


@dataclass
class RunStats:
    calls: int = 0
    fired: list[Firing] = field(default_factory=list)
    quiet: list[tuple[str, str, int, bool, bool]] = field(default_factory=list)  # dataset, traj, i, wasted, repeat
    missed_after_change: int = 0  # quiet oracle-wasted repeats with a write / state change in between
    missed_no_change: int = 0  # ... with none (true misses by the data README's definition)
    verdicts: Counter[str] = field(default_factory=Counter)
    patterns: Counter[str] = field(default_factory=Counter)
    invariant_hits: Counter[str] = field(default_factory=Counter)
    test_reruns_after_edit: int = 0
    test_reruns_after_edit_fired: int = 0
    us: list[float] = field(default_factory=list)
    # repeated identical failures: (family, earlier identical failures with no change since, this call failed
    # the same way again, verdict, rule)
    repeats: list[tuple[str, int, bool, str, str]] = field(default_factory=list)
    family_calls: Counter[str] = field(default_factory=Counter)


def load(name: str) -> list[dict[str, Any]]:
    path = SHARED / DATASETS[name]
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


class Journal:
    """One replayed task: events folded by the real reducer and fed to the loop guard, as the server does."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        self.state = TaskState(task_id=task_id)
        self.guard = LoopGuard()
        self.seq = 0

    def append(self, kind: str, payload: dict[str, Any]) -> TaskState:
        self.seq += 1
        self.guard.observe(kind, payload, self.seq)
        self.state = apply_event(self.state, Event(self.task_id, self.seq, kind, payload))
        return self.state


def replay(name: str, runs: list[dict[str, Any]], rules: RuleSet, stats: RunStats) -> None:
    redactor = Redactor()
    for run in runs:
        tid = run["traj_id"]
        journal = Journal(tid)
        guard = journal.guard
        state = journal.append("task_started", {"objective": f"replay {tid}", "plan": []})
        seen: dict[str, str] = {}  # call key -> number-masked output of its last run
        fail_chain: dict[str, tuple[str, int]] = {}  # call key -> (masked failure output, identical failures in a row)
        edited_since: dict[str, bool] = {}  # call key -> a write happened since its last run
        calls = run["calls"]
        for idx, call in enumerate(calls):
            tool, args, output = call["tool"], call["args"], call.get("output") or ""
            red = redact_value(args, redactor)
            t0 = time.perf_counter()
            answer = evaluate(tool, args, state, rules, guard, guard_args=red)
            stats.us.append((time.perf_counter() - t0) * 1e6)
            key = args_hash(red) + tool
            repeat = key in seen
            wasted = repeat and seen[key] == norm_output(output)
            verdict = answer["verdict"]
            prior = fail_chain[key][1] if key in fail_chain and not edited_since.get(key) else 0
            masked = norm_output(output)
            if prior:
                same_again = bool(call.get("error")) and fail_chain[key][0] == masked
                stats.repeats.append((command_family(tool, args), prior, same_again, verdict, answer.get("rule", "")))
            if call.get("error"):
                fail_chain[key] = (masked, prior + 1 if prior and fail_chain[key][0] == masked else 1)
            else:
                fail_chain.pop(key, None)
            stats.calls += 1
            stats.family_calls[command_family(tool, args)] += 1
            stats.verdicts[verdict] += 1
            fired_patterns = [f.split(":")[1] for f in answer.get("fired", [answer.get("rule", "")]) if f]
            for p in fired_patterns:
                stats.patterns[f"{p}"] += 1
            command = args.get("command") if isinstance(args, dict) else None
            if isinstance(command, str) and repeat and edited_since.get(key) and analyse(command).runs_tests:
                stats.test_reruns_after_edit += 1
                if verdict != "allow":
                    stats.test_reruns_after_edit_fired += 1
            if verdict != "allow":
                stats.fired.append(Firing(name, tid, idx, verdict, answer.get("rule", ""), fired_patterns, wasted,
                                          repeat, output_tokens(call), len(calls) - idx - 1,
                                          call.get("prompt_tokens")))
            else:
                stats.quiet.append((name, tid, idx, wasted, repeat))
                if wasted:
                    if edited_since.get(key):
                        stats.missed_after_change += 1
                    else:
                        stats.missed_no_change += 1
            for hit in rules.evaluate(tool, args, state.flags, state.completed):
                stats.invariant_hits[hit.rule.id] += 1
            # observe: the journal event for this outcome
            a_hash = args_hash(red)
            digest = hashlib.sha256(output.encode("utf-8", "surrogatepass")).hexdigest()
            payload: dict[str, Any] = {"tool": tool, "args_hash": a_hash, "args": short_args(red), "sha256": digest,
                                       "bytes": len(output), "tokens": output_tokens(call), "ref": None,
                                       "stored_ref": "mem://sha256:" + digest, "offloaded": False}
            state = append_outcome(journal, payload, output, bool(call.get("error")))
            writes = (analyse(command).writes if isinstance(command, str)
                      else (not call.get("error") and is_mutating_tool(tool)))
            for k in list(edited_since):
                edited_since[k] = edited_since[k] or bool(writes)
            seen[key] = norm_output(output)
            edited_since[key] = False


def memory_profile(runs: list[dict[str, Any]]) -> list[tuple[int, int, int]]:
    """(calls, guard.memory_bytes(), tracemalloc bytes) for one guard fed every call of every run."""
    guard = LoopGuard()
    out: list[tuple[int, int, int]] = []
    marks = {1000, 2000, 5000, 9000}
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    n = 0
    for run in runs:
        for call in run["calls"]:
            out_text = call.get("output") or ""
            digest = hashlib.sha256(out_text.encode("utf-8", "surrogatepass")).hexdigest()
            args = call["args"]
            guard.remember(call["tool"], args)
            kind = "tool_failure" if call.get("error") else "tool_result"
            payload = {"tool": call["tool"], "args_hash": args_hash(args), "args": short_args(args),
                       "result_signature": digest[:16], "sha256": digest, "tokens": output_tokens(call),
                       "error": out_text[:300]}
            guard.observe(kind, payload)
            n += 1
            if n in marks:
                out.append((n, guard.memory_bytes(), tracemalloc.get_traced_memory()[0] - base))
    tracemalloc.stop()
    return out


def read_labels() -> dict[str, dict[str, Any]]:
    if not LABELS.exists():
        return {}
    labels = {}
    for line in LABELS.read_text(encoding="utf-8").splitlines():
        if line.strip():
            item = json.loads(line)
            labels[item["id"]] = item
    return labels


def sample(stats: RunStats, seed: int = 7) -> tuple[list[Firing], list[tuple[str, str, int, bool, bool]]]:
    """Every firing, and 60 non-firings: 30 repeats of an earlier call (the hard cases) and 30 others."""
    rng = random.Random(seed)
    repeats = [q for q in stats.quiet if q[4]]
    others = [q for q in stats.quiet if not q[4]]
    chosen = rng.sample(repeats, min(30, len(repeats))) + rng.sample(others, min(30, len(others)))
    return stats.fired, chosen


def item_id(dataset: str, traj: str, i: int) -> str:
    return f"{dataset}:{traj}:{i}"


def dump_sample(path: Path, runs: dict[str, dict[str, dict[str, Any]]], fired: list[Firing],
                quiet: list[tuple[str, str, int, bool, bool]]) -> None:
    """Write what a labeller reads: the call, the earlier same call, and the calls in between."""

    def show(call: dict[str, Any]) -> dict[str, Any]:
        args = json.dumps(call["args"], ensure_ascii=False)
        out = call.get("output") or ""
        return {"i": call["i"], "tool": call["tool"], "args": args[:300], "error": call.get("error"),
                "output": out[:300]}

    with path.open("w", encoding="utf-8") as fh:
        for kind, ds, traj, i, extra in ([("fired", f.dataset, f.traj_id, f.i, {"verdict": f.verdict, "rule": f.rule,
                                                                               "patterns": f.patterns,
                                                                               "oracle_wasted": f.wasted})
                                          for f in fired]
                                         + [("quiet", q[0], q[1], q[2], {"oracle_wasted": q[3], "repeat": q[4]})
                                            for q in quiet]):
            calls = runs[ds][traj]["calls"]
            call = calls[i]
            key = json.dumps(call["args"], sort_keys=True) + call["tool"]
            prev = next((j for j in range(i - 1, -1, -1)
                         if json.dumps(calls[j]["args"], sort_keys=True) + calls[j]["tool"] == key), None)
            start = prev if prev is not None else max(0, i - 4)
            context = [show(calls[j]) for j in range(max(start, i - 8), i)]
            fh.write(json.dumps({"id": item_id(ds, traj, i), "kind": kind, **extra, "prev_same_call": prev,
                                 "call": show(call), "before": context}, ensure_ascii=False) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "precheck.md"))
    parser.add_argument("--dump-sample", help="write the labelling sample (jsonl) here")
    parser.add_argument("--stuck-only", action="store_true",
                        help="only the stuck SWE-agent runs and the per-rule fires on miniswe and tau (issue 37)")
    parser.add_argument("--with-example-rules", action="store_true",
                        help="also count how often invariants.example.toml fires on the data")
    args = parser.parse_args()
    if not (SHARED / DATASETS["miniswe"]).exists():
        print(f"data not found under {SHARED}; set BOSUN_SHARED", file=sys.stderr)
        return 2
    if args.stuck_only:
        print("\n".join(stuck_report(SHARED) + fires_report({name: load(name) for name in DATASETS})))
        return 0
    example = parse_rules((ROOT / "invariants.example.toml").read_text(), "invariants.example.toml")
    data = {name: load(name) for name in DATASETS}
    per: dict[str, RunStats] = {}
    for name, runs in data.items():
        per[name] = RunStats()
        replay(name, runs, RuleSet(), per[name])
    splits: dict[str, dict[str, RunStats]] = {}
    for split in ("tune", "held_out"):
        splits[split] = {}
        for name, runs in data.items():
            splits[split][name] = RunStats()
            replay(name, [r for r in runs if held_out(r["traj_id"]) == (split == "held_out")], RuleSet(),
                   splits[split][name])
    rule_hits: dict[str, Counter[str]] = {}
    if args.with_example_rules:
        for name, runs in data.items():
            s = RunStats()
            replay(name, runs, example, s)
            rule_hits[name] = s.invariant_hits
    everything = RunStats()
    for s in per.values():
        everything.fired += s.fired
        everything.quiet += s.quiet
    fired, quiet = sample(everything)
    by_id = {name: {r["traj_id"]: r for r in runs} for name, runs in data.items()}
    if args.dump_sample:
        dump_sample(Path(args.dump_sample), by_id, fired, quiet)
        print(f"sample: {len(fired)} firings + {len(quiet)} non-firings -> {args.dump_sample}")
    labels = read_labels()
    lines = report(per, fired, quiet, labels, data, rule_hits)
    lines += family_report(splits)
    lines += stuck_report(SHARED) + fires_report(data)
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


def family_report(splits: dict[str, dict[str, RunStats]]) -> list[str]:
    """Recall of repeated identical failures by command family, per split, with the block precision."""
    lines = ["", "## Repeated identical failures by command family (issue 19)", "",
             f"Runs split by `sha256('{SPLIT_SEED}:' + traj_id)`: {HELD_OUT_FRACTION:.0%} held out, fixed before "
             "any rule change; rules were tuned on `tune` only. A *repeated identical failure* is a call whose "
             "same call (tool + args) already failed with the same output (numbers masked) with no write or "
             "mutating call in between (the call's own run does not count as a change), and which fails the same "
             "way again. `2nd+`: any such repeat, flagged = any verdict but allow. `4th+`: three identical "
             "failures came before (the seed's threshold), flagged = a loop verdict (`block`, or a `loop:` warn).",
             "", "| split | family | calls | 2nd+ repeats | flagged | recall | 4th+ repeats | loop verdict | recall |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for split, per in splits.items():
        rows: dict[str, list[tuple[str, int, bool, str, str]]] = {}
        for s in per.values():
            for r in s.repeats:
                rows.setdefault(r[0], []).append(r)
        fams = [f for f in (*FAMILIES, "shell", "api") if f in rows or f in FAMILIES]
        total2 = total2f = total4 = total4f = 0
        for fam in fams:
            rs = [r for r in rows.get(fam, []) if r[2]]
            two = len(rs)
            two_f = sum(1 for r in rs if r[3] != "allow")
            four = [r for r in rs if r[1] >= 3]
            four_f = sum(1 for r in four if r[3] == "block" or (r[3] == "warn" and r[4].startswith("loop:")))
            total2, total2f, total4, total4f = total2 + two, total2f + two_f, total4 + len(four), total4f + four_f
            lines.append(f"| {split} | {fam} | {sum(s.family_calls[fam] for s in per.values())} | {two} | {two_f} | "
                         f"{pct(two_f, two)} | {len(four)} | {four_f} | {pct(four_f, len(four))} |")
        lines.append(f"| {split} | all | {sum(s.calls for s in per.values())} | {total2} | {total2f} | "
                     f"{pct(total2f, total2)} | {total4} | {total4f} | {pct(total4f, total4)} |")
    lines += ["", "Block precision (oracle: the blocked call, run anyway in the recorded trajectory, failed with the "
              "same output or returned the same result as before) and test re-runs after an edit:", "",
              "| split | blocks | wasted (oracle) | precision | test re-runs after an edit | flagged |",
              "|---|---:|---:|---:|---:|---:|"]
    for split, per in splits.items():
        blocks = [f for s in per.values() for f in s.fired if f.verdict == "block"]
        good = sum(1 for f in blocks if f.wasted)
        reruns = sum(s.test_reruns_after_edit for s in per.values())
        reruns_f = sum(s.test_reruns_after_edit_fired for s in per.values())
        lines.append(f"| {split} | {len(blocks)} | {good} | {pct(good, len(blocks))} | {reruns} | {reruns_f} |")
    return lines


def pct(a: int, b: int) -> str:
    return f"{a}/{b} = {a / b:.3f}" if b else f"{a}/0 = n/a"


def report(per: dict[str, RunStats], fired: list[Firing], quiet: list[tuple[str, str, int, bool, bool]],
           labels: dict[str, dict[str, Any]], data: dict[str, list[dict[str, Any]]],
           rule_hits: dict[str, Counter[str]]) -> list[str]:
    lines = ["# precheck / loop guard evaluation", "",
             "Generated by `bench/loop_eval.py` (replay of the dev trajectories through observe + precheck).", ""]
    lines += ["## How often each verdict and pattern fires", "",
              "| data | runs | calls | allow | suggest_alternative | warn | block | patterns fired |",
              "|---|---:|---:|---:|---:|---:|---:|---|"]
    for name, s in per.items():
        pats = ", ".join(f"{k} {v}" for k, v in sorted(s.patterns.items()))
        lines.append(f"| {name} | {len(data[name])} | {s.calls} | {s.verdicts['allow']} | "
                     f"{s.verdicts['suggest_alternative']} | {s.verdicts['warn']} | {s.verdicts['block']} | {pats} |")
    lines += ["", "## Oracle: was the flagged call a wasted repeat?", "",
              "Oracle: the same call (tool + args) was made earlier in the run and returned the same output "
              "(numbers masked). It needs no labeller but only covers exact repeats, so it judges "
              "`suggest_alternative` and `block`; warnings on new arguments are judged by hand below.", "",
              "| data | verdict | fired | wasted (oracle) | precision |", "|---|---|---:|---:|---:|"]
    for name, s in per.items():
        for verdict in ("suggest_alternative", "block"):
            f = [x for x in s.fired if x.verdict == verdict]
            lines.append(f"| {name} | {verdict} | {len(f)} | {sum(x.wasted for x in f)} | "
                         f"{pct(sum(x.wasted for x in f), len(f))} |")
    lines += ["", "Recall against the oracle (every exact repeat with the same output, in hindsight; many follow "
              "an edit that happened not to change the output, which no guard can know before running):", "",
              "| data | wasted repeats (oracle) | flagged | recall |", "|---|---:|---:|---:|"]
    for name, s in per.items():
        total = sum(1 for q in s.quiet if q[3]) + sum(1 for f in s.fired if f.wasted)
        caught = sum(1 for f in s.fired if f.wasted and f.verdict in ("suggest_alternative", "block"))
        lines.append(f"| {name} | {total} | {caught} | {pct(caught, total)} |")
    lines += ["", "Why the others were not flagged (as far as the commands tell): a write or state change "
              "between the two runs (an edit, a mutating API call: by the README's definition not a loop), "
              "or none detected (true misses):", ""]
    for name, s in per.items():
        lines.append(f"- {name}: after a change {s.missed_after_change}, no change detected {s.missed_no_change}")
    lines += ["", "## Re-running tests after an edit (the data README's warning)", ""]
    for name, s in per.items():
        lines.append(f"- {name}: {s.test_reruns_after_edit} test commands repeated after an edit; "
                     f"flagged: {s.test_reruns_after_edit_fired}")
    # hand labels
    lines += ["", "## Hand labels (`bench/labels/loop_labels.jsonl`)", ""]
    ids_fired = {item_id(f.dataset, f.traj_id, f.i): f for f in fired}
    ids_quiet = {item_id(q[0], q[1], q[2]): q for q in quiet}
    lab_f = {k: v for k, v in labels.items() if k in ids_fired}
    lab_q = {k: v for k, v in labels.items() if k in ids_quiet}
    if not labels:
        lines.append("No labels yet: run with `--dump-sample FILE`, read it, write the labels file.")
    else:
        lines.append(f"Labelled: {len(lab_f)} firings (of {len(ids_fired)}), {len(lab_q)} non-firings "
                     f"(of {len(ids_quiet)} sampled: half repeats of an earlier call, half other calls).")
        lines += ["", "| verdict | labelled | real loop / wasted | precision |", "|---|---:|---:|---:|"]
        for verdict in ("block", "suggest_alternative", "warn"):
            items = [lab_f[k] for k in lab_f if ids_fired[k].verdict == verdict]
            good = sum(1 for it in items if it["label"] == "wasted")
            lines.append(f"| {verdict} | {len(items)} | {good} | {pct(good, len(items))} |")
        allf = list(lab_f.values())
        good_all = sum(1 for it in allf if it["label"] == "wasted")
        lines.append(f"| all firings | {len(allf)} | {good_all} | {pct(good_all, len(allf))} |")
        missed = [v for v in lab_q.values() if v["label"] == "wasted"]
        lines += ["", f"Non-firings labelled wasted (missed loops): {pct(len(missed), len(lab_q))}."]
        # recall estimate: weight the sampled strata back to the population
        q_all = [q for s in per.values() for q in s.quiet]
        strata = {True: [q for q in q_all if q[4]], False: [q for q in q_all if not q[4]]}
        est_missed = 0.0
        for flag, pop in strata.items():
            lab = [lab_q[k] for k, q in ids_quiet.items() if k in lab_q and q[4] == flag]
            if lab:
                est_missed += len(pop) * sum(1 for v in lab if v["label"] == "wasted") / len(lab)
        caught = sum(1 for f in fired if labels.get(item_id(f.dataset, f.traj_id, f.i), {}).get("label") == "wasted")
        if caught + est_missed:
            lines.append(f"Estimated recall (firings labelled wasted / (those + missed loops extrapolated from the "
                         f"stratified sample to all {len(q_all)} quiet calls)): {caught}/({caught}+{est_missed:.1f}) = "
                         f"{caught / (caught + est_missed):.3f}.")
    # savings
    lines += ["", "## What a run would have saved", "",
              "Counting only flagged calls the oracle confirms as wasted repeats (`suggest_alternative` answered "
              "with the stored ref, or `block`). Tokens: the skipped output (len(output)+elided chars). Context "
              "tokens: that output times the number of later calls that would have carried it in their prompt.", "",
              "| data | calls saved | output tokens saved | context tokens saved (upper bound) | runs affected |",
              "|---|---:|---:|---:|---:|"]
    for name, s in per.items():
        saved = [f for f in s.fired if f.wasted and f.verdict in ("suggest_alternative", "block")]
        lines.append(f"| {name} | {len(saved)} | {sum(f.tokens for f in saved):,} | "
                     f"{sum(f.tokens * f.later_calls for f in saved):,} | {len({f.traj_id for f in saved})} |")
    if rule_hits:
        lines += ["", "## invariants.example.toml on the same data (informational)", ""]
        for name, hits in rule_hits.items():
            lines.append(f"- {name}: " + (", ".join(f"{k} {v}" for k, v in hits.most_common()) or "no rule fired"))
    # memory and core speed
    prof = memory_profile(data["miniswe"])
    lines += ["", "## Memory per task (bounded)", "",
              "One LoopGuard fed all miniswe calls in sequence as if one task (worst case: nothing is forgotten "
              "by task end). `memory_bytes` = sizes of the guard's tables; tracemalloc = every allocation.", "",
              "| calls | guard tables (bytes) | per 1,000 calls | tracemalloc (bytes) |", "|---:|---:|---:|---:|"]
    for n, b, t in prof:
        lines.append(f"| {n:,} | {b:,} | {b * 1000 // n:,} | {t:,} |")
    us = [u for s in per.values() for u in s.us]
    lines += ["", f"Core precheck (`core.precheck.evaluate`, no I/O): median {statistics.median(us):.1f} us, "
              f"p99 {sorted(us)[int(len(us) * 0.99)]:.1f} us over {len(us):,} calls."]
    return lines


# ---------------------------------------------------------------- issue 37: stuck SWE-agent runs, labelled stretches
STUCK_RUNS = "data/trajectories/sweagent-loops-dev.jsonl.gz"
STUCK_LABELS = "data/trajectories/sweagent-loops-dev-labels.jsonl.gz"
RULES = ("runaway", "loop_pattern", "repeated_failure", "oscillation")
# issue 37: a fifth of the dev runs held out while the guard was changed, fixed by this seed beforehand
STUCK_SEED = "issue37-stuck-holdout"
STUCK_HELD_OUT = 0.2
# SWE-agent 1.0 does not record exit codes: a harness would know them. The replay reads a failure off the
# output as a shell would report it (the editor tool's own error messages, a final exception, a shell error);
# searches and views fail only when their path is missing (a grep hit on "Error" is a result, not a failure)
_EDITOR_ERROR = re.compile(r"No replacement was performed|^Invalid |did not appear verbatim|"
                           r"The path \S+ does not exist|is not a valid|must be one of", re.M)
_SHELL_ERROR = re.compile(r"command not found|No such file or directory|: not found$|^fatal: ", re.M)
_FINAL_EXC = re.compile(r"^\s*(?:[A-Za-z_][\w.]*(?:Error|Exception)\b|Traceback \(most recent)", re.M)
_READS = re.compile(r"^(?:cd \S+ && )?(?:str_replace_editor view|grep|find|ls|cat|head|tail|sed -n|wc)\b")


def stuck_failed(cmd: str, output: str) -> bool:
    """Whether a SWE-agent step failed, as its exit status would say (see the comment above)."""
    if _EDITOR_ERROR.search(output[:2000]) or _SHELL_ERROR.search(output[-2000:]):
        return True
    if _READS.match(cmd.strip()):
        return False
    tail = "\n".join(output.strip().splitlines()[-3:])
    return bool(_FINAL_EXC.search(tail) or re.search(r"\b\d+ (?:failed|errors?)\b|^FAILED \(", tail, re.M))


def stuck_held_out(run_id: str) -> bool:
    digest = hashlib.sha256(f"{STUCK_SEED}:{run_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big") / 2**32 < STUCK_HELD_OUT


@dataclass
class StuckStats:
    runs: int = 0
    steps: int = 0
    stretches: int = 0
    detected: int = 0  # stretches with a warn or block inside
    fires: int = 0  # steps answered warn or block
    inside: int = 0
    rule_fires: Counter[str] = field(default_factory=Counter)  # rule -> steps where it warned or blocked
    rule_inside: Counter[str] = field(default_factory=Counter)
    resolved_blocks: Counter[str] = field(default_factory=Counter)  # run id -> blocks, runs that resolved
    resolved_fires: int = 0  # warn or block in runs that resolved
    outside: list[tuple[str, int, str]] = field(default_factory=list)  # (run, step, fired) for reading


def stuck_replay(runs: list[dict[str, Any]], labels: dict[str, list[dict[str, Any]]], stats: StuckStats) -> None:
    """Each step as SWE-agent issues it (a bash command line; its editor is a program there) through precheck,
    then observe; a warn or block is inside when the step lies in a labelled stuck stretch [start, end]."""
    for run in runs:
        rid = run["run_id"]
        stretches = labels.get(rid, [])
        inside_steps = {i for s in stretches for i in range(s["start"], s["end"] + 1)}
        hit = [False] * len(stretches)
        journal = Journal(rid)
        state = journal.append("task_started", {"objective": f"replay {rid}", "plan": []})
        stats.runs += 1
        stats.stretches += len(stretches)
        for idx, step in enumerate(run["steps"]):
            args = {"command": step["cmd"]}
            output = step.get("output") or ""
            answer = evaluate("bash", args, state, RuleSet(), journal.guard)
            stats.steps += 1
            verdict = answer["verdict"]
            fired = [f for f in answer.get("fired", [f"{answer.get('rule', '')}:{verdict}"])
                     if f.startswith("loop:") and f.rsplit(":", 1)[1] in ("warn", "block")]
            if verdict in ("warn", "block"):
                stats.fires += 1
                inside = idx in inside_steps
                stats.inside += inside
                if not inside:
                    stats.outside.append((rid, idx, ",".join(fired)))
                for k, s in enumerate(stretches):
                    if s["start"] <= idx <= s["end"]:
                        hit[k] = True
                stats.resolved_fires += bool(run.get("resolved"))
                if verdict == "block" and run.get("resolved"):
                    stats.resolved_blocks[rid] += 1
            for f in fired:
                rule = f.split(":")[1]
                stats.rule_fires[rule] += 1
                stats.rule_inside[rule] += idx in inside_steps
            digest = hashlib.sha256(output.encode("utf-8", "surrogatepass")).hexdigest()
            payload: dict[str, Any] = {"tool": "bash", "args_hash": args_hash(args), "args": short_args(args),
                                       "sha256": digest, "bytes": len(output), "tokens": estimate_tokens(output),
                                       "ref": None, "stored_ref": "mem://sha256:" + digest}
            state = append_outcome(journal, payload, output, stuck_failed(step["cmd"], output))
        stats.detected += sum(hit)


def stuck_report(shared: Path) -> list[str]:
    """The per-rule table on the stuck SWE-agent runs (tune and held-out split), then miniswe and tau fires."""
    with gzip.open(shared / STUCK_RUNS, "rt", encoding="utf-8") as fh:
        runs = [json.loads(line) for line in fh]
    with gzip.open(shared / STUCK_LABELS, "rt", encoding="utf-8") as fh:
        labels = {item["run_id"]: item["stretches"] for item in map(json.loads, fh)}
    lines = ["", "## Stuck SWE-agent runs (issue 37)", "",
             f"`{STUCK_RUNS}`: each step replayed as the bash command line SWE-agent runs, failures read off the "
             "output (no exit codes recorded). A fire is a step answered warn or block; inside = within a labelled "
             f"stuck stretch. Per rule: steps where the rule warned or blocked (also when a duplicate's suggest_alternative decided the answer). Held out: `sha256('{STUCK_SEED}:' + run_id)` below {STUCK_HELD_OUT}, fixed before "
             "any change.", "",
             "| split | runs | steps | stretches | detected (recall) | fires | inside (precision) | "
             "fires in resolved runs | runs resolved with >1 block | " + " | ".join(f"{r} fires / inside" for r in RULES) + " |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|" + "---:|" * len(RULES)]
    parts = {"all": runs, "tune": [r for r in runs if not stuck_held_out(r["run_id"])],
             "held_out": [r for r in runs if stuck_held_out(r["run_id"])]}
    outside: list[tuple[str, int, str]] = []
    for split, part in parts.items():
        s = StuckStats()
        stuck_replay(part, labels, s)
        if split == "all":
            outside = s.outside
        many = sum(1 for n in s.resolved_blocks.values() if n > 1)
        lines.append(f"| {split} | {s.runs} | {s.steps} | {s.stretches} | {pct(s.detected, s.stretches)} | {s.fires} | "
                     f"{pct(s.inside, s.fires)} | {s.resolved_fires} | {many} (blocks {sum(s.resolved_blocks.values())}) | "
                     + " | ".join(f"{s.rule_fires[r]} / {s.rule_inside[r]}" for r in RULES) + " |")
    if outside:
        per_run: dict[str, list[str]] = {}
        for rid, i, f in outside:
            per_run.setdefault(rid, []).append(f"{i} {f.replace('loop:', '')}")
        lines += ["", "Fires outside a labelled stretch (all runs), per run: steps and rules:", ""]
        lines += [f"- {rid} ({len(items)}): " + ", ".join(items[:6]) + (" …" if len(items) > 6 else "")
                  for rid, items in per_run.items()]
    return lines


def fires_report(data: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Warn and block fires per rule on runs with almost no loops (miniswe, tau): each one is suspect."""
    lines = ["", "Warn/block fires on runs with almost no loops (each is suspect):", "",
             "| data | runs | calls | warn | block | " + " | ".join(RULES) + " | runs with a fire |",
             "|---|---:|---:|---:|---:|" + "---:|" * len(RULES) + "---:|"]
    for name, runs in data.items():
        s = RunStats()
        replay(name, runs, RuleSet(), s)
        per_rule: Counter[str] = Counter()
        for f in s.fired:
            if f.verdict in ("warn", "block"):
                for p in set(f.patterns):
                    per_rule[p] += 1
        fired_runs = {f.traj_id for f in s.fired if f.verdict in ("warn", "block")}
        lines.append(f"| {name} | {len(runs)} | {s.calls} | {s.verdicts['warn']} | {s.verdicts['block']} | "
                     + " | ".join(str(per_rule[r]) for r in RULES) + f" | {len(fired_runs)} |")
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
