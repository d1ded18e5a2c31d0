"""``handoff``: executable delegation contracts between agents (create, accept, complete, status).

The parent creates a contract (objective, input refs, inherited constraints, acceptance
checks, budget); a child accepts it once and completes it with a structured result,
which is checked against the contract and folded back into the parent's journal and seal.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from pydantic import Field

from bosun.server.engine import Engine
from bosun.server.surface import WRITES, tool

HandoffMode = Literal["create", "accept", "complete", "status"]


@tool(WRITES)
async def handoff(
    task_id: str,
    mode: HandoffMode,
    ctx: Context[Engine],
    handoff_id: str | None = None,
    objective: str | None = None,
    inputs: list[str] | None = None,
    constraints: list[str] | None = None,
    checks: Annotated[list[dict[str, Any]] | None, Field(description="[{field, op, value}]")] = None,
    budget: dict[str, Any] | None = None,
    to_agent: str | None = None,
    agent: str | None = None,
    result: dict[str, Any] | None = None,
    seal: str | None = None,
) -> dict[str, Any]:
    """Delegate part of a task to another agent under a contract whose checks decide "done".

    ``task_id`` is always the parent task. ``create`` (parent): ``objective``, ``inputs`` (refs
    the child needs), ``constraints`` (added to the parent's, which are inherited), ``checks``,
    ``budget`` (``{tokens, cost_usd}``), ``to_agent`` (only this agent may accept); returns the
    ``handoff_id``. ``accept`` (child, once): ``handoff_id``, ``agent``; returns the contract.
    ``complete`` (child): ``handoff_id``, ``agent``, ``result`` (a JSON object); the checks run
    against it and the outcome is folded into the parent's journal and seal. ``status``:
    ``handoff_id``. ``seal`` is your last SEAL (drift is reported against it).

    A check is ``{field, op, value}``, ``field`` a dotted path into the result; ops:
    ``present`` (exists, not null), ``equals``/``not_equals``, ``min``/``max`` (a number
    against ``value``), ``matches`` (a regex), ``nonempty``, ``contains``, ``is_ref`` (a
    ``mem://sha256:`` ref, full or short, or a list of them). A budget ``{tokens: N}`` adds the
    check ``result.tokens_used <= N`` when the child reports it. Example:
    ``handoff(task_id, "create", objective="summarise the failing tests", inputs=[ref],
    checks=[{"field": "summary", "op": "nonempty"}, {"field": "evidence", "op": "is_ref"}])``.
    """
    return await ctx.request_context.lifespan_context.handoff.run(
        task_id, mode, handoff_id, objective, inputs, constraints, checks, budget, to_agent, agent, result, seal)


TOOLS = [handoff]
