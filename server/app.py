"""Build the MCP server: one Engine, ref-counted across transports.

The SDK enters the lifespan once per transport runner (stdio and the HTTP
session manager), so the Engine is opened by the first entry and closed by
the last exit: one model load and one store per process.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp import MCPError
from mcp.server import MCPServer
from mcp.server.context import CallNext, ServerRequestContext
from mcp.server.mcpserver import Context
from starlette.requests import Request
from starlette.responses import JSONResponse

import bosun
from bosun.server.engine import Engine
from bosun.server.tools import TOOL_MODULES

log = logging.getLogger("bosun.server")

INSTRUCTIONS = (
    "bosun governs this agent's context. route(prompt) names the policies that bear on a prompt; read one "
    "whole with get_policy. plan(mode=start) gives a sealed manifest: carry it and pass its SEAL back. "
    "precheck an action before running it. observe big tool outputs: you get a stub, and recall fetches "
    "only the part you need. select_context packs candidate snippets into a token budget without "
    "redundancy; audit checks an answer's claims against its sources."
)

INVALID_PARAMS = -32602


class _EngineHolder:
    """Ref-counts lifespan entries so every transport shares one open Engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.refs = 0
        self.lock = asyncio.Lock()

    @asynccontextmanager
    async def lifespan(self, _: MCPServer[Engine]) -> AsyncIterator[Engine]:
        async with self.lock:
            if self.refs == 0:
                await self.engine.open()
                for module in TOOL_MODULES:
                    on_open = getattr(module, "on_open", None)
                    if on_open is not None:
                        await on_open(self.engine)
            self.refs += 1
        try:
            yield self.engine
        finally:
            async with self.lock:
                self.refs -= 1
                if self.refs == 0:
                    await self.engine.close()


def engine_of(ctx: Context[Any]) -> Engine:
    """The Engine behind a tool, resource or prompt call."""
    engine = ctx.request_context.lifespan_context
    if not isinstance(engine, Engine):
        raise RuntimeError("bosun tools must run inside the bosun lifespan")
    return engine


def create_server(engine: Engine | None = None) -> MCPServer[Engine]:
    """The bosun MCP server over ``engine`` (a default Engine when omitted)."""
    engine = engine or Engine()
    holder = _EngineHolder(engine)
    mcp: MCPServer[Engine] = MCPServer(
        "bosun",
        version=bosun.__version__,
        instructions=INSTRUCTIONS,
        lifespan=holder.lifespan,
        log_level="WARNING",
    )
    mcp.middleware.append(_reject_unknown_tools(mcp))
    mcp.middleware.append(_compact_json_text)
    for module in TOOL_MODULES:
        module.register(mcp)
    if engine.config.tools:
        keep_only_tools(mcp, engine.config.tools)

    @mcp.custom_route("/healthz", methods=["GET"])
    async def healthz(_: Request) -> JSONResponse:
        body = engine.health()
        return JSONResponse(body, status_code=200 if engine.model_ready() else 503)

    mcp.bosun_engine = engine  # type: ignore[attr-defined]
    return mcp


def keep_only_tools(mcp: MCPServer[Any], wanted: list[str]) -> None:
    """Serve only the named tools (``BOSUN_TOOLS``): every listed tool costs context tokens."""
    known = {t.name for t in mcp._tool_manager.list_tools()}
    unknown = sorted(set(wanted) - known)
    if unknown:
        raise ValueError(f"BOSUN_TOOLS names unknown tools {unknown}; known: {', '.join(sorted(known))}")
    for name in sorted(known - set(wanted)):
        mcp.remove_tool(name)


async def _compact_json_text(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
    """Tool answers reach the model as compact JSON: the SDK indents it, which costs tokens every turn."""
    result = await call_next(ctx)
    if ctx.method != "tools/call" or not isinstance(result, dict):
        return result
    for block in result.get("content") or ():
        text = block.get("text") if isinstance(block, dict) else None
        if isinstance(text, str) and text[:1] in "{[" and "\n  " in text:
            try:
                block["text"] = json.dumps(json.loads(text), ensure_ascii=False, separators=(",", ":"))
            except ValueError:
                continue
    return result


def _reject_unknown_tools(mcp: MCPServer[Engine]) -> Any:
    """An unknown tool name is a protocol error (-32602), as the MCP spec asks."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        if ctx.method == "tools/call":
            name = (ctx.params or {}).get("name")
            if not isinstance(name, str) or mcp._tool_manager.get_tool(name) is None:
                known = ", ".join(sorted(t.name for t in mcp._tool_manager.list_tools()))
                raise MCPError(INVALID_PARAMS, f"Unknown tool: {name!r}; known tools: {known}")
        return await call_next(ctx)

    return middleware
