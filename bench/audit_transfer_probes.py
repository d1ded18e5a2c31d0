"""Transfer probes: contradictions and over-claims written from real sentences (news, docs, papers).

    .venv/bin/python bench/audit_transfer_probes.py            # the dev part only
    .venv/bin/python bench/audit_transfer_probes.py --unseen   # also the unseen part (run once, at the end)

bench/labels/transfer_probes_dev.jsonl and transfer_probes_unseen.jsonl were both written before
any check was run on them (the commit that adds them has no code change). transfer_probes_c_dev.jsonl
(round 5, 33 items, encyclopedic/scientific sentences) is a dev part: committed before its first run,
then the checks were generalised after reading its misses, so its score is not evidence. Each item is one claim
against its evidence sentences, one sentence per chunk, scored with shipped defaults as outside
scorers do: rejected = any verdict other than ``supported``. Kinds: role_swap, antonym, negation,
number, date, quantifier, addon (an uncovered add-on clause), and faithful paraphrases (must pass).
The semantic matcher (the default) embeds with the real model when it can be loaded.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit_eval_common import default_embedder, default_words

from bosun.core.audit.audit import audit
from bosun.core.audit.config import AuditConfig

HERE = Path(__file__).resolve().parent


def run(name: str, embed: Any, cfg: AuditConfig, words: Any = None) -> list[str]:
    rows = [json.loads(x) for x in (HERE / "labels" / name).read_text().splitlines() if x]
    total: Counter[str] = Counter()
    ok: Counter[str] = Counter()
    misses = []
    for p in rows:
        rep = audit("", p["chunks"], p["claim"], cfg, embed=embed, words=words)
        verdict = rep["claims"][0]["verdict"] if rep["claims"] else "no_claim"
        total[p["kind"]] += 1
        good = (verdict != "supported") == (p["expect"] == "reject")
        ok[p["kind"]] += good
        if not good:
            misses.append(f"  - {p['kind']}: {p['claim']} -> {verdict} ({rep['claims'][0]['note'] if rep['claims'] else ''})")
    lines = [f"### {name} (matcher {cfg.matcher}{' + token alignment' if words else ''})", "", "| kind | items | right |", "|---|---:|---:|"]
    for kind in total:
        lines.append(f"| {kind} | {total[kind]} | {ok[kind]} |")
    rej = sum(t for k, t in total.items() if k != "paraphrase")
    lines.append(f"\ncontradictions/over-claims rejected: **{sum(v for k, v in ok.items() if k != 'paraphrase')} of {rej}**; "
                 f"paraphrases wrongly rejected: **{total['paraphrase'] - ok['paraphrase']} of {total['paraphrase']}**")
    if misses:
        lines += ["", "misses:", *misses]
    return lines


def main() -> None:
    names = ["transfer_probes_dev.jsonl", "transfer_probes_c_dev.jsonl"] + (
        ["transfer_probes_unseen.jsonl"] if "--unseen" in sys.argv else [])
    embed = default_embedder()
    words = default_words()
    lines: list[str] = []
    for matcher, with_words in (("semantic", True), ("semantic", False), ("bm25", False)):
        if matcher == "semantic" and (embed is None or (with_words and words is None)):
            lines.append("semantic: model not available, skipped")
            continue
        for name in names:
            lines += [*run(name, embed, AuditConfig(matcher=matcher), words if with_words else None), ""]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
