"""Loaders for the claim-audit evaluation data (development halves in ../shared/data/claims).

Each example is (group, claim, chunks, label) in dokis's chunk shape. Label mapping:
- WiCE: supported -> 1, not_supported -> 0, partially_supported -> "partial" (0 in the strict
  mapping, which is what training and the headline numbers use). Chunks: the cited page's
  sentences, one per chunk (how outside scorers feed it: "its evidence sentences as chunks").
- ExpertQA: Complete -> 1, Missing / Incomplete -> 0, Partial -> "partial", N/A -> "na".
  Chunks: the claim's own cited passages with their URLs (default; a Missing citation means no
  chunks), or every passage cited anywhere in the same answer (``own_evidence=False``).
  316 dev claims cite evidence whose text is empty in the data (219 of them labelled Complete):
  their label cannot be checked from text, so they are marked ``judgeable=False``, left out of
  training, and reported separately.

Held-out part: ``holdout(group)`` puts one group in five of each set aside (blake2b of the group
with the fixed seed 23, chosen before any result was seen). Nothing is fitted or tuned on it; it is
scored once at the end.
"""

from __future__ import annotations

import hashlib
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


SEED = 23


def holdout(group: str) -> bool:
    """True for the groups kept aside until the end (a fixed fifth of each set, by seeded hash)."""
    h = hashlib.blake2b(f"{SEED}:{group}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") % 5 == 0


def strict_label(label: int | str) -> int | None:
    """The strict mapping: supported only when fully supported; partial counts as not supported."""
    if label == 1:
        return 1
    if label in (0, "partial"):
        return 0
    return None


def wice(per_chunk: int = 1) -> list[Example]:
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


def expertqa(own_evidence: bool = True) -> list[Example]:
    """ExpertQA claims. ``own_evidence``: each claim against the passages it cites itself (a claim
    with no citation gets no chunks, so it cannot be supported: how an outside scorer feeds it);
    otherwise against every passage cited anywhere in the same answer (harder: a Missing claim
    may still find text that covers it)."""
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
            own = [{"content": ev["text"], "source_url": ev["url"], "id": f"e{i}"}
                   for i, ev in enumerate(r["evidence"]) if ev["text"].strip()]
            out.append(Example("expertqa", f"{question}|{system}", r["claim"], own if own_evidence else chunks,
                               label, not empty))
    return out
