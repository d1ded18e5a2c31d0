"""The ledger as the status views show it: per task, and over every task of this store.

``ledger_summary(engine, task_id)`` is what ``plan(mode="status")`` and the
status resource include (contract: /work/briefs/tasks-contract.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bosun.core.task.ledger import Ledger, ledger_of
from bosun.server.services.offload import offload_of
from bosun.server.services.tasks import tasks_of

if TYPE_CHECKING:
    from bosun.server.engine import Engine


async def task_ledger(engine: Engine, task_id: str) -> Ledger:
    return ledger_of(await tasks_of(engine).events(task_id))


async def ledger_summary(engine: Engine, task_id: str) -> dict[str, Any]:
    """Tokens observed / offloaded / recalled, credited savings, bosun's overhead and cost for one task."""
    svc = offload_of(engine)
    led = await task_ledger(engine, task_id)
    return led.to_dict(svc.prices, svc.price_model)


async def overall_ledger(engine: Engine, limit: int = 10_000) -> dict[str, Any]:
    """The same figures summed over the most recent ``limit`` tasks of this store."""
    svc = offload_of(engine)
    tasks = tasks_of(engine)
    total = Ledger()
    rows = await tasks.list_tasks(limit=limit)
    for row in rows:
        total.merge(await task_ledger(engine, row["task_id"]))
    out = total.to_dict(svc.prices, svc.price_model)
    out["tasks"] = len(rows)
    return out
