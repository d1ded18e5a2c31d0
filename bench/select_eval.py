"""Evaluate select_context strategies on HotpotQA, WiCE and psi-loop's own benchmark.

Run by hand (the first run embeds ~40k texts and caches them in BOSUN_BENCH_HOME):

    /work/venv/bin/python bench/select_eval.py            # the report (markdown on stdout)
    /work/venv/bin/python bench/select_eval.py --grid     # the hybrid parameter sweep, on two halves

Budgets are in estimated model tokens (bosun.core.tokens.estimate_tokens).
Confidence intervals are a paired bootstrap (2,000 resamples, 95%) of the
per-question difference between two strategies.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from select_data import Case, all_texts, embed_all, hotpot_cases, psiloop_tasks, wice_cases

from bosun.core.embedding import Vectors
from bosun.core.selection.select import Params, Pool, select
from bosun.core.tokens import estimate_tokens

SEED = "psi-loop as shipped (keyword V, centroid H)"
STRATS: list[tuple[str, str, Params]] = [
    (SEED, SEED, Params()),
    ("baseline", "baseline", Params()),
    ("psi0", "psi0", Params()),
    ("mmr (lambda 0.7)", "mmr", Params(mmr_lambda=0.7)),
    ("mmr (lambda 0.5)", "mmr", Params(mmr_lambda=0.5)),
    ("hybrid (default)", "hybrid", Params()),
]


def seed_select(case: Case, budget: int) -> list[int]:
    """psi-loop's own rule, re-implemented from its README for comparison (not shipped).

    V = share of the goal's keywords the candidate contains; H = 1 - cosine between the
    candidate's bag of words and the centroid of the context's L2-normalised bags; score
    H * V, near-tie value priority, iterative (each pick joins the context), greedy packing.
    """
    from bosun.core.selection.lexical import terms
    from bosun.core.selection.select import NEAR_TIE_EPSILON

    def bow(text: str) -> dict[str, float]:
        counts: dict[str, float] = {}
        for t in terms(text):
            counts[t] = counts.get(t, 0.0) + 1.0
        norm = math.sqrt(sum(v * v for v in counts.values())) or 1.0
        return {k: v / norm for k, v in counts.items()}

    goal = set(terms(case.goal))
    bags = [bow(t) for t in case.candidates]
    value = [len(goal & set(b)) / max(1, len(goal)) for b in bags]
    ctx = [bow(t) for t in case.context]
    tokens = [estimate_tokens(t) for t in case.candidates]
    chosen: list[int] = []
    left = budget
    while True:
        centroid: dict[str, float] = {}
        for b in ctx:
            for k, v in b.items():
                centroid[k] = centroid.get(k, 0.0) + v / len(ctx)
        cn = math.sqrt(sum(v * v for v in centroid.values())) or 1.0
        scored = []
        for i, b in enumerate(bags):
            if i in chosen or tokens[i] > left:
                continue
            sim = sum(v * centroid.get(k, 0.0) for k, v in b.items()) / cn if centroid else 0.0
            scored.append((value[i] * (1.0 - sim), value[i], i))
        if not scored:
            return chosen
        top = max(scored)
        near = [x for x in scored if x[0] >= top[0] - NEAR_TIE_EPSILON]
        pick = max(near, key=lambda x: (x[1], x[0]))[2]
        chosen.append(pick)
        left -= tokens[pick]
        ctx.append(bags[pick])


def pool_of(case: Case, vecs: dict[str, Vectors]) -> Pool:
    return Pool(
        goal=vecs[case.goal],
        candidates=np.stack([vecs[t] for t in case.candidates]),
        tokens=[estimate_tokens(t) for t in case.candidates],
        labels=case.ids,
        context=np.stack([vecs[t] for t in case.context]) if case.context else None,
        context_labels=[f"context[{i}]" for i in range(len(case.context))],
        candidate_texts=case.candidates,
        goal_text=case.goal,
        context_texts=case.context,
    )


# -- metrics -------------------------------------------------------------------------------
@dataclass
class Rows:
    """Per-question metric arrays for one strategy on one data set."""

    values: dict[str, np.ndarray]

    def mean(self, key: str) -> float:
        return float(np.mean(self.values[key]))


def run_hotpot(cases: Sequence[Case], vecs: dict[str, Vectors], strategy: str, params: Params, factor: float) -> Rows:
    recall, both, used, budget_l = [], [], [], []
    for case in cases:
        pool = pool_of(case, vecs)
        sup = case.gold["support"]
        budget = math.floor(sum(pool.tokens[i] for i in sup) * factor)
        idx = seed_select(case, budget) if strategy == SEED else select(pool, budget, strategy, params).indices
        got = set(idx) & set(sup)
        recall.append(len(got) / 2)
        both.append(float(len(got) == 2))
        used.append(sum(pool.tokens[i] for i in idx))
        budget_l.append(budget)
    return Rows({"recall": np.array(recall), "both": np.array(both), "tokens": np.array(used),
                 "budget": np.array(budget_l)})


def run_wice(cases: Sequence[Case], vecs: dict[str, Vectors], strategy: str, params: Params, factor: float) -> Rows:
    cover, red, nsel, recall, used = [], [], [], [], []
    for case in cases:
        pool = pool_of(case, vecs)
        sets = case.gold["sets"]
        smallest = min(sum(pool.tokens[i] for i in s) for s in sets)
        budget = math.floor(smallest * factor)
        sel = set(seed_select(case, budget) if strategy == SEED else select(pool, budget, strategy, params).indices)
        covered = any(set(s) <= sel for s in sets)
        # the primary set is the one the selection covers best; support from any other set is redundant
        primary = max(sets, key=lambda s: (len(set(s) & sel) / len(s), -len(s)))
        any_support = set().union(*map(set, sets))
        redundant = len((sel & any_support) - set(primary))
        cover.append(float(covered))
        red.append(redundant)
        nsel.append(len(sel))
        recall.append(len(sel & set(primary)) / len(primary))
        used.append(sum(pool.tokens[i] for i in sel))
    return Rows({"cover": np.array(cover), "redundant": np.array(red, dtype=float), "selected": np.array(nsel, float),
                 "recall": np.array(recall), "tokens": np.array(used, float)})


def bootstrap_diff(a: np.ndarray, b: np.ndarray, reps: int = 2000, seed: int = 7) -> tuple[float, float, float]:
    """Mean of a - b with a paired 95% bootstrap interval."""
    d = np.asarray(a, float) - np.asarray(b, float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(d), size=(reps, len(d)))
    means = d[idx].mean(axis=1)
    return float(d.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def fmt_ci(t: tuple[float, float, float], pct: bool = True) -> str:
    k = 100.0 if pct else 1.0
    return f"{t[0] * k:+.1f} [{t[1] * k:+.1f}, {t[2] * k:+.1f}]"


# -- psi-loop's fixture ----------------------------------------------------------------------
def run_psiloop(tasks: Sequence[dict[str, Any]], vecs: dict[str, Vectors], strategy: str, params: Params) -> dict[str, Any]:
    """psi-loop's metrics: useful and redundant hits, and wins/ties/losses against the baseline.

    psi-loop's ``max_tokens`` (10-11) counts its own simple tokens and is meant to hold one
    candidate; in estimated model tokens 5 of the 14 useful candidates would not fit it. So a
    task's budget here is its largest candidate's token count: room for one candidate, any one.
    """
    out = {"useful": 0, "redundant": 0, "picks": []}
    for t in tasks:
        case = Case(t["id"], t["goal"], [c["text"] for c in t["candidates"]], list(t["current_context"]),
                    ids=[c["id"] for c in t["candidates"]])
        pool = pool_of(case, vecs)
        budget = max(pool.tokens)
        idx = seed_select(case, budget) if strategy == SEED else select(pool, budget, strategy, params).indices
        chosen = [case.ids[i] for i in idx]
        u = len(set(chosen) & set(t["gold_useful_candidates"]))
        r = len(set(chosen) & set(t["gold_redundant_candidates"]))
        out["useful"] += u
        out["redundant"] += r
        out["picks"].append((u, r))
    return out


def win_counts(picks: list[tuple[int, int]], base: list[tuple[int, int]]) -> tuple[int, int, int]:
    """A win: more useful hits than the baseline, or as many and fewer redundant ones."""
    w = t = lo = 0
    for (u, r), (bu, br) in zip(picks, base, strict=True):
        key, bkey = (u, -r), (bu, -br)
        if key > bkey:
            w += 1
        elif key == bkey:
            t += 1
        else:
            lo += 1
    return w, t, lo


# -- report ----------------------------------------------------------------------------------
def report(hp: list[Case], wc: list[Case], tasks: list[dict[str, Any]], vecs: dict[str, Vectors]) -> str:
    lines: list[str] = []
    emit = lines.append
    emit(f"## HotpotQA ({len(hp)} questions x 10 passages, 2 supporting)\n")
    hot: dict[tuple[str, float], Rows] = {}
    for factor in (1.0, 1.5):
        emit(f"Budget = {factor:g} x tokens of the two supporting passages.\n")
        emit("| strategy | recall | both found | tokens used / budget | ms per question |")
        emit("|---|---:|---:|---:|---:|")
        for name, strat, params in STRATS:
            t0 = time.perf_counter()
            rows = run_hotpot(hp, vecs, strat, params, factor)
            ms = (time.perf_counter() - t0) * 1000 / len(hp)
            hot[(name, factor)] = rows
            emit(f"| {name} | {rows.mean('recall'):.3f} | {rows.mean('both'):.3f} | "
                 f"{rows.mean('tokens'):.0f} / {rows.mean('budget'):.0f} | {ms:.2f} |")
        emit("")
    emit("Default (hybrid) minus another strategy, paired bootstrap 95% CI, percentage points:\n")
    emit("| budget | vs | both found | recall |")
    emit("|---|---|---:|---:|")
    for factor in (1.0, 1.5):
        d = hot[("hybrid (default)", factor)]
        for other in (SEED, "baseline", "psi0", "mmr (lambda 0.7)"):
            o = hot[(other, factor)]
            emit(f"| {factor:g}x | {other} | {fmt_ci(bootstrap_diff(d.values['both'], o.values['both']))} | "
                 f"{fmt_ci(bootstrap_diff(d.values['recall'], o.values['recall']))} |")
    emit("")

    emit(f"## WiCE ({len(wc)} claims with a supporting set, {np.mean([len(c.candidates) for c in wc]):.0f} "
         "sentences each on average)\n")
    wic: dict[tuple[str, float], Rows] = {}
    for factor in (1.0, 2.0):
        emit(f"Budget = {factor:g} x tokens of the smallest supporting set.\n")
        emit("| strategy | set coverage | recall of best set | redundant share | sentences | tokens |")
        emit("|---|---:|---:|---:|---:|---:|")
        for name, strat, params in STRATS:
            rows = run_wice(wc, vecs, strat, params, factor)
            wic[(name, factor)] = rows
            share = rows.values["redundant"].sum() / max(1.0, rows.values["selected"].sum())
            emit(f"| {name} | {rows.mean('cover'):.3f} | {rows.mean('recall'):.3f} | {share:.3f} | "
                 f"{rows.mean('selected'):.1f} | {rows.mean('tokens'):.0f} |")
        emit("")
    emit("Default (hybrid) minus another strategy, paired bootstrap 95% CI, percentage points:\n")
    emit("| budget | vs | set coverage | redundant sentences per claim (count) |")
    emit("|---|---|---:|---:|")
    for factor in (1.0, 2.0):
        d = wic[("hybrid (default)", factor)]
        for other in (SEED, "baseline", "psi0", "mmr (lambda 0.7)"):
            o = wic[(other, factor)]
            emit(f"| {factor:g}x | {other} | {fmt_ci(bootstrap_diff(d.values['cover'], o.values['cover']))} | "
                 f"{fmt_ci(bootstrap_diff(d.values['redundant'], o.values['redundant']), pct=False)} |")
    emit("")

    emit("Stability across the two halves (even / odd rows) of each set, default minus baseline:\n")
    emit("| set | half | default | baseline | difference [95% CI] |")
    emit("|---|---|---:|---:|---:|")
    for label, rows_d, rows_b, key in (
        ("HotpotQA 1x, both found", hot[("hybrid (default)", 1.0)], hot[("baseline", 1.0)], "both"),
        ("WiCE 2x, set coverage", wic[("hybrid (default)", 2.0)], wic[("baseline", 2.0)], "cover"),
    ):
        for half, sl in (("even", slice(0, None, 2)), ("odd", slice(1, None, 2))):
            a, b = rows_d.values[key][sl], rows_b.values[key][sl]
            emit(f"| {label} | {half} | {a.mean():.3f} | {b.mean():.3f} | {fmt_ci(bootstrap_diff(a, b))} |")
    emit("")

    emit(f"## psi-loop's benchmark ({len(tasks)} tasks)\n")
    emit("Budget: the task's largest candidate (room for one). A win: more useful hits than the baseline, "
         "or as many and fewer redundant hits.\n")
    emit("| strategy | useful hits | redundant hits | wins / ties / losses vs baseline |")
    emit("|---|---:|---:|---:|")
    base = run_psiloop(tasks, vecs, "baseline", Params())
    for name, strat, params in STRATS:
        res = run_psiloop(tasks, vecs, strat, params)
        w, t, lo = win_counts(res["picks"], base["picks"])
        emit(f"| {name} | {res['useful']}/{len(tasks)} | {res['redundant']}/{len(tasks)} | {w} / {t} / {lo} |")
    emit("")
    return "\n".join(lines)


def grid(hp: list[Case], wc: list[Case], vecs: dict[str, Vectors]) -> None:
    """Sensitivity of the hybrid to its knobs around the defaults, on both halves of each set.

    A setting that only wins on one half is fitted to noise; the defaults should sit in a
    flat region. Prints HotpotQA both-found (1x) and WiCE set coverage (1x), even | odd rows.
    """
    halves = [(hp[0::2], wc[0::2]), (hp[1::2], wc[1::2])]
    base = [(run_hotpot(h, vecs, "baseline", Params(), 1.0).mean("both"),
             run_wice(w, vecs, "baseline", Params(), 1.0).mean("cover")) for h, w in halves]
    print(f"baseline: hotpot {base[0][0]:.3f} | {base[1][0]:.3f}   wice {base[0][1]:.3f} | {base[1][1]:.3f}")
    space = {
        "lexical_weight": [0.5, 0.7, 0.85],
        "coverage": [0.5, 0.8],
        "hop_weight": [0.1, 0.2, 0.3],
        "overlap_threshold": [0.5, 0.6, 0.7],
    }
    keys = list(space)
    for combo in itertools.product(*space.values()):
        params = replace(Params(), **dict(zip(keys, combo, strict=True)))
        cells = [(run_hotpot(h, vecs, "hybrid", params, 1.0).mean("both"),
                  run_wice(w, vecs, "hybrid", params, 1.0).mean("cover")) for h, w in halves]
        tag = " ".join(f"{k}={v}" for k, v in zip(keys, combo, strict=True))
        print(f"{tag}: hotpot {cells[0][0]:.3f} | {cells[1][0]:.3f}   wice {cells[0][1]:.3f} | {cells[1][1]:.3f}",
              flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--grid", action="store_true", help="sweep the hybrid's parameters on two halves")
    ap.add_argument("--out", type=Path, help="also write the report to this markdown file")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    hp, wc, tasks = hotpot_cases(), wice_cases(), psiloop_tasks()
    extra = [t["goal"] for t in tasks] + [x for t in tasks for x in t["current_context"]]
    extra += [c["text"] for t in tasks for c in t["candidates"]]
    vecs = asyncio.run(embed_all(all_texts(hp) + all_texts(wc) + extra))
    print(f"<!-- embedded/cached {len(vecs)} texts in {time.perf_counter() - t0:.1f}s -->", file=sys.stderr)
    if args.grid:
        grid(hp, wc, vecs)
        return 0
    text = report(hp, wc, tasks, vecs)
    print(text)
    if args.out:
        head = ("# select_context evaluation\n\nCommand: `/work/venv/bin/python bench/select_eval.py --out "
                "bench/results/select_eval.md` (this file is its output). Budgets in estimated model tokens.\n\n")
        args.out.write_text(head + text + "\n")
    return 0


_: Callable[..., Any] = main
if __name__ == "__main__":
    raise SystemExit(main())
