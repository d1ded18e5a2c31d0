"""One-shared-word probes: everyday prompts that each share one word with a demo policy.

Written after the one-word gate was designed and used for no choice, so they measure how often
a word collision still routes. Prints each prompt that routes, with the shipped point and with
the gate off.

    python bench/route_probes.py
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from route_common import embed_cached, load_model

from bosun.core.abstain import GATE_OFF, SHIPPED
from bosun.core.route import build_index_with, route
from bosun.server.policies import demo_corpus_dir, scan_corpus

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


def main() -> int:
    emb = load_model()
    index = build_index_with(scan_corpus([demo_corpus_dir()]).policies, emb)
    vecs = embed_cached(emb, list(PROBES))
    for label, op in (("shipped", SHIPPED), ("gate off", dataclasses.replace(SHIPPED, solo_bg_z=GATE_OFF))):
        routed = 0
        for prompt, vec in zip(PROBES, vecs, strict=True):
            hits = [h.name for h in route(index, prompt, vec, op).hits]
            if hits:
                routed += 1
                print(f"{label}: {prompt!r} -> {', '.join(hits)}")
        print(f"{label}: {routed}/{len(PROBES)} routed\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
