"""Routing quality metrics over labelled prompts (oiax's JSONL: prompt, expected, optional sibling)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bosun.core.errors import InvalidInput


@dataclass(frozen=True)
class Labelled:
    prompt: str
    expected: tuple[str, ...]
    sibling: tuple[str, ...] = ()


def parse_labelled(lines: Iterable[str], known: set[str] | None = None) -> list[Labelled]:
    """Parse JSONL; a bad line is an error naming its line number."""
    out: list[Labelled] = []
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise InvalidInput(f"line {no}", f"not JSON: {exc}", '{"prompt": "...", "expected": ["name"]}') from exc
        if not isinstance(row, dict) or not isinstance(row.get("prompt"), str):
            raise InvalidInput(f"line {no}", "needs a string 'prompt'", '{"prompt": "...", "expected": []}')
        exp = row.get("expected", [])
        if exp is None:
            exp = []
        elif isinstance(exp, str):  # a single name written bare
            exp = [exp]
        if not isinstance(exp, list) or not all(isinstance(x, str) for x in exp):
            raise InvalidInput(f"line {no}.expected", "must be a list of policy names ([] for a negative)")
        sib = row.get("sibling", [])
        sibs = (sib,) if isinstance(sib, str) else tuple(str(s) for s in sib or [])
        if known is not None:
            unknown = [n for n in (*exp, *sibs) if n not in known]
            if unknown:
                raise InvalidInput(f"line {no}", f"names not in the corpus: {', '.join(unknown)}")
        out.append(Labelled(row["prompt"], tuple(exp), sibs))
    if not out:
        raise InvalidInput("labelled", "no prompts on stdin", "JSONL lines")
    return out


def compute(rows: Sequence[Labelled], routed: Sequence[Sequence[str]]) -> dict[str, float]:
    """recall@2 (of expected names, over positive prompts), precision, F1, top-1, false alarms, siblings."""
    pos = [(r, h) for r, h in zip(rows, routed, strict=True) if r.expected]
    neg = [(r, h) for r, h in zip(rows, routed, strict=True) if not r.expected]
    found = sum(len(set(r.expected) & set(h[:2])) for r, h in pos)
    wanted = sum(len(set(r.expected)) for r, _ in pos)
    returned = sum(len(h[:2]) for _, h in pos) + sum(len(h[:2]) for _, h in neg)
    correct = found
    recall = found / wanted if wanted else 0.0
    precision = correct / returned if returned else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    top1 = sum(1 for r, h in pos if h and h[0] in r.expected) / len(pos) if pos else 0.0
    any_hit = sum(1 for r, h in pos if set(r.expected) & set(h[:2])) / len(pos) if pos else 0.0
    false_alarms = sum(1 for _, h in neg if h)
    sib_rows = [(r, h) for r, h in zip(rows, routed, strict=True) if r.sibling]
    sib_hits = sum(1 for r, h in sib_rows if set(r.sibling) & set(h[:2]))
    abstained_pos = sum(1 for _, h in pos if not h)
    return {
        "prompts": float(len(rows)),
        "positives": float(len(pos)),
        "negatives": float(len(neg)),
        "recall_at_2": recall,
        "hit_at_2": any_hit,
        "precision": precision,
        "f1": f1,
        "top1": top1,
        "false_alarms": float(false_alarms),
        "false_alarm_rate": false_alarms / len(neg) if neg else 0.0,
        "sibling_prompts": float(len(sib_rows)),
        "harmful_sibling_rate": sib_hits / len(sib_rows) if sib_rows else 0.0,
        "abstained_positives": float(abstained_pos),
    }
