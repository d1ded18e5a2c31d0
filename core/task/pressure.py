"""Context pressure: how many tokens each zone of the agent's context holds, and how we know.

A server never sees the assembled prompt, so every count carries its source:
``measured`` (bosun saw the text and estimated it), ``declared`` (the agent told
us a number via plan(update, declare=...)), or ``unknown`` (the part exists but
nobody has measured or declared it). Pressure is only computed against a
declared context window, never guessed.

Zones (OSIRIS section 2/6): A = the immutable head (system head, rules) plus the
append-only tail (constraints, pinned decisions) and the manifest; B = the
quasi-stable objective, plan and tool contract; C = the working set (tool output
that entered the context, conversation history).
"""

from __future__ import annotations

from typing import Any

from bosun.core.task.state import TaskState
from bosun.core.tokens import estimate_tokens

# part -> zone; parts an agent may declare
PARTS: dict[str, str] = {
    "system_head": "A", "rules": "A", "pinned": "A", "manifest": "A",
    "objective_plan": "B", "tool_contract": "B",
    "tool_output": "C", "history": "C",
}
DECLARABLE = ("system_head", "rules", "tool_contract", "history", "tool_output", "window")


def _sum_tokens(texts: list[str]) -> int:
    return sum(estimate_tokens(t) for t in texts)


def pressure(state: TaskState, manifest_tokens: int) -> dict[str, Any]:
    """The context-pressure block of ``plan(mode="status")``."""
    measured: dict[str, int] = {
        "pinned": _sum_tokens(state.constraints + state.decisions),
        "manifest": manifest_tokens,
        "objective_plan": _sum_tokens([state.objective, *state.plan]),
    }
    for part, rec in (("system_head", state.head), ("rules", state.rules), ("tool_contract", state.contract)):
        if rec:
            measured[part] = int(rec.get("tokens") or 0)
    if state.event_counts.get("tool_result") or state.event_counts.get("dropped"):
        measured["tool_output"] = state.consumed_tokens
    zones: dict[str, dict[str, Any]] = {z: {"tokens": 0, "measured": {}, "declared": {}, "unknown": []}
                                        for z in ("A", "B", "C")}
    for part, zone in PARTS.items():
        z = zones[zone]
        if part in measured:
            z["measured"][part] = measured[part]
            z["tokens"] += measured[part]
        elif part in state.declared:
            z["declared"][part] = state.declared[part]
            z["tokens"] += state.declared[part]
        else:
            z["unknown"].append(part)
    total_measured = sum(sum(z["measured"].values()) for z in zones.values())
    total_declared = sum(sum(z["declared"].values()) for z in zones.values())
    window = state.declared.get("window")
    known = total_measured + total_declared
    out: dict[str, Any] = {
        "zones": zones,
        "total": {"measured": total_measured, "declared": total_declared, "known": known,
                  "unknown_parts": [p for z in zones.values() for p in z["unknown"]]},
        "window": window,
        "pressure": round(known / window, 4) if window else None,
        "offloaded_tokens": state.offloaded_tokens,
        "dropped_tokens": state.dropped_tokens,
    }
    if not window:
        out["note"] = "declare the context window (plan update declare={'window': N}) to get a pressure ratio"
    return out
