"""Build the MCP server: one Engine, ref-counted across transports.

The SDK enters the lifespan once per transport runner (stdio and the HTTP session manager),
so the Engine is opened by the first entry and closed by the last exit: one model load and
one store per process. Tools, resources and prompts read the Engine from the lifespan
context (``Context[Engine]``); the tool list is built once through ``server/surface.py``.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp import MCPError
from mcp.server import MCPServer
from mcp.server.context import CallNext, ServerRequestContext
from mcp.types import INVALID_PARAMS
from starlette.requests import Request
from starlette.responses import JSONResponse

import bosun
from bosun.server.engine import Engine
from bosun.server.surface import argument_guard, build_tools
from bosun.server.tools import TOOL_MODULES

log = logging.getLogger("bosun.server")

INSTRUCTIONS = (
    "bosun governs this agent's context. route(prompt) names the policies that bear on a prompt; read one "
    "whole with get_policy. plan(mode=start) gives a sealed manifest: carry it and pass its SEAL back. "
    "precheck an action before running it. observe big tool outputs: you get a stub, and recall fetches "
    "only the part you need. select_context packs candidate snippets into a token budget without "
    "redundancy; audit checks an answer's claims against its sources."
)


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
                self.engine.precheck.log_invariants()
            self.refs += 1
        try:
            yield self.engine
        finally:
            async with self.lock:
                self.refs -= 1
                if self.refs == 0:
                    await self.engine.close()


def create_server(engine: Engine | None = None) -> MCPServer[Engine]:
    """The bosun MCP server over ``engine`` (a default Engine when omitted)."""
    engine = engine or Engine()
    holder = _EngineHolder(engine)
    tools = build_tools([fn for module in TOOL_MODULES for fn in module.TOOLS], engine.config.tools)
    mcp: MCPServer[Engine] = MCPServer(
        "bosun",
        version=bosun.__version__,
        instructions=INSTRUCTIONS,
        lifespan=holder.lifespan,
        log_level="WARNING",
        tools=tools,
    )
    mcp.middleware.append(argument_guard(tools))
    for module in TOOL_MODULES:
        register = getattr(module, "register", None)
        if register is not None:
            register(mcp, engine)

    mcp.middleware.append(_reject_unknown_prompts(mcp))

    @mcp.custom_route("/healthz", methods=["GET"])
    async def healthz(request: Request) -> JSONResponse:
        token = engine.config.token
        detail = not token or hmac.compare_digest(request.headers.get("authorization", "").encode(),
                                                  f"Bearer {token}".encode())
        body = engine.health(detail=detail)  # without the token: liveness only
        return JSONResponse(body, status_code=200 if engine.model_ready() else 503)

    return mcp


def _reject_unknown_prompts(mcp: MCPServer[Engine]) -> Any:
    """An unknown prompt is a -32602 naming the known ones (the SDK answers it with code 0)."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        if ctx.method == "prompts/get":
            name = (ctx.params or {}).get("name") if isinstance(ctx.params, dict) else None
            known = sorted(p.name for p in await mcp.list_prompts())
            if name not in known:
                raise MCPError(INVALID_PARAMS, f"Unknown prompt: {name!r}; known prompts: {', '.join(known)}")
        return await call_next(ctx)

    return middleware
