"""Word-collision probes: everyday prompts that share a word with a policy, and should route nothing.

Set A (PROBES): 20 prompts, each sharing one word with a demo policy; written after the one-word
gate was designed and used for no choice. Set B (bench/labels/route_probes_b.jsonl): 20 everyday
prompts sharing a word with a held-out policy plus 10 engineering prompts for those policies that
should route; written before the quoted-mention rule, the body-paragraph rule and the broader
background, and used only for reporting. Prints each prompt that routes wrongly, with the shipped
point and with the gate off.

    python bench/route_probes.py
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from route_common import embed_cached, load_model

from bosun.core.routing.abstain import GATE_OFF, SHIPPED
from bosun.core.routing.metrics import compute, parse_labelled
from bosun.core.routing.route import build_index_with, clause_texts, route
from bosun.server.services.policies import demo_corpus_dir, scan_corpus

REPO = Path(__file__).resolve().parents[1]

PROBES = (
    "Recommend a good book about the history of Rome", "Plan a three-day trip to Lisbon",
    "Help me plan my wedding seating chart", "Which snake species is the python, and is it venomous?",
    "Write a review of the new Italian restaurant downtown", "When do swallows migrate south for the winter?",
    "What is the history of the Eiffel Tower?", "Give me a savings plan for buying a house",
    "How do I review for my chemistry exam?", "Where can I buy a bus token in Rome?",
    "Is it safe to deploy an airbag myself?", "What secret ingredient makes pesto taste better?",
    "How do I store fresh basil?", "What's the best way to test if an egg is fresh?",
    "How do I keep a journal of my running logs?", "Explain the access rules for the national park",
    "How much does a cloud storage plan for photos cost?", "What's a good release date for my indie film?",
    "Recommend a style of dress for a summer wedding", "How do I migrate my contacts to a new phone?",
)


def _clauses(emb: Any, prompts: list[str]) -> dict[str, list[tuple[str, Any]]]:
    """Each prompt's clauses with their vectors, as the server routes it (route.py: the clause pass)."""
    sets = {p: clause_texts(p) for p in prompts}
    flat = list(dict.fromkeys(c for cs in sets.values() for c in cs))
    vecs = dict(zip(flat, embed_cached(emb, flat), strict=True)) if flat else {}
    return {p: [(c, vecs[c]) for c in cs] for p, cs in sets.items()}


def main() -> int:
    emb = load_model()
    index = build_index_with(scan_corpus([demo_corpus_dir()]).policies, emb)
    vecs = embed_cached(emb, list(PROBES))
    cl = _clauses(emb, list(PROBES))
    for label, gate in (("self-calibrated (default)", None), ("gate off", GATE_OFF)):
        routed = 0
        for prompt, vec in zip(PROBES, vecs, strict=True):
            hits = [h.name for h in route(index, prompt, vec, SHIPPED, solo_bg_z=gate, clause_vecs=cl[prompt]).hits]
            if hits:
                routed += 1
                print(f"{label}: {prompt!r} -> {', '.join(hits)}")
        print(f"{label}: {routed}/{len(PROBES)} routed\n")
    held = build_index_with(scan_corpus([REPO / "examples" / "policies-heldout"]).policies, emb)
    rows = parse_labelled((REPO / "bench" / "labels" / "route_probes_b.jsonl").read_text().splitlines())
    bvecs = embed_cached(emb, [r.prompt for r in rows])
    bcl = _clauses(emb, [r.prompt for r in rows])
    for label, gate in (("self-calibrated (default)", None), ("gate off", GATE_OFF)):
        got = [[h.name for h in route(held, r.prompt, v, SHIPPED, solo_bg_z=gate,
                                               clause_vecs=bcl[r.prompt]).hits] for r, v in zip(rows, bvecs, strict=True)]
        for r, names in zip(rows, got, strict=True):
            if (not r.expected and names) or (r.expected and not set(r.expected) & set(names)):
                print(f"set B {label}: {r.prompt!r} -> {', '.join(names) or '(nothing)'}; expected {', '.join(r.expected) or 'nothing'}")
        m = compute(rows, got)
        print(f"set B {label}: {int(m['false_alarms'])}/{int(m['negatives'])} everyday prompts routed; engineering prompts "
              f"recall@2 {m['recall_at_2']:.3f}, top-1 {m['top1']:.3f}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
