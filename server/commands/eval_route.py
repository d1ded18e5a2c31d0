"""``bosun eval route score|sweep|calibrate CORPUS < labelled.jsonl``: measure and calibrate routing.

The labelled file is oiax's JSONL: ``{"prompt", "expected": [names]}`` with
``[]`` for a negative and an optional ``sibling`` (a near-miss policy whose
routing would be harmful). ``score`` reports the operating point in force;
``sweep`` prints the whole grid, losing rows included; ``calibrate`` picks the
winner by a stated rule (zero false alarms is a hard gate, then F1, then the
quieter point) and writes it as TOML; nothing clears the gate: exit 1.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path
from typing import Any

NAME = "eval"
HELP = "measure routing quality on labelled prompts: bosun eval route score|sweep|calibrate CORPUS < labelled.jsonl"
EXAMPLE = "bosun eval route score server/policies < examples/policies-labelled.jsonl"

THRESHOLDS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
TOP_KS = (1, 2)
# corroboration gate values swept (besides the base point's): 0 = off, 99 = a one-word match never routes alone
GATES = (0.0, 4.0, 6.0, 99.0)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="eval_what", required=True)
    rp = sub.add_parser("route", help="routing quality (route / get_policy)")
    rp.add_argument("mode", choices=["score", "sweep", "calibrate"])
    rp.add_argument("corpus", nargs="+", help="policy directory (or several)")
    rp.add_argument("--operating-point", help="TOML from `calibrate` (score: default is the shipped point)")
    rp.add_argument("--out", help="calibrate: where to write the operating point TOML")
    rp.add_argument("--corpus-id", default="", help="calibrate: a human name for this corpus")
    rp.add_argument("--refit", action="store_true", help="calibrate/sweep: also refit the decision weights on these labels")
    rp.add_argument("--home", help="state directory for the model (default $BOSUN_HOME or ~/.bosun)")
    rp.add_argument("--input", default="-", help="labelled JSONL file (default: stdin)")


def _fmt(m: dict[str, float]) -> str:
    return (f"{m['recall_at_2']:>8.3f} {m['precision']:>9.3f} {m['f1']:>6.3f} {m['top1']:>6.3f} "
            f"{int(m['false_alarms']):>3}/{int(m['negatives']):<3} {m['harmful_sibling_rate']:>8.3f}")


HEADER = f"{'threshold':>9} {'solo_z':>6} {'top_k':>5} {'recall@2':>8} {'precision':>9} {'F1':>6} {'top-1':>6} {'FA':>7} {'sibling':>8}"


def run(args: argparse.Namespace) -> int:
    import os

    from bosun.core.embedding import CachingEmbedder
    from bosun.core.errors import BosunError
    from bosun.core.routing.abstain import SHIPPED, OperatingPoint, separability
    from bosun.core.routing.corpus import corpus_fingerprint
    from bosun.core.routing.metrics import compute, parse_labelled
    from bosun.core.routing.rerank import SHIPPED_POINT, judged_route
    from bosun.core.routing.route import build_index_with, clause_texts, route
    from bosun.server.commands.progress import Progress
    from bosun.server.judge_model import load_judge, serves_route
    from bosun.server.model import load_embedder
    from bosun.server.services.policies import CorpusError, load_operating_point_file, scan_corpus

    dirs = [Path(d).expanduser() for d in args.corpus]
    missing = [str(d) for d in dirs if not d.is_dir()]
    if missing:
        print(f"corpus: {', '.join(missing)} is not a directory", file=sys.stderr)
        return 2
    try:
        scan = scan_corpus(dirs)
    except CorpusError as exc:
        print(f"corpus: {exc}", file=sys.stderr)
        return 2
    for w in scan.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if not scan.policies:
        print("corpus: no routable policies found", file=sys.stderr)
        return 2
    try:
        text = sys.stdin.read() if args.input == "-" else Path(args.input).read_text(encoding="utf-8")
        rows = parse_labelled(text.splitlines())
    except (OSError, BosunError) as exc:
        print(f"labelled: {exc}", file=sys.stderr)
        return 2
    names = {p.name for p in scan.policies}
    unknown = sorted({n for r in rows for n in (*r.expected, *r.sibling) if n not in names})
    if unknown:  # e.g. a label naming a superseded document: it counts as a miss, loudly
        print(f"warning: labels name documents not routable in this corpus: {', '.join(unknown)}"
              + (f" (skipped as inactive: {', '.join(scan.skipped_inactive)})" if scan.skipped_inactive else ""),
              file=sys.stderr)

    home = Path(args.home or os.environ.get("BOSUN_HOME") or "~/.bosun").expanduser()
    emb = CachingEmbedder(load_embedder(home))
    try:
        op = load_operating_point_file(Path(args.operating_point)) if args.operating_point else SHIPPED
    except BosunError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    if args.operating_point and op.model_id and op.model_id != emb.model_id():
        print(f"operating point {args.operating_point} was measured under {op.model_id}; the model is "
              f"{emb.model_id()}: recalibrate", file=sys.stderr)
        return 2
    with Progress("building the routing index (model load, corpus texts)") as bar:
        index = build_index_with(scan.policies, emb)
        bar.stage("embedding the labelled prompts")
        qvecs = emb.embed([r.prompt for r in rows])
        # each prompt's clauses, embedded as the server embeds them (route scores each one: multi-intent)
        clause_sets = [clause_texts(r.prompt) for r in rows]
        flat = [c for cs in clause_sets for c in cs]
        flat_vecs = dict(zip(flat, emb.embed(flat), strict=True)) if flat else {}
    sep = separability(index.surface_vectors())
    print(f"corpus: {len(index)} documents, separability {sep:.2f}; {len(rows)} prompts "
          f"({sum(1 for r in rows if not r.expected)} negatives, {sum(1 for r in rows if r.sibling)} with siblings)")

    def evaluate(point: OperatingPoint, threshold: float | None, top_k: int, gate: float | None,
                 calibrated: bool = False) -> dict[str, float]:
        routed = [[h.name for h in route(index, r.prompt, q, point, top_k=top_k, threshold=threshold,
                                         solo_bg_z=gate, calibrated=calibrated,
                                         clause_vecs=[(c, flat_vecs[c]) for c in cs]).hits]
                  for r, q, cs in zip(rows, qvecs, clause_sets, strict=True)]
        return compute(rows, routed)

    cal = index.calibration
    if args.mode == "score":
        print(HEADER)
        judge = None if args.operating_point else load_judge(home, os.environ.get("BOSUN_JUDGE", "off"))
        if judge is not None and serves_route(judge):  # the first stage's top documents re-read by the judge
            routed = [[h.name for h in judged_route(index, r.prompt, q, judge, op.top_k, rrf_k=op.rrf_k).hits]
                      for r, q in zip(rows, qvecs, strict=True)]
            point = SHIPPED_POINT
            print(f"{point.admit:>9.2f} {'-':>6} {op.top_k:>5} {_fmt(compute(rows, routed))}")
            print(f"judge {judge.model_id()}: admits at relevance >= {point.admit:.2f} (a second document >= "
                  f"{point.second:.2f}); BOSUN_JUDGE=off scores the first stage alone")
            return 0
        if args.operating_point or cal is None:
            m = evaluate(op, op.threshold, op.top_k, op.solo_bg_z)
            print(f"{op.threshold:>9.2f} {op.solo_bg_z:>6g} {op.top_k:>5} {_fmt(m)}")
            print(f"operating point: {op.describe()}")
        else:  # the server's default: the decision self-calibrated on this corpus (no labels read)
            m = evaluate(op, None, op.top_k, None, calibrated=True)
            print(f"{cal.threshold:>9.2f} {cal.solo_bg_z:>6.2g} {op.top_k:>5} {_fmt(m)}")
            print(f"{cal.describe()}; weights: {op.describe()}")
        return 0
    if cal is not None and not args.operating_point:
        m = evaluate(op, None, op.top_k, None, calibrated=True)
        print(f"self-calibrated (the default, no labels): threshold {cal.threshold:.2f} solo_bg_z {cal.solo_bg_z:.2f} "
              f"top_k {op.top_k}: {_fmt(m)}")

    base = op
    if args.refit:
        base = _refit(index, rows, qvecs, op)
        print(f"refitted weights: {base.weights} bias {base.bias:+.3f}")
    grid = []
    for gate in sorted({base.solo_bg_z, *GATES}):
        for thr in THRESHOLDS:
            for k in TOP_KS:
                grid.append((thr, k, gate, evaluate(base, thr, k, gate)))
    # the rule: zero false alarms is a gate; then F1; ties go to the quieter point
    survivors = [g for g in grid if g[3]["false_alarms"] == 0]
    winner = max(survivors, key=lambda g: (round(g[3]["f1"], 6), g[0], -g[1], g[2])) if survivors else None
    print(HEADER + "  ")
    for thr, k, gate, m in grid:
        mark = "  <- chosen" if winner is not None and (thr, k, gate) == winner[:3] else ("  (false alarms)" if m["false_alarms"] else "")
        print(f"{thr:>9.2f} {gate:>6g} {k:>5} {_fmt(m)}{mark}")
    if args.mode == "sweep":
        return 0
    if winner is None:
        print("no configuration routes zero negatives: fix the corpus's routing surfaces (or the labels), "
              "not the threshold", file=sys.stderr)
        return 1
    if not args.out:
        print("calibrate needs --out FILE", file=sys.stderr)
        return 2
    thr, k, gate, m = winner
    chosen = OperatingPoint(
        weights=base.weights, bias=base.bias, threshold=thr, solo_bg_z=gate, top_k=k, rrf_k=base.rrf_k, model_id=emb.model_id(),
        corpus_id=args.corpus_id or ", ".join(str(d) for d in dirs),
        corpus_fingerprint=corpus_fingerprint(scan.policies), n_docs=len(index),
        n_docs_range=(max(1, len(index) // 2), len(index) * 2), separability=round(sep, 4),
        separability_range=(round(max(0.0, sep - 0.15), 4), round(min(1.0, sep + 0.15), 4)),
        measured=dt.date.today().isoformat(), metrics={k2: round(v, 4) for k2, v in m.items()},
    )
    import tomli_w

    Path(args.out).write_text(tomli_w.dumps(_toml_ready(chosen.to_dict())))
    print(f"wrote {args.out}: threshold {thr:.2f}, solo_bg_z {gate:g}, top_k {k} (serve it with BOSUN_ROUTE_OPERATING_POINT={args.out})")
    return 0


def _toml_ready(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if v is not None}


def _refit(index: Any, rows: Any, qvecs: Any, op: Any) -> Any:
    """Refit the logistic decision weights on these labels (class-balanced)."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    from bosun.core.routing.abstain import FEATURES, OperatingPoint
    from bosun.core.routing.route import decision_features, score

    X, y = [], []
    for r, q in zip(rows, qvecs, strict=True):
        sc = score(index, r.prompt, q, op.rrf_k)
        for doc in sc.order[: op.top_k + 1].tolist():
            f = decision_features(sc, doc)
            X.append([f[k] for k in FEATURES])
            y.append(1 if index.policies[doc].name in r.expected else 0)
    if len(set(y)) < 2:
        return op
    lr = LogisticRegression(class_weight="balanced", C=1.0, max_iter=2000).fit(np.array(X), np.array(y))
    weights = {k: round(float(c), 4) for k, c in zip(FEATURES, lr.coef_[0], strict=True)}
    return OperatingPoint(weights=weights, bias=round(float(lr.intercept_[0]), 4), threshold=op.threshold,
                          solo_bg_z=op.solo_bg_z, top_k=op.top_k, rrf_k=op.rrf_k, model_id=op.model_id)
