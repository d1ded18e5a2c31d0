"""Token and cost budgets per task: warn at the soft limit, block at the hard limit.

A task's budget is declared when it starts (``plan(mode="start", budget={...})``)::

    {"tokens": 200000,          # hard limit on tokens spent (block at or above)
     "soft_tokens": 160000,     # warn at or above (default: 80% of tokens)
     "cost_usd": 2.0,           # hard limit on cost
     "soft_cost_usd": 1.5,      # default: 80% of cost_usd
     "usd_per_mtok": 3.0}       # price used to turn tokens into cost when the ledger has no cost

Spent tokens are what the task put into the agent's context, from the observe ledger
(``core/task/ledger.py``): outputs passed through, offload stubs, recalled slices and bosun's own
answers. Cost is spent tokens times ``usd_per_mtok`` (the budget's, else the ledger's price
table for the configured model). The verdict
names the numbers so the agent (and its operator) can see how far over it is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bosun.core.errors import InvalidInput

SOFT_RATIO = 0.8
BUDGET_KEYS = ("tokens", "soft_tokens", "cost_usd", "soft_cost_usd", "usd_per_mtok")


@dataclass(frozen=True)
class Budget:
    """Validated limits (None = no limit)."""

    tokens: int | None = None
    soft_tokens: int | None = None
    cost_usd: float | None = None
    soft_cost_usd: float | None = None
    usd_per_mtok: float | None = None

    @property
    def empty(self) -> bool:
        return self.tokens is None and self.soft_tokens is None and self.cost_usd is None and self.soft_cost_usd is None

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in BUDGET_KEYS if getattr(self, k) is not None}


@dataclass(frozen=True)
class BudgetVerdict:
    """The outcome of a budget check."""

    verdict: str  # allow | warn | block
    reason: str = ""
    spent_tokens: int = 0
    spent_cost_usd: float | None = None
    limit: str = ""  # which limit fired: tokens | soft_tokens | cost_usd | soft_cost_usd

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": "budget", "id": self.limit, "verdict": self.verdict, "reason": self.reason,
                               "spent_tokens": self.spent_tokens}
        if self.spent_cost_usd is not None:
            out["spent_cost_usd"] = round(self.spent_cost_usd, 6)
        if self.verdict == "block":
            out["required_action"] = ("stop and report: the task is over its budget; checkpoint and ask for a larger "
                                      "budget, or offload/drop large results instead of keeping them in context")
        return out


def _number(field: str, value: Any, integer: bool) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise InvalidInput(f"budget.{field}", f"must be a non-negative number, got {value!r}")
    if integer:
        return int(value)
    return float(value)


def parse_budget(raw: Mapping[str, Any] | None) -> Budget:
    """Validate a budget mapping; unknown keys and bad numbers are InvalidInput naming the field."""
    if not raw:
        return Budget()
    if not isinstance(raw, Mapping):
        raise InvalidInput("budget", f"must be an object, got {type(raw).__name__}", ", ".join(BUDGET_KEYS))
    unknown = sorted(set(raw) - set(BUDGET_KEYS))
    if unknown:
        raise InvalidInput(f"budget.{unknown[0]}", "unknown budget key", ", ".join(BUDGET_KEYS))
    tokens = _number("tokens", raw.get("tokens"), True)
    soft = _number("soft_tokens", raw.get("soft_tokens"), True)
    cost = _number("cost_usd", raw.get("cost_usd"), False)
    soft_cost = _number("soft_cost_usd", raw.get("soft_cost_usd"), False)
    price = _number("usd_per_mtok", raw.get("usd_per_mtok"), False)
    if tokens is not None and soft is None:
        soft = int(tokens * SOFT_RATIO)
    if cost is not None and soft_cost is None:
        soft_cost = cost * SOFT_RATIO
    if tokens is not None and soft is not None and soft > tokens:
        raise InvalidInput("budget.soft_tokens", f"{int(soft)} is above the hard limit tokens={int(tokens)}")
    if cost is not None and soft_cost is not None and soft_cost > cost:
        raise InvalidInput("budget.soft_cost_usd", f"{soft_cost} is above the hard limit cost_usd={cost}")
    return Budget(
        tokens=int(tokens) if tokens is not None else None, soft_tokens=int(soft) if soft is not None else None,
        cost_usd=cost, soft_cost_usd=soft_cost, usd_per_mtok=price,
    )


def check_budget(budget: Budget, spent_tokens: int, spent_cost_usd: float | None = None) -> BudgetVerdict:
    """allow / warn (soft limit reached) / block (hard limit reached), naming the numbers."""
    cost = spent_cost_usd
    if cost is None and budget.usd_per_mtok is not None:
        cost = spent_tokens * budget.usd_per_mtok / 1_000_000
    if budget.tokens is not None and spent_tokens >= budget.tokens:
        return BudgetVerdict("block", f"token budget exhausted: {spent_tokens:,} spent of a hard limit of "
                             f"{budget.tokens:,}", spent_tokens, cost, "tokens")
    if budget.cost_usd is not None and cost is not None and cost >= budget.cost_usd:
        return BudgetVerdict("block", f"cost budget exhausted: ${cost:.4f} spent of a hard limit of "
                             f"${budget.cost_usd:.4f}", spent_tokens, cost, "cost_usd")
    if budget.soft_tokens is not None and spent_tokens >= budget.soft_tokens:
        hard = f" (hard limit {budget.tokens:,})" if budget.tokens is not None else ""
        return BudgetVerdict("warn", f"token budget nearly spent: {spent_tokens:,} of a soft limit of "
                             f"{budget.soft_tokens:,}{hard}", spent_tokens, cost, "soft_tokens")
    if budget.soft_cost_usd is not None and cost is not None and cost >= budget.soft_cost_usd:
        hard = f" (hard limit ${budget.cost_usd:.4f})" if budget.cost_usd is not None else ""
        return BudgetVerdict("warn", f"cost budget nearly spent: ${cost:.4f} of a soft limit of "
                             f"${budget.soft_cost_usd:.4f}{hard}", spent_tokens, cost, "soft_cost_usd")
    return BudgetVerdict("allow", "", spent_tokens, cost, "")


def context_tokens(passed_through: int, stub: int, recalled: int, overhead: int) -> int:
    """Tokens a task put into its agent's context: outputs passed through, stubs, recalls, bosun's answers."""
    return passed_through + stub + recalled + overhead


def remaining(budget: Budget, spent_tokens: int) -> int | None:
    """Tokens left under the hard limit (None when there is no token limit)."""
    if budget.tokens is None:
        return None
    return max(0, budget.tokens - spent_tokens)
