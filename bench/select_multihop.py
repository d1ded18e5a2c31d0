"""HotpotQA both-found at a 2-passage budget (issue 19 item 7), on a seeded held-out split, with transfer checks.

    python bench/select_multihop.py [--out bench/results/select_multihop.md] [--heldout]

The split (``select_data.hotpot_split``: seed 20261201, 30% held out) was fixed before the work it
measures was tuned; tuning read only the tune part. ``--heldout`` adds the held-out columns (read once,
at the end). Rows: the similarity baseline, ``hybrid`` as it was before this round (no links from the goal:
``Params(goal_links=False)``), ``hybrid`` as shipped, and the one-step look-ahead (``options.lookahead``,
not the default). Metrics:
- both found at 1x (budget = the two supporting passages' tokens) and 1.5x;
- both found in the first two picks with no budget (``max_items=2``): the same question without the
  hint an exact budget gives (after one supporting pick, only passages no longer than the other fit);
- WiCE set coverage at 1x / 2x and redundant share (the claims whose sentences have vectors), and
  psi-loop's 14 tasks (useful / redundant hits): sets the rules were not fitted on.

Vectors come from the bench caches only (``select_data.py`` fills them); nothing is embedded here.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from select_data import (
    Case,
    all_texts,
    cached_vectors,
    covered,
    hotpot_cases,
    hotpot_split,
    psiloop_tasks,
    wice_cases,
)
from select_eval import bootstrap_diff, fmt_ci, pool_of, run_psiloop, run_wice

from bosun.core.embedding import Vectors
from bosun.core.selection.select import Params, select

EXTRA = [Path("~/.cache/bosun-bench/select-vecs.npz").expanduser()]
ROWS: list[tuple[str, str, Params]] = [
    ("baseline (similarity only)", "baseline", Params()),
    ("hybrid before (no goal links)", "hybrid", Params(goal_links=False)),
    ("**hybrid as shipped**", "hybrid", Params()),
    ("hybrid + look-ahead 5 (option, off by default)", "hybrid", Params(lookahead=5)),
]


def both_found(cases: Sequence[Case], vecs: dict[str, Vectors], strategy: str, params: Params,
               factor: float | None) -> np.ndarray:
    """Per question: 1 if both supporting passages were picked (``factor`` None: first two picks, no budget)."""
    out = []
    for case in cases:
        pool = pool_of(case, vecs)
        sup = case.gold["support"]
        if factor is None:
            idx = select(pool, 10**9, strategy, replace(params, max_items=2)).indices
        else:
            idx = select(pool, math.floor(sum(pool.tokens[i] for i in sup) * factor), strategy, params).indices
        out.append(float(len(set(idx) & set(sup)) == 2))
    return np.asarray(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--heldout", action="store_true", help="also score the held-out split (once, at the end)")
    args = ap.parse_args()
    tune, held = hotpot_split(hotpot_cases())
    vecs = cached_vectors(all_texts(tune) + all_texts(held), EXTRA)
    tune, held = covered(tune, vecs), covered(held, vecs)
    wice = wice_cases()
    wvecs = cached_vectors(all_texts(wice), EXTRA)
    n_wice = len(wice)
    wice = covered(wice, wvecs)
    tasks = psiloop_tasks()
    ptexts = [t["goal"] for t in tasks] + [x for t in tasks for x in t["current_context"]]
    pvecs = cached_vectors(ptexts + [c["text"] for t in tasks for c in t["candidates"]], EXTRA)
    parts = [("tune", tune)] + ([("held-out", held)] if args.heldout else [])
    lines = [f"HotpotQA: {len(tune)} tune / {len(held)} held-out questions"
             + ("" if args.heldout else " (held-out not read)")
             + f"; WiCE: {len(wice)} of {n_wice} claims (those whose sentences have vectors); psi-loop: 14 tasks.", ""]
    head = "| strategy | " + " | ".join(f"{name} 1x | {name} 1.5x | {name} first two, no budget" for name, _ in parts)
    lines += [head + " | WiCE 1x | WiCE 2x | WiCE redundant 1x / 2x | psi-loop useful / redundant |",
              "|---" * (1 + 3 * len(parts) + 4) + "|"]
    per: dict[tuple[str, str], np.ndarray] = {}
    wice_rows: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for label, strategy, params in ROWS:
        cells = []
        for name, cases in parts:
            for factor in (1.0, 1.5, None):
                v = both_found(cases, vecs, strategy, params, factor)
                per[(label, f"{name} {factor}")] = v
                cells.append(f"{v.mean():.3f}")
        w1, w2 = run_wice(wice, wvecs, strategy, params, 1.0), run_wice(wice, wvecs, strategy, params, 2.0)
        wice_rows[label] = (w1.values["cover"], w2.values["cover"])
        ps = run_psiloop(tasks, pvecs, strategy, params)
        cells += [f"{w1.mean('cover'):.3f}", f"{w2.mean('cover'):.3f}",
                  f"{w1.mean('redundant'):.3f} / {w2.mean('redundant'):.3f}", f"{ps['useful']} / {ps['redundant']}"]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "Paired bootstrap (95%), shipped minus before / minus baseline, in points:", ""]
    shipped, before, base = ROWS[2][0], ROWS[1][0], ROWS[0][0]
    for name, _ in parts:
        for factor in (1.0, 1.5, None):
            key = f"{name} {factor}"
            what = f"{name}, {'first two, no budget' if factor is None else f'{factor:g}x'}"
            lines.append(f"- HotpotQA {what}: {fmt_ci(bootstrap_diff(per[(shipped, key)], per[(before, key)]))} / "
                         f"{fmt_ci(bootstrap_diff(per[(shipped, key)], per[(base, key)]))}")
    look = ROWS[3][0]
    lines += ["", "Look-ahead minus shipped (paired bootstrap 95%, points):", ""]
    for name, _ in parts:
        for factor in (1.0, 1.5, None):
            key = f"{name} {factor}"
            what = f"{name}, {'first two, no budget' if factor is None else f'{factor:g}x'}"
            lines.append(f"- HotpotQA {what}: {fmt_ci(bootstrap_diff(per[(look, key)], per[(shipped, key)]))}")
    if len(parts) > 1:
        every = {label: np.concatenate([per[(label, f"{name} 1.0")] for name, _ in parts]) for label, _, _ in ROWS}
        lines += ["", f"All {len(tune) + len(held)} questions at 1x: "
                  + "; ".join(f"{label.strip('*')} {v.mean():.3f}" for label, v in every.items()), ""]
    for i, budget in enumerate(("1x", "2x")):
        lines.append(f"- WiCE {budget}: shipped - before {fmt_ci(bootstrap_diff(wice_rows[shipped][i], wice_rows[before][i]))}; "
                     f"look-ahead - shipped {fmt_ci(bootstrap_diff(wice_rows[look][i], wice_rows[shipped][i]))}")
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text("# select_context: HotpotQA at a 2-passage budget, held out, and transfer\n\n"
                            "Command: `python bench/select_multihop.py --heldout --out bench/results/select_multihop.md`"
                            "\n\n" + text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
