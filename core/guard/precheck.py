"""The precheck decision: invariants, then budget, then loop guard, then duplicates.

Pure: the server fetches the task state, keeps the loop guard caught up with the
journal and the invariants file fresh, then calls ``evaluate``; the evaluation bench
calls the same function, so what is measured is what the tool does.
"""

from __future__ import annotations

import re
from typing import Any

from bosun.core.errors import InvalidInput
from bosun.core.guard.invariants import Hit, RuleSet
from bosun.core.guard.loopguard import Finding, LoopGuard
from bosun.core.task.budget import BUDGET_KEYS, BudgetVerdict, check_budget, parse_budget
from bosun.core.task.seal import verdict as seal_verdict
from bosun.core.task.state import TaskState

VERDICTS = ("allow", "warn", "block", "suggest_alternative")
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:/@+-]{0,127}$")


def check_tool_name(tool: Any) -> str:
    if not isinstance(tool, str) or not _TOOL_NAME.match(tool):
        raise InvalidInput("tool", f"not a tool name: {tool!r}",
                           "the name of the tool you are about to call, e.g. 'bash', 'git.commit', 'mcp__github__create_pr'"
                           " (letters, digits, _ . : / @ + -, at most 128)")
    return tool



def evaluate(tool: str, args: Any, state: TaskState, rules: RuleSet, guard: LoopGuard, seal: str | None = None,
             invariants_error: str | None = None, guard_args: Any = None, spent_tokens: int | None = None,
             usd_per_mtok: float | None = None, context_tokens: int | None = None,
             prune_threshold: int | None = None) -> dict[str, Any]:
    """The verdict for calling ``tool(args)`` now in ``state`` (``guard`` already caught up).

    ``guard_args`` are the args as observe journals them (secrets redacted), so the loop
    guard's call identity matches the journal's ``args_hash``; invariants see ``args``.
    ``spent_tokens`` come from the observe ledger (default: the state's consumed tokens);
    ``usd_per_mtok`` prices them when the budget names no price. ``context_tokens`` (the known
    context: measured + declared, see core/task/pressure.py) over ``prune_threshold``
    (BOSUN_PRUNE_THRESHOLD_TOKENS) is a warning to trim before the call adds more.
    """
    hits = rules.evaluate(tool, args, state.flags, state.completed)
    budget = parse_budget({k: v for k, v in state.budget.items() if k in BUDGET_KEYS})
    money = None
    if not budget.empty:
        spent = state.consumed_tokens if spent_tokens is None else spent_tokens
        price = budget.usd_per_mtok if budget.usd_per_mtok is not None else usd_per_mtok
        cost = spent * price / 1_000_000 if price is not None else None
        money = check_budget(budget, spent, cost)
    key_args = args if guard_args is None else guard_args
    findings = guard.check(tool, key_args, remember=True)
    pressure = None
    if context_tokens is not None and prune_threshold is not None and context_tokens > prune_threshold:
        over = context_tokens - prune_threshold
        pressure = {"source": "pressure", "id": "prune_threshold", "verdict": "warn",
                    "reason": f"the context holds ~{context_tokens:,} known tokens, over the prune threshold of "
                              f"{prune_threshold:,}",
                    "required_action": f"trim first: checkpoint(mode='trim', target_tokens={over}), then drop the "
                                       "listed refs (nothing is deleted; recall brings any back)"}
    return decide(hits, money, findings, state, seal, invariants_error, pressure)


def decide(hits: list[Hit], money: BudgetVerdict | None, findings: list[Finding], state: TaskState, seal: str | None,
           invariants_error: str | None = None, pressure: dict[str, Any] | None = None) -> dict[str, Any]:
    """Combine the checks in their order: the first block wins; else a duplicate's suggestion; else warnings."""
    ordered: list[dict[str, Any]] = [h.to_dict() for h in hits]
    if money is not None and money.verdict != "allow":
        ordered.append(money.to_dict())
    if pressure is not None:
        ordered.append(pressure)
    for f in findings:
        item = f.to_dict()
        item["source"] = "loop" if f.pattern != "duplicate" else "duplicate"
        item["id"] = f.pattern
        ordered.append(item)
    # the order of sources is the order of the checks; duplicates come last
    rank = {"invariant": 0, "budget": 1, "pressure": 2, "loop": 3, "duplicate": 4}
    ordered.sort(key=lambda d: rank[d["source"]])
    decisive = (next((d for d in ordered if d["verdict"] == "block"), None)
                or next((d for d in ordered if d["verdict"] == "suggest_alternative"), None)
                or next((d for d in ordered if d["verdict"] == "warn"), None))
    out: dict[str, Any] = {"verdict": decisive["verdict"] if decisive else "allow"}
    if decisive:
        out["rule"] = f"{decisive['source']}:{decisive['id']}"
        out["reasons"] = [d["reason"] for d in ordered]
        if decisive.get("required_action"):
            out["required_action"] = decisive["required_action"]
        for key in ("ref", "saved_tokens"):
            if decisive.get(key):
                out[key] = decisive[key]
        if len(ordered) > 1:
            out["fired"] = [f"{d['source']}:{d['id']}:{d['verdict']}" for d in ordered]
    if invariants_error:
        out["invariants_error"] = invariants_error
    drift = seal_verdict(state, seal)
    out["drift"] = drift if seal is not None else {"seal": drift["seal"], "version": drift["version"]}
    return out


