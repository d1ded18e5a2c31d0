"""Replay 246 real coding-agent runs through observe, as an agent using bosun would.

Data: ../shared/data/trajectories/miniswe-dev.jsonl.gz (mini-swe-agent + Gemini 3 Pro on
SWE-bench Verified; one bash command per step with its output).

Model of the agent with bosun (the harness hands every tool output to ``observe`` and puts
bosun's answer in the prompt instead of the output):
- a passed-through output costs exactly what it cost without bosun (the answer is not shown);
- an offloaded output costs its stub (the compact JSON the agent reads);
- what the agent used next (lines it copied into its next commands, names and paths it typed
  that it had learned from that output) must be in the stub, or it issues ONE recall turn
  (up to 3 parallel recalls: a range for the lines, a grep for the names), run for real on the
  stored bytes; that recall's call and answer are carried from then on, and the extra turn
  re-reads the whole carried context (counted);
- drop receipts are sent by the harness (not in the prompt).

"Carried" = sum over every prompt of the tool-output tokens it holds (an output observed at
step i sits in every later prompt). Also reported: "entered" (each token counted once) and an
MCP-host variant that pays the recall tool's schema in every prompt.

    python bench/offload_replay.py [--runs N] [--mode cache_ttl] [--out bench/results/offload.md]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bosun.core.embedding import HashEmbedder
from bosun.core.offload.offload import MODES
from bosun.core.offload.outline import build_outline, detect_kind
from bosun.core.offload.query import run_query
from bosun.core.tokens import estimate_tokens
from bosun.server.config import Config
from bosun.server.engine import Engine
from bosun.server.surface import compact as _compact

SHARED = Path(os.environ.get("BOSUN_SHARED", Path(__file__).resolve().parents[1].parent / "shared"))
DATA = SHARED / "data" / "trajectories" / "miniswe-dev.jsonl.gz"
DIGEST = 14  # tokens of the digest line a compacted result leaves behind
RECALL_HEADER = 24  # tokens of the one-line header above a recall's text (measured on real answers)
TOKEN = re.compile(r"[A-Za-z_][\w-]*(?:(?:\.|/|::)[\w-]+)+|[A-Za-z_]\w{4,}")
STOP = set(
    ["python", "python3", "print", "import", "from", "return", "class", "while", "break", "continue", "raise", "assert", "lambda", "yield", "global", "async", "await", "false", "true", "none", "self", "except", "finally", "error", "value", "other", "string", "number"]
)


SPLIT_SEED = "issue24"  # fixed before any threshold was tuned: never change it after looking at results
HOLDOUT_SHARE = 0.3


def split_of(traj_id: str) -> str:
    """'holdout' for a fixed 30 % of runs (seeded hash of the run id), else 'dev'.

    Thresholds (offload threshold, middle band) are tuned on 'dev' only; 'holdout' is replayed once at
    the end. The split depends only on the run id, so it is the same on every machine and every day.
    """
    import hashlib

    h = int(hashlib.sha256(f"{SPLIT_SEED}:{traj_id}".encode()).hexdigest()[:8], 16)
    return "holdout" if h / 0xFFFFFFFF < HOLDOUT_SHARE else "dev"


def distinctive(tok: str) -> bool:
    return tok.lower() not in STOP and (any(c in tok for c in "_./:") or any(c.isupper() for c in tok[1:])
                                        or any(c.isdigit() for c in tok) or len(tok) >= 8)


@dataclass
class Need:
    kind: str  # line | name
    text: str
    line_no: int = 0
    where: str = "missed"  # stub | recall | missed
    previous: bool = False  # it came from the output right before the command that used it


@dataclass
class RunResult:
    traj_id: str
    calls: int
    base_carried: int = 0
    bosun_carried: int = 0
    base_entered: int = 0
    bosun_entered: int = 0
    offloaded: int = 0
    stub_tokens: int = 0
    recall_tokens: int = 0
    extra_turns: int = 0
    compactions: int = 0
    schema_carried: int = 0
    needs: list[Need] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)

    @property
    def net(self) -> float:
        return (self.base_carried - self.bosun_carried) / self.base_carried if self.base_carried else 0.0

    @property
    def net_entered(self) -> float:
        return (self.base_entered - self.bosun_entered) / self.base_entered if self.base_entered else 0.0

    @property
    def net_mcp(self) -> float:
        b = self.base_carried
        return (b - self.bosun_carried - self.schema_carried) / b if b else 0.0


def _values(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _values(v)]
    if isinstance(value, list):
        return [s for v in value for s in _values(v)]
    return [str(value)]


def used_text(call: dict[str, Any]) -> str:
    """What a call's arguments could have taken from earlier outputs: the shell command, or for an
    API call the argument VALUES (parameter names come from the tool's schema, not from outputs)."""
    args = call.get("args") or {}
    if isinstance(args, dict) and "command" in args:
        return str(args["command"])
    return "\n".join(_values(args))


def command_of(call: dict[str, Any]) -> str:
    args = call.get("args") or {}
    if isinstance(args, dict) and "command" in args:
        return str(args["command"])
    return json.dumps(args, ensure_ascii=False) if isinstance(args, dict | list) else str(args)


def line_keys(text: str) -> dict[str, int]:
    """Stripped lines long enough to be copied on purpose, with their first line number."""
    out: dict[str, int] = {}
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if len(s) >= 16 and s not in out:
            out[s] = n
    return out


def name_keys(text: str) -> set[str]:
    return {t for t in TOKEN.findall(text) if distinctive(t)}


def plan_recalls(needs: list[Need], output: str) -> list[dict[str, Any]]:
    """At most 3 parallel recalls that an agent reading the stub would issue for ``needs``."""
    calls: list[dict[str, Any]] = []
    lines = sorted(nd.line_no for nd in needs if nd.kind == "line")
    if lines:
        groups: list[list[int]] = [[lines[0]]]
        for ln in lines[1:]:
            if ln - groups[-1][-1] > 40:
                groups.append([ln])
            else:
                groups[-1].append(ln)
        for g in groups[:2]:
            calls.append({"op": "range", "start": max(1, g[0] - 2), "end": g[-1] + 2})
    names = [nd.text for nd in needs if nd.kind == "name"]
    if names and len(calls) < 3:
        pattern = "|".join(re.escape(t) for t in names[:10])
        calls.append({"op": "grep", "pattern": pattern, "max_matches": 30})
    return calls


@dataclass
class Item:
    """One thing the prompt carries: its size over time as (from, size) segments."""

    start: float
    segments: list[tuple[float, int]]
    text: str = ""  # what the agent can read in it (full output, stub, recall answer, digest)
    full: bool = False


def carried(items: list[Item], prompts: list[float]) -> int:
    total = 0
    for it in items:
        segs = it.segments
        for k, (t0, size) in enumerate(segs):
            t1 = segs[k + 1][0] if k + 1 < len(segs) else float("inf")
            total += size * sum(1 for p in prompts if t0 < p < t1)
    return total


def intent_of(calls: list[dict[str, Any]], j: int, source: str) -> str | None:
    """The intent handed to observe with output ``j``.

    The trajectories hold no assistant messages and no task text, so: ``own`` = the command that
    produced the output (known when observing; no look-ahead); ``next`` = the agent's next command
    (a stand-in for its next assistant message: it looks ahead, so it is an upper bound).
    """
    if source == "own":
        return used_text(calls[j])[:500] or None
    if source == "next" and j + 1 < len(calls):
        return used_text(calls[j + 1])[:500] or None
    return None


async def replay_run(
    engine: Engine, run: dict[str, Any], mode: str, schema_tokens: int, compact_every: int, intent: str = "none"
) -> RunResult:
    from bosun.core.offload.compaction import plan_compaction
    from bosun.core.offload.offload import get_mode

    svc = engine.observe
    tasks = engine.tasks
    state = await tasks.start(objective=f"replay {run['traj_id']}")
    tid = state.task_id
    calls = run["calls"]
    n = len(calls)
    res = RunResult(run["traj_id"], n)
    outputs = [c.get("output") or "" for c in calls]
    lines_of = [line_keys(o) for o in outputs]
    names_of = [name_keys(o) for o in outputs]
    refs: list[str | None] = [None] * n  # stored ref of each output
    base_items: list[Item] = []
    items: list[Item] = []
    by_output: dict[int, Item] = {}
    extra_prompts: list[float] = []
    typed_lines: set[str] = set()
    typed_names: set[str] = set()
    # -1: compact when observe's answer suggests it (plan of the task's mode); N > 0: every N steps
    # with a balanced plan; 0: never
    compaction_mode = get_mode(mode) if compact_every < 0 else get_mode("balanced")
    for j, call in enumerate(calls):
        cmd = used_text(call)
        # 1) what command j uses from earlier outputs, and whether the prompt still shows it
        if j:
            wanted: list[tuple[Need, list[int]]] = []
            for s in (ln.strip() for ln in cmd.splitlines()):
                if len(s) >= 16 and s not in typed_lines:
                    src = [i for i in range(j) if s in lines_of[i]]
                    if src:
                        wanted.append((Need("line", s, lines_of[src[-1]][s]), src))
            for tok in name_keys(cmd) - typed_names:
                src = [i for i in range(j) if tok in names_of[i]]
                if src:
                    wanted.append((Need("name", tok), src))
            pending: dict[int, list[Need]] = {}
            for nd, src in wanted:
                if any(by_output[i].full for i in src):
                    continue  # still in the prompt in full: no cost, not an offload question
                if src[-1] == j - 1:  # from the output just before: did observe's answer already hold it?
                    nd.previous = True
                if any(nd.text in it.text for it in items if not it.full and it.segments[-1][1] > 0):
                    nd.where = "stub"
                else:
                    src_i = src[-1]
                    if nd.kind == "line":
                        nd.line_no = lines_of[src_i][nd.text]
                    pending.setdefault(src_i, []).append(nd)
                res.needs.append(nd)
            if pending:
                t = j - 0.5
                extra_prompts.append(t)
                res.extra_turns += 1
                budget = 3
                for src_i, nds in pending.items():
                    data = await engine.refs.get(refs[src_i] or "")
                    texts = []
                    for rc in plan_recalls(nds, outputs[src_i])[:budget]:
                        q = run_query(data, rc["op"], **{k: v for k, v in rc.items() if k != "op"})
                        cost = estimate_tokens(_compact({"ref": (refs[src_i] or "")[:29], **rc})) + 8 + RECALL_HEADER + estimate_tokens(q.text)
                        res.recall_tokens += cost
                        items.append(Item(t, [(t, cost)], q.text))
                        texts.append(q.text)
                        await engine.recall.note_recall(tid, refs[src_i] or "", rc["op"], cost)
                        budget -= 1
                    joined = "\n".join(texts)
                    for nd in nds:
                        nd.where = "recall" if nd.text in joined else "missed"
                        if (nd.where == "missed" or os.environ.get("REPLAY_DEBUG") == "2") and os.environ.get("REPLAY_DEBUG"):
                            print(nd.where.upper(), run["traj_id"], nd.kind, repr(nd.text[:80]), "src", src_i, "plan",
                                  plan_recalls(nds, outputs[src_i]), "budget", budget, file=sys.stderr)
                    if budget <= 0:
                        break
                if len(res.samples) < 3:
                    res.samples.append({"command": command_of(calls[max(pending)])[:90], "next": command_of(call)[:90],
                                        "kind": detect_kind(outputs[max(pending)]),
                                        "needs": [(nd.kind, nd.text[:60], nd.where) for nds in pending.values()
                                                  for nd in nds][:4]})
        typed_lines.update(ln.strip() for ln in cmd.splitlines())
        typed_names.update(name_keys(cmd))
        # 2) the output goes through observe
        out = outputs[j]
        tokens = estimate_tokens(out)
        base_items.append(Item(j, [(j, tokens)], out, True))
        ans = await svc.observe_output(tid, bool(call.get("error")), str(call.get("tool") or "bash"),
                                       call.get("args") or {}, out, mode=mode, intent=intent_of(calls, j, intent))
        events = await tasks.events(tid, max(0, (await tasks.get(tid)).version - 2))
        stored = next(e.payload["stored_ref"] for e in reversed(events) if "stored_ref" in e.payload)
        refs[j] = stored
        if ans["offloaded"]:
            stub_text = _compact(ans)
            cost = estimate_tokens(stub_text)
            stub_text += "\n" + str(ans.get("focus") or "") + "\n" + str(ans.get("view") or "")  # as the agent reads them
            res.offloaded += 1
            res.stub_tokens += cost
            item = Item(j, [(j, cost)], stub_text)
            await svc.drop(tid, [ans["ref"]])  # the harness confirms the eviction: credited in the ledger
        else:
            item = Item(j, [(j, tokens)], out, True)
        items.append(item)
        by_output[j] = item
        # 3) periodic compaction (checkpoint mode=compact): cold results leave, a digest line stays
        due = bool(ans.get("compact")) if compact_every < 0 else bool(compact_every and (j + 1) % compact_every == 0)
        if due:
            plan = plan_compaction(await tasks.events(tid), compaction_mode, "compact", time.time())
            moved = {it.ref for it in plan.items}
            t = j + 0.25
            for i in range(j + 1):
                if refs[i] in moved and by_output[i].segments[-1][1] > DIGEST:
                    by_output[i].segments.append((t, DIGEST))
                    by_output[i].full = False
                    by_output[i].text = ""
            outputs_ids = {id(it) for it in by_output.values()}
            for it in items:  # recall answers older than the newest results are dropped too (recallable again)
                if (not it.full and it.start < j - compaction_mode.keep_recent and id(it) not in outputs_ids
                        and it.segments[-1][1] > 0):
                    it.segments.append((t, 0))
                    it.text = ""
            if moved:
                await svc.drop(tid, sorted(moved))  # the harness evicted them: credited once each
            res.compactions += 1
    prompts = [float(k) for k in range(1, n + 1)]
    all_prompts = sorted(prompts + extra_prompts)
    res.base_carried = carried(base_items, prompts)
    res.bosun_carried = carried(items, all_prompts)
    res.base_entered = sum(it.segments[0][1] for it in base_items)
    res.bosun_entered = sum(it.segments[0][1] for it in items)
    res.schema_carried = schema_tokens * len(all_prompts)
    return res


def payload_table(runs: list[dict[str, Any]], mode: str) -> list[dict[str, Any]]:
    """OSIRIS-style table: real outputs grown to a size, carried through a 10-turn workflow.

    Payloads are built from real outputs of one content kind (test, code, log, text),
    concatenated in corpus order and cut at a line boundary at the target size. The scripted
    agent then needs what it needs from that kind of output: test -> failing tests and error
    lines (grep), code -> one function body (a 40-line range), log -> distinct errors
    (aggregate), text -> the last 20 lines (tail); one recall, charged in full.
    """
    by_kind: dict[str, list[str]] = {"test": [], "code": [], "log": [], "text": []}
    for run in runs:
        for c in run["calls"]:
            out = c.get("output") or ""
            if estimate_tokens(out) >= 150:
                k = detect_kind(out)
                if k in by_kind:
                    by_kind[k].append(out)
    need_of: dict[str, dict[str, Any]] = {
        "test": {"op": "grep", "pattern": r"^(FAILED|ERROR)|Error:", "max_matches": 20},
        "code": {"op": "range", "start": 1, "end": 40},
        "log": {"op": "aggregate"},
        "text": {"op": "tail", "lines": 20},
    }
    from bosun.core.offload.offload import build_stub, decide, get_mode, stub_tokens, worth_it

    pm = get_mode(mode)
    rows = []
    turns = 10
    for size in (200, 800, 2000, 5000, 20000):
        base = bos = over = 0
        offl = 0
        samples = 0
        for kind, outs in by_kind.items():
            for start in range(0, min(len(outs), 200), 20):
                buf: list[str] = []
                tok = 0
                j = start
                while tok < size and j < len(outs):
                    buf.append(outs[j])
                    tok += estimate_tokens(outs[j])
                    j += 1
                text = "\n".join(buf)
                lines = text.splitlines(keepends=True)
                cut: list[str] = []
                acc = 0
                for ln in lines:
                    t = estimate_tokens(ln)
                    if acc + t > size:
                        break
                    cut.append(ln)
                    acc += t
                payload = "".join(cut)
                ptok = estimate_tokens(payload)
                if ptok < size * 0.9:
                    continue
                samples += 1
                base += ptok * turns
                choice = decide(ptok, pm)
                if not choice.offload:
                    bos += ptok * turns
                    continue
                ol = build_outline(payload, pm.outline_budget(ptok))
                stub = build_stub("mem://sha256:0123456789abcdef", len(payload.encode()), ptok,
                                  payload.count("\n"), ol)
                cost = stub_tokens(stub)
                if not worth_it(ptok, cost):
                    bos += ptok * turns
                    continue
                offl += 1
                rc = need_of[kind]
                q = run_query(payload.encode(), rc["op"], **{k: v for k, v in rc.items() if k != "op"})
                rcost = estimate_tokens(_compact({"ref": stub["ref"], **rc})) + 8 + RECALL_HEADER + estimate_tokens(q.text)
                # stub for all turns, the recall from turn 2, and one extra turn re-reading the stub
                bos += cost * turns + rcost * (turns - 1) + cost
                over += cost * turns + rcost * (turns - 1) + cost
        rows.append({"payload": size, "samples": samples, "baseline": base // max(samples, 1),
                     "bosun": bos // max(samples, 1), "overhead": over // max(samples, 1),
                     "offloaded": offl, "net": (base - bos) / base if base else 0.0})
    return rows


def pct(x: float) -> str:
    return f"{x * 100:+.1f}%"


def quantiles(xs: list[float]) -> tuple[float, float, float]:
    s = sorted(xs)
    q = statistics.quantiles(s, n=10)
    return q[0], statistics.median(s), q[-1]


async def measure_schema(home: Path) -> int:
    """Tokens of the recall tool's listing (name, description, input schema, annotations), as served."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from tool_tokens import tool_costs

    return tool_costs(["recall"])["recall"]


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=0, help="replay only the first N runs")
    ap.add_argument("--data", default=str(DATA), help="trajectory file (default: miniswe-dev; also tau-airline)")
    ap.add_argument("--mode", default="cache_ttl", choices=sorted(MODES))
    ap.add_argument("--out", default="", help="write the markdown report here")
    ap.add_argument("--offload-min", type=int, default=0,
                    help="tuning only: override the mode's offload threshold (tokens) for this replay")
    ap.add_argument("--slice-max", type=int, default=-1,
                    help="tuning only: override the tokens up to which an explicit slice passes through")
    ap.add_argument("--intent", default="none", choices=["none", "own", "next"],
                    help="observe with an intent: the output's own command, or the agent's next command")
    ap.add_argument("--split", default="all", choices=["all", "dev", "holdout"],
                    help="replay only the seeded dev part (tune here) or the held-out part (report once)")
    ap.add_argument("--compact-every", type=int, default=-1,
                    help="-1 (default): the harness runs checkpoint(mode=compact) when observe's answer suggests "
                         "it; N: a balanced plan every N steps; 0: never")
    args = ap.parse_args()
    with gzip.open(args.data, "rt") as fh:
        runs = [json.loads(line) for line in fh]
    if args.split != "all":
        runs = [r for r in runs if split_of(str(r["traj_id"])) == args.split]
    if args.runs:
        runs = runs[: args.runs]
    if args.offload_min or args.slice_max >= 0:
        import dataclasses

        base = MODES[args.mode]
        MODES[args.mode] = dataclasses.replace(
            base, offload_min_tokens=args.offload_min or base.offload_min_tokens,
            slice_max_tokens=args.slice_max if args.slice_max >= 0 else base.slice_max_tokens)
    home = Path(tempfile.mkdtemp(prefix="bosun-replay-"))
    schema = await measure_schema(home)
    engine = Engine(Config(home=home / "h", policies=[]), embedder_factory=lambda _c: HashEmbedder(8))
    await engine.open()
    t0 = time.perf_counter()
    results = [await replay_run(engine, run, args.mode, schema, args.compact_every, args.intent)
               for run in runs]
    elapsed = time.perf_counter() - t0

    ledger = await engine.ledger.overall()
    await engine.close()

    nets = [r.net for r in results]
    p10, med, p90 = quantiles(nets)
    base = sum(r.base_carried for r in results)
    bos = sum(r.bosun_carried for r in results)
    ent_b = sum(r.base_entered for r in results)
    ent_w = sum(r.bosun_entered for r in results)
    losses = [r for r in results if r.bosun_carried > r.base_carried]
    mcp_losses = [r for r in results if r.net_mcp < 0]
    needs = [nd for r in results for nd in r.needs]
    where = {w: sum(1 for nd in needs if nd.where == w) for w in ("stub", "recall", "missed")}
    prev = [nd for nd in needs if nd.previous]
    table = payload_table(runs, args.mode)

    lines = [
        f"# Offload replay: {len(results)} {Path(args.data).name.split('.')[0]} runs, mode {args.mode}",
        "",
        f"Command: `python bench/offload_replay.py{' --runs ' + str(args.runs) if args.runs else ''} --mode {args.mode} "
        f"--compact-every {args.compact_every} --split {args.split} --intent {args.intent}"
        f"{'' if Path(args.data) == DATA else ' --data ' + str(Path(args.data).name)}"
        f"{' --offload-min ' + str(args.offload_min) if args.offload_min else ''}"
        f"{' --slice-max ' + str(args.slice_max) if args.slice_max >= 0 else ''}` "
        f"({elapsed:.0f} s, {sum(r.calls for r in results)} observe calls)",
        "",
        "## Totals (tool-output tokens)",
        "",
        "| measure | without bosun | with bosun | net saving |",
        "|---|---:|---:|---:|",
        f"| carried (summed over every prompt) | {base:,} | {bos:,} | {pct((base - bos) / base)} |",
        f"| entered (each token once) | {ent_b:,} | {ent_w:,} | {pct((ent_b - ent_w) / ent_b)} |",
        "",
        f"- bosun's overhead inside 'with bosun': stubs {sum(r.stub_tokens for r in results):,} tokens entered, "
        f"recalls {sum(r.recall_tokens for r in results):,} tokens entered, "
        f"{sum(r.extra_turns for r in results):,} extra recall turns "
        f"(over {sum(r.calls for r in results):,} steps; each re-reads the carried context, counted above)",
        f"- outputs offloaded: {sum(r.offloaded for r in results):,} of {sum(r.calls for r in results):,}; "
        f"compactions: {sum(r.compactions for r in results):,} ("
        + ("when observe suggested it, the task's mode" if args.compact_every < 0 else
           f"every {args.compact_every} steps, balanced" if args.compact_every else "never") + ")",
        f"- per-run net saving (carried): p10 {pct(p10)}, median {pct(med)}, p90 {pct(p90)}; "
        f"runs with a net loss: {len(losses)}",
        f"- per-run net saving (entered): median {pct(statistics.median([r.net_entered for r in results]))}",
        f"- MCP-host variant (the recall schema, {schema} tokens, in every prompt): median "
        f"{pct(statistics.median([r.net_mcp for r in results]))}, runs with a net loss: {len(mcp_losses)}",
        f"- ledger after the replay (drop receipts sent by the harness): credited {ledger['credited_tokens']:,}, "
        f"overhead {ledger['overhead_tokens']:,}, recalled {ledger['recalled_tokens']:,}, net {ledger['net_tokens']:,} tokens",
        "",
        "## What the agent used next (from outputs it no longer carried in full)",
        "",
        "A need = a line (16+ chars) the agent copied into a command, or a distinctive name/path it typed, that it "
        "had not typed before and that came from an earlier output which the prompt no longer held in full.",
        "",
        f"{len(needs)} needs: {where['stub']} in a stub or digest ({where['stub'] / max(len(needs), 1):.1%}), "
        f"{where['recall']} one recall away ({where['recall'] / max(len(needs), 1):.1%}), "
        f"{where['missed']} missed ({where['missed'] / max(len(needs), 1):.1%}).",
        "",
        f"Needed next (from the output right before the command that used it): {len(prev)} needs, "
        f"{sum(nd.where == 'stub' for nd in prev)} already in observe's answer "
        f"({sum(nd.where == 'stub' for nd in prev) / max(len(prev), 1):.1%}), "
        f"{sum(nd.where == 'recall' for nd in prev)} one recall away.",
        "",
        "| previous command | source kind | next command | needs (kind, text, found in) |",
        "|---|---|---|---|",
    ]
    shown = 0
    for r in results:
        for s in r.samples[:1]:
            if shown >= 12:
                break
            needs_txt = "; ".join(f"{k}: `{t}` -> {w}" for k, t, w in s["needs"]).replace("|", "\\|")
            lines.append(f"| `{s['command']}` | {s['kind']} | `{s['next']}` | {needs_txt} |"
                         .replace("\n", " "))
            shown += 1
    lines += [
        "",
        "## OSIRIS-style table (real outputs grown to each size, 10-turn workflow, one recall charged)",
        "",
        "| payload | samples | baseline carried | bosun carried | bosun overhead | offloaded | net saving |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in table:
        lines.append(f"| {row['payload']:,} | {row['samples']} | {row['baseline']:,} | {row['bosun']:,} | "
                     f"{row['overhead']:,} | {row['offloaded']} | {pct(row['net'])} |")
    lines += ["", "## Per run", "", "| run | steps | offloaded | carried without | carried with | net | extra turns |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for r in sorted(results, key=lambda r: r.net):
        lines.append(f"| {r.traj_id} | {r.calls} | {r.offloaded} | {r.base_carried:,} | {r.bosun_carried:,} | "
                     f"{pct(r.net)} | {r.extra_turns} |")
    report = "\n".join(lines) + "\n"
    if args.out:
        Path(args.out).write_text(report)
    print("\n".join(lines[:40]))
    for row in table:
        print(row)
    sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main())
