"""``select_context``: the candidates that fit a token budget, useful and not redundant."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import ToolAnnotations
from pydantic import Field

from bosun.core.selection.select import DEFAULT_STRATEGY, Params
from bosun.server.errors import tool_errors
from bosun.server.services.select import run_selection, to_result

StrategyName = Literal["hybrid", "psi0", "mmr", "baseline"]
ItemsArg = list[str | dict[str, Any]]


def register(mcp: MCPServer[Any]) -> None:
    from bosun.server.app import engine_of
    from bosun.server.services.offload import slim_tool

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True), structured_output=True)
    @tool_errors
    async def select_context(
        goal: Annotated[str, Field(description="what the context is for")],
        candidates: Annotated[ItemsArg, Field(description="strings or {id, text|ref|policy, source, metadata}")],
        ctx: Context[Any],
        context: Annotated[ItemsArg | None, Field(description="items already in the prompt (same forms)")] = None,
        budget_tokens: Annotated[int, Field(description="token budget for the selected items")] = 2000,
        strategy: StrategyName = DEFAULT_STRATEGY,
        mmr_lambda: float = 0.7,
        max_items: int | None = None,
        min_relevance: float = 0.0,
        show_rejected: int = 5,
        include_text: bool = False,
    ) -> dict[str, Any]:
        """Pick the candidates that fit budget_tokens, relevant to the goal and not redundant with the context or
        each other; returns them in order with relevance, novelty and why, and the strongest rejections."""
        engine = engine_of(ctx)
        params = Params(mmr_lambda=mmr_lambda, max_items=max_items, min_relevance=min_relevance)
        out = await run_selection(engine, goal, candidates, context, budget_tokens, strategy, params,
                                  explain=max(0, show_rejected))
        return to_result(out, show_rejected=show_rejected, include_text=include_text)

    slim_tool(mcp, "select_context")  # no titles / anyOf-null: every agent pays for the listing
