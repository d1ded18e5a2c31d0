"""``select_context``: the candidates that fit a token budget, useful and not redundant.

The listing is paid for on every agent turn, so the rarely used knobs travel in ``options``
(validated by the service, errors name ``options.<key>``); docs/select_context.md documents them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from pydantic import Field

from bosun.core.selection.select import DEFAULT_STRATEGY
from bosun.server.engine import Engine
from bosun.server.services.select import options_params
from bosun.server.surface import READ_ONLY, tool

StrategyName = Literal["hybrid", "psi0", "mmr", "baseline"]


@tool(READ_ONLY)
async def select_context(
    goal: str,
    candidates: Annotated[list[Any], Field(description="strings or {id,text|ref|policy}")],
    ctx: Context[Engine],
    context: list[Any] | None = None,
    budget_tokens: Annotated[int, Field(ge=0)] = 2000,
    strategy: StrategyName = DEFAULT_STRATEGY,
    iterative: bool = True,
    options: Annotated[dict[str, Any] | None, Field(description="max_items, show_rejected, ...")] = None,
) -> dict[str, Any]:
    """The candidates worth adding within budget_tokens: relevant to goal, new to context (already in the prompt)."""
    params, show_rejected, include_text = options_params(options, iterative)
    return await ctx.request_context.lifespan_context.select.select(
        goal, candidates, context, budget_tokens, strategy, params, show_rejected, include_text,
        progress=ctx.report_progress)


TOOLS = [select_context]
