"""Build the MCP server: one Engine, ref-counted across transports.

The SDK enters the lifespan once per transport runner (stdio and the HTTP session manager),
so the Engine is opened by the first entry and closed by the last exit: one model load and
one store per process. Tools, resources and prompts read the Engine from the lifespan
context (``Context[Engine]``); the tool list is built once through ``server/surface.py``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import difflib
import hmac
import importlib
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp import MCPError
from mcp.server import MCPServer
from mcp.server.context import CallNext, ServerRequestContext
from mcp.server.mcpserver.tools import Tool
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp.shared.inbound import X_MCP_HEADER_KEY
from mcp.types import INVALID_PARAMS
from starlette.requests import Request
from starlette.responses import JSONResponse

import bosun
from bosun.server.engine import Engine
from bosun.server.protocol import completion, docs, logs, subscriptions
from bosun.server.protocol.dispatch import dispatch_tool, session_dispatch
from bosun.server.surface import argument_guard, build_tools
from bosun.server.tools import TOOL_MODULES

log = logging.getLogger("bosun.server")

# modules beyond the tools that add to the server: each defines ``register(mcp, engine)`` (resources,
# middleware, HTTP routes); imported when the server is built. Add a module by adding its name here.
EXTENSIONS: list[str] = ["bosun.server.idempotency", "bosun.server.dashboard"]

INSTRUCTIONS = (
    "bosun governs this agent's context. route(prompt) names the policies that bear on a prompt; read one "
    "whole with get_policy. plan(mode=start) gives a sealed manifest: carry it and pass its SEAL back. "
    "precheck an action before running it. observe big tool outputs: you get a stub, and recall fetches "
    "only the part you need. select_context packs candidate snippets into a token budget without "
    "redundancy; audit checks an answer's claims against its sources."
)


DISPATCH = "dispatch"  # BOSUN_TOOLS=dispatch: one tool, bosun(tool, args), over the others


class _EngineHolder:
    """Ref-counts lifespan entries so every transport shares one open Engine (and one log forwarder,
    one set of change listeners)."""

    def __init__(self, engine: Engine, forwarder: logs.LogForwarder, subs: subscriptions.Subscriptions) -> None:
        self.engine = engine
        self.forwarder = forwarder
        self.subscriptions = subs
        self.refs = 0
        self.lock = asyncio.Lock()

    @asynccontextmanager
    async def lifespan(self, _: MCPServer[Engine]) -> AsyncIterator[Engine]:
        async with self.lock:
            if self.refs == 0:
                await self.engine.open()
                self.engine.precheck.log_invariants()
                self.forwarder.install()
                self.subscriptions.start(self.engine)
            self.refs += 1
        try:
            yield self.engine
        finally:
            async with self.lock:
                self.refs -= 1
                if self.refs == 0:
                    self.subscriptions.stop()
                    self.forwarder.uninstall()
                    await self.engine.close()


def listed_tools(wanted: list[str]) -> list[Tool]:
    """The tools ``BOSUN_TOOLS`` asks for: all (empty), some by name, or ``dispatch`` (over all, or over the
    other names given with it)."""
    functions = [fn for module in TOOL_MODULES for fn in module.TOOLS]
    if DISPATCH not in wanted:
        return build_tools(functions, wanted)
    over = [w for w in wanted if w != DISPATCH]
    chosen = [fn for fn in functions if not over or fn.__name__ in over]
    return [dispatch_tool(build_tools(functions, over), chosen)]


def create_server(engine: Engine | None = None) -> MCPServer[Engine]:
    """The bosun MCP server over ``engine`` (a default Engine when omitted)."""
    engine = engine or Engine()
    bus = InMemorySubscriptionBus()  # 2026 listen streams; the same changes reach 2025 subscribers
    forwarder = logs.LogForwarder(engine.redactor.scrub)
    subs = subscriptions.Subscriptions(bus)
    holder = _EngineHolder(engine, forwarder, subs)
    tools = listed_tools(engine.config.tools)
    served = [t.name for t in tools]
    # the dispatch tool, hidden, for the bridge's hosts that ask for it (the daemon serves them all)
    hidden = [] if DISPATCH in engine.config.tools else listed_tools([DISPATCH])
    mcp: MCPServer[Engine] = MCPServer(
        "bosun",
        version=bosun.__version__,
        instructions=INSTRUCTIONS,
        lifespan=holder.lifespan,
        log_level="WARNING",
        tools=[*tools, *hidden],
        subscriptions=bus,
    )
    logs.register(mcp, forwarder)  # outermost: a request's log lines are flushed before it answers
    mcp.middleware.append(_announce_resource_list_changes)
    subscriptions.register(mcp, subs)
    completion.register(mcp, engine)
    docs.register(mcp, [fn for module in TOOL_MODULES for fn in module.TOOLS])
    mcp.middleware.append(session_dispatch(listed_tools, served))
    mcp.middleware.append(argument_guard([*tools, *hidden]))
    for module in TOOL_MODULES:
        register = getattr(module, "register", None)
        if register is not None:
            register(mcp, engine)

    for dotted in EXTENSIONS:
        importlib.import_module(dotted).register(mcp, engine)

    mcp.middleware.append(_reject_unknown_prompts(mcp))
    mcp.middleware.append(_ref_uri_forms)
    skip_unannotated_header_checks(mcp)

    @mcp.custom_route("/healthz", methods=["GET"])
    async def healthz(request: Request) -> JSONResponse:
        token = engine.config.token
        detail = not token or hmac.compare_digest(request.headers.get("authorization", "").encode(),
                                                  f"Bearer {token}".encode())
        body = engine.health(detail=detail)  # without the token: liveness only
        return JSONResponse(body, status_code=200 if engine.model_ready() else 503)

    return mcp


def skip_unannotated_header_checks(mcp: MCPServer[Any]) -> None:
    """Let the SDK skip its ``Mcp-Param-*`` header check for tools that declare no header.

    Over 2026 HTTP the SDK compares a ``tools/call``'s ``Mcp-Param-*`` headers with its arguments by
    walking the called tool's whole input schema, twice, on every call: ~4 % of the daemon's CPU per
    small recall here, and nothing a no-op tool pays. A schema with no ``x-mcp-header`` annotation can
    only pass that check (``mcp.shared.inbound.validate_mcp_param_headers`` returns None), which is
    also what the SDK does for a tool without a schema. So the schema lookup the check uses answers
    None for such tools, decided once per schema; a schema that mentions ``x-mcp-header`` anywhere
    goes to the SDK as before. Nothing else reads this lookup."""
    lowlevel = getattr(mcp, "_lowlevel_server", None)
    lookup = getattr(lowlevel, "get_tool_input_schema", None)
    if lowlevel is None or lookup is None:
        return  # another SDK layout: its own check runs unchanged
    declares: dict[int, tuple[Any, bool]] = {}  # id(schema) -> (schema, declares a header)

    def annotated_only(name: str) -> Any:
        schema = lookup(name)
        if schema is None:
            return None
        known = declares.get(id(schema))
        if known is None or known[0] is not schema:
            known = declares[id(schema)] = (schema, X_MCP_HEADER_KEY in json.dumps(schema, default=str))
        return schema if known[1] else None

    lowlevel.get_tool_input_schema = annotated_only


def _reject_unknown_prompts(mcp: MCPServer[Engine]) -> Any:
    """Prompt calls checked before the SDK: an unknown prompt (the SDK answers code 0) or a missing or
    unknown argument (the SDK answers -32603 and logs a traceback) is a -32602 naming the field."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        if ctx.method == "prompts/get":
            params = ctx.params if isinstance(ctx.params, dict) else {}
            name = params.get("name")
            prompts = {p.name: p for p in await mcp.list_prompts()}
            prompt = prompts.get(name) if isinstance(name, str) else None
            if prompt is None:
                raise MCPError(INVALID_PARAMS, f"Unknown prompt: {name!r}; known prompts: {', '.join(sorted(prompts))}")
            given = params.get("arguments") or {}
            if not isinstance(given, dict):
                raise MCPError(INVALID_PARAMS, "arguments: must be an object of named string arguments")
            declared = prompt.arguments or []
            known = [a.name for a in declared]
            unknown = [k for k in given if k not in known]
            if unknown:
                close = difflib.get_close_matches(str(unknown[0]), known, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise MCPError(INVALID_PARAMS, f"{unknown[0]}: unknown argument of prompt {name}; {hint}"
                                               f"known: {', '.join(known)}")
            missing = [a.name for a in declared if a.required and a.name not in given]
            if missing:
                raise MCPError(INVALID_PARAMS, f"{missing[0]}: required by prompt {name} and missing")
        return await call_next(ctx)

    return middleware


async def _announce_resource_list_changes(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
    """A 2025 session is told what bosun serves beyond the SDK's defaults: ``logging`` (setLevel),
    ``resources.subscribe`` and ``resources.listChanged`` (the policy corpus changes). Those methods are
    served as middleware (server/protocol/sessions.py), which the SDK's capability derivation cannot see,
    so the ``initialize`` answer is amended."""
    result = await call_next(ctx)
    if ctx.method == "initialize" and isinstance(result, dict):
        capabilities = result.setdefault("capabilities", {})
        capabilities.setdefault("logging", {})
        resources = capabilities.get("resources")
        if isinstance(resources, dict):
            resources["subscribe"] = True
            resources["listChanged"] = True
    return result


REF_URI = "bosun://ref/"


async def _ref_uri_forms(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
    """``bosun://ref/mem://sha256:<hex>`` (a ref pasted whole) reads like ``bosun://ref/<hex>``: one ref form."""
    if ctx.method == "resources/read" and isinstance(ctx.params, dict):
        uri = ctx.params.get("uri")
        if isinstance(uri, str) and uri.startswith(REF_URI + "mem://"):
            ctx = dataclasses.replace(ctx, params={**ctx.params, "uri": REF_URI + uri[len(REF_URI + "mem://"):]})
    return await call_next(ctx)
