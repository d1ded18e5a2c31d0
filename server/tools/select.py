"""``select_context``: the candidates that fit a token budget, useful and not redundant."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from pydantic import Field

from bosun.core.selection.select import DEFAULT_STRATEGY, Params
from bosun.server.engine import Engine
from bosun.server.surface import READ_ONLY, tool

StrategyName = Literal["hybrid", "psi0", "mmr", "baseline"]
ItemsArg = list[str | dict[str, Any]]


@tool(READ_ONLY)
async def select_context(
    goal: Annotated[str, Field(description="what the context is for")],
    candidates: Annotated[ItemsArg, Field(description="strings or {id, text|ref|policy, source, metadata}")],
    ctx: Context[Engine],
    context: Annotated[ItemsArg | None, Field(description="items already in the prompt (same forms)")] = None,
    budget_tokens: Annotated[int, Field(ge=0, description="token budget for the selected items")] = 2000,
    strategy: StrategyName = DEFAULT_STRATEGY,
    mmr_lambda: Annotated[float, Field(ge=0.0, le=1.0)] = 0.7,
    max_items: Annotated[int | None, Field(ge=1)] = None,
    min_relevance: Annotated[float, Field(ge=-1.0, le=1.0)] = 0.0,
    show_rejected: Annotated[int, Field(ge=0)] = 5,
    include_text: bool = False,
) -> dict[str, Any]:
    """Pick the candidates that fit budget_tokens, relevant to the goal and not redundant with the context or
    each other; returns them in order with relevance, novelty and why, and the strongest rejections."""
    params = Params(mmr_lambda=mmr_lambda, max_items=max_items, min_relevance=min_relevance)
    return await ctx.request_context.lifespan_context.select.select(
        goal, candidates, context, budget_tokens, strategy, params, show_rejected, include_text)


TOOLS = [select_context]
