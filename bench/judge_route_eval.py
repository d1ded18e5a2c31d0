"""Route with and without the judge, in one run, on every labelled corpus here.

    .venv/bin/python bench/judge_route_eval.py [--judge-dir DIR] [--limit N] [--grid]

Rows per corpus (end to end, abstention included; the same metrics as bench/route_dev.py):
* ``first stage``: the shipped route decision without the judge (``BOSUN_JUDGE=off``);
* ``judge``: the first stage's top 10 re-read by the judge, admitted on its shipped bars
  (``core/routing/rerank.py`` SHIPPED_POINT).
MetaTool is scored zero-shot: the judge was trained on no MetaTool query, and the prompt adapter fitted on
MetaTool's tune queries is off in both rows (``--adapter`` turns it on for the first stage). ``--grid``
adds rows for other bars, to see the trade-off; the shipped bars were chosen on the dev corpora (demo,
bookwell) only, never on MetaTool or a corpus written blind and held out.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from route_common import BenchEmbedder, embed_cached, load_model, metatool_docs, metatool_queries
from route_dev import HEADER, evaluate, shipped, summary

from bosun.core.routing.corpus import Policy
from bosun.core.routing.rerank import SHIPPED_POINT, JudgePoint, judged_route
from bosun.core.routing.route import build_index_with, clause_texts

REPO = Path(__file__).resolve().parents[1]
BLIND = {"bookwell": "policies-bookwell-dev", "ledgerline": "policies-ledgerline-holdout",
         "haulwise": "policies-haulwise-holdout2", "brinewell": "policies-brinewell-holdout3"}


def load_judge(directory: Path | None) -> Any:
    from bosun.server.judge_model import load_shipped
    from bosun.server.model import sha256_file

    if directory is None:
        return load_shipped()
    return load_shipped(directory=directory, sha256=sha256_file(directory / "model.onnx"))


def policy_set(name: str) -> tuple[list[Policy], list[dict[str, Any]]]:
    from bosun.core.routing.metrics import parse_labelled
    from bosun.server.services.policies import scan_corpus

    if name in BLIND:
        root = REPO / "bench" / "corpora" / BLIND[name]
        corpus, labels = root / "policies", root / "prompts.jsonl"
    else:
        corpus, labels = {"demo": (REPO / "server" / "policies", REPO / "examples" / "policies-labelled.jsonl"),
                          "heldout": (REPO / "examples" / "policies-heldout",
                                      REPO / "examples" / "policies-heldout-labelled.jsonl")}[name]
    pols = scan_corpus([corpus]).policies
    rows = parse_labelled(labels.read_text().splitlines())
    return pols, [{"qid": f"{name}-{i}", "query": r.prompt, "relevant": list(r.expected),
                   "kind": ("multi" if len(r.expected) > 1 else "single") if r.expected else "awareness_neg"}
                  for i, r in enumerate(rows)]


class MemoJudge:
    """The judge with a cache of pair scores, so a grid of bars costs one pass."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.memo: dict[tuple[str, str], float] = {}

    def relevance(self, pairs: list[tuple[str, str]]) -> Any:
        import numpy as np

        todo = [p for p in dict.fromkeys(pairs) if p not in self.memo]
        if todo:
            self.memo.update(zip(todo, self.inner.relevance(todo).tolist(), strict=True))
        return np.array([self.memo[p] for p in pairs], dtype=np.float32)

    def claim_probs(self, pairs: list[tuple[str, str]]) -> Any:
        return self.inner.claim_probs(pairs)

    def model_id(self) -> str:
        return str(self.inner.model_id())

    def ready(self) -> bool:
        return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--judge-dir", type=Path, help="a judge directory (default: the shipped one)")
    ap.add_argument("--corpora", default="metatool,demo,heldout,bookwell,ledgerline,haulwise,brinewell")
    ap.add_argument("--limit", type=int, default=2000, help="MetaTool queries sampled (seeded), 0 = all")
    ap.add_argument("--adapter", action="store_true", help="the MetaTool prompt adapter on in the first stage")
    ap.add_argument("--grid", action="store_true")
    ap.add_argument("--part", choices=("tune", "report"), default="tune",
                    help="MetaTool sample: the one a judge point is chosen on, or the disjoint one it is reported on")
    ap.add_argument("--depth", type=int, default=10, help="documents the judge re-reads per prompt")
    args = ap.parse_args()
    emb = load_model()
    judge = MemoJudge(load_judge(args.judge_dir))
    points = {"judge": SHIPPED_POINT}
    if args.grid:
        for a in (0.2, 0.3, 0.5, 0.7):
            for s in (0.5, 0.9):
                for w in (0.0, 0.1, 0.3, 5.0):  # 5: the first stage's order, the judge's admission
                    points[f"judge a={a} s={s} w={w}"] = JudgePoint(a, s, w)
    print(HEADER)
    for name in args.corpora.split(","):
        if name == "metatool":
            pols = metatool_docs()
            qs = metatool_queries()
            if args.limit:  # "tune": the first --limit of a seeded shuffle; "report": the next --limit, disjoint
                qs = random.Random(7).sample(qs, len(qs))
                qs = qs[: args.limit] if args.part == "tune" else qs[args.limit : 2 * args.limit]
        else:
            pols, qs = policy_set(name)
        t0 = time.perf_counter()
        index = build_index_with(pols, BenchEmbedder(emb), adapter=args.adapter if name == "metatool" else True)
        texts = list(dict.fromkeys(q["query"] for q in qs))
        texts += [c for c in dict.fromkeys(c for t in texts for c in clause_texts(t)) if c not in set(texts)]
        vecs = dict(zip(texts, embed_cached(emb, texts), strict=True))
        base = evaluate(index, qs, vecs, shipped, clause_vecs=vecs)
        for line in summary(f"{name} first stage", base)[:1] + [x for x in summary(f"{name} first stage", base)
                                                                 if "awareness_neg" in x]:
            print(line)
        t1 = time.perf_counter()
        for label, point in points.items():
            def decide(index: Any, prompt: str, qvec: Any, point: JudgePoint = point, **_: Any) -> Any:
                return judged_route(index, prompt, qvec, judge, 2, point, depth=args.depth)

            res = evaluate(index, qs, vecs, decide)
            rows = summary(f"{name} {label}", res)
            for line in rows[:1] + [x for x in rows if "awareness_neg" in x]:
                print(line)
        print(f"{name}: {len(pols)} docs, {len(qs)} queries, first stage {t1 - t0:.1f}s, "
              f"judge rows {time.perf_counter() - t1:.1f}s", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
