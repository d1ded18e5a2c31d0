"""Loaders for the claim-audit evaluation data (development halves in ../shared/data/claims).

Each example is (group, claim, chunks, label) in dokis's chunk shape. Label mapping:
- WiCE: supported -> 1, not_supported -> 0, partially_supported -> "partial" (reported separately,
  and as 0 in the strict mapping). Chunks: the cited page's sentences, 8 per chunk, no URL.
- ExpertQA: Complete -> 1, Missing / Incomplete -> 0, Partial -> "partial", N/A -> "na".
  Chunks: every non-empty passage cited anywhere in the same answer (question + system), with its
  URL, so a claim with a Missing citation is checked against the answer's other evidence.
  316 dev claims cite evidence whose text is empty in the data (219 of them labelled Complete):
  their label cannot be checked from text, so they are marked ``judgeable=False``, left out of
  training, and reported separately.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from bench_io import read_jsonl, shared_dir


def _rows(name: str) -> Iterator[dict[str, Any]]:
    return read_jsonl(shared_dir() / "data" / "claims" / name)


@dataclass
class Example:
    dataset: str
    group: str
    claim: str
    chunks: list[dict[str, Any]]
    label: int | str  # 1 supported, 0 not supported, or "partial" / "na"
    judgeable: bool = True  # False: the label rests on evidence whose text the data does not contain


def wice(per_chunk: int = 8) -> list[Example]:
    out = []
    for r in _rows("wice-dev.jsonl.gz"):
        sents = r["sentences"]
        chunks = [
            {"content": " ".join(sents[i : i + per_chunk]), "id": f"s{i}"}
            for i in range(0, len(sents), per_chunk)
        ]
        label: int | str = {"supported": 1, "not_supported": 0}.get(r["label"], "partial")
        out.append(Example("wice", r["title"] or r["id"], r["claim"], chunks, label))
    return out


def expertqa() -> list[Example]:
    rows = list(_rows("expertqa-dev.jsonl.gz"))
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["question"], r["system"]), []).append(r)
    out = []
    for (question, system), members in groups.items():
        chunks: list[dict[str, Any]] = []
        seen: set[str] = set()
        for r in members:
            for ev in r["evidence"]:
                if not ev["text"].strip() or ev["text"] in seen:
                    continue
                seen.add(ev["text"])
                chunks.append({"content": ev["text"], "source_url": ev["url"], "id": f"e{len(chunks)}"})
        for r in members:
            support = r["support"]
            label: int | str
            if support == "Complete":
                label = 1
            elif support in ("Missing", "Incomplete"):
                label = 0
            elif support == "Partial":
                label = "partial"
            else:
                label = "na"
            empty = bool(r["evidence"]) and all(not ev["text"].strip() for ev in r["evidence"])
            out.append(Example("expertqa", f"{question}|{system}", r["claim"], chunks, label, not empty))
    return out
