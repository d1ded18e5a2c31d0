"""LedgerService: the token ledger as the status views show it, per task and over the store.

``plan(mode="status")``, the status resource and ``checkpoint(mode="report")`` read a task's
ledger here; the price table (``BOSUN_PRICES``) is parsed once, so cost figures and
precheck's budget in dollars use the same prices.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bosun.core.task.ledger import Ledger, ledger_of, parse_prices
from bosun.core.task.state import Event
from bosun.server.services.tasks import TaskService


class LedgerService:
    """Tokens observed / offloaded / recalled, credited savings, overhead and cost."""

    def __init__(self, tasks: TaskService, prices: str, price_model: str) -> None:
        self.tasks = tasks
        self.prices = parse_prices(prices)
        self.price_model = price_model or "default"

    def usd_per_mtok(self) -> float | None:
        """USD per million input tokens of the configured model, if a price table is configured."""
        if not self.prices:
            return None
        price = self.prices.get(self.price_model, self.prices.get("default"))
        return float(price) if isinstance(price, int | float) else None

    def report(self, events: Sequence[Event]) -> dict[str, Any]:
        """The ledger of a journal, priced."""
        return ledger_of(events).to_dict(self.prices, self.price_model)

    async def task_ledger(self, task_id: str) -> Ledger:
        return ledger_of(await self.tasks.events(task_id))

    async def summary(self, task_id: str) -> dict[str, Any]:
        """One task's ledger, priced."""
        return (await self.task_ledger(task_id)).to_dict(self.prices, self.price_model)

    async def overall(self, limit: int = 10_000) -> dict[str, Any]:
        """The same figures summed over the most recent ``limit`` tasks of this store."""
        total = Ledger()
        rows = await self.tasks.list_tasks(limit=limit)
        for row in rows:
            total.merge(await self.task_ledger(row["task_id"]))
        out = total.to_dict(self.prices, self.price_model)
        out["tasks"] = len(rows)
        return out
