"""``route`` and ``get_policy``: which governance documents bear on this prompt, and the whole document.

Also serves ``bosun://policies`` (the listing) and ``bosun://policy/{name}``, and a plain JSON
endpoint ``POST /v1/route`` so the Claude Code hook and ``bosun route`` can ask the warm daemon
without an MCP session (stdlib HTTP, no handshake). Given ``tools`` (``[{name, description}]``),
both the tool and the endpoint answer with the Tool Compass instead (``services/compass.py``):
which of the caller's tools fit the prompt. Every route is recorded in telemetry (outcome, latency,
names; never the prompt).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from starlette.requests import Request
from starlette.responses import JSONResponse

from bosun.core.errors import BosunError, InvalidInput
from bosun.server import telemetry
from bosun.server.engine import Engine, ModelUnavailable
from bosun.server.services.policies import CorpusError, PolicyService
from bosun.server.surface import READ_ONLY, internal_error, lifespan_engine, protocol_errors, tool

log = logging.getLogger("bosun.route")
PROGRESS_EVERY_S = 1.0


async def routed(svc: PolicyService, prompt: Any, top_k: int | None, arrived: float, via: str) -> dict[str, Any]:
    """Route and record one telemetry event (outcome, latency, names; never the prompt)."""
    try:
        out = await svc.route(prompt, top_k)
    except BosunError as exc:
        cls = ("input" if isinstance(exc, InvalidInput) else "corpus_load" if isinstance(exc, CorpusError)
               else "model" if isinstance(exc, ModelUnavailable) else "route")
        telemetry.record_failure(cls, via=via, delivered_ms=(time.perf_counter() - arrived) * 1000)
        raise
    except Exception:
        telemetry.record_failure("route", via=via, delivered_ms=(time.perf_counter() - arrived) * 1000)
        raise
    telemetry.record_route(out, via=via, delivered_ms=(time.perf_counter() - arrived) * 1000)
    return out


@tool(READ_ONLY)
async def route(
    prompt: str,
    ctx: Context[Engine],
    top_k: int | None = None,
    tools: list[Any] | None = None,
) -> dict[str, Any]:
    """Policies bearing on a prompt (read via get_policy); tools=[{name,description}]: which fit."""
    engine = ctx.request_context.lifespan_context
    arrived = time.perf_counter()
    progress = Progress(ctx)
    if tools is not None:
        return await engine.compass.rank(prompt, tools, top_k, progress=progress)
    served = engine.policies.served
    if served is None or not served.complete:  # the first routes wait for the index: say so to a client that listens
        out = await _waiting(routed(engine.policies, prompt, top_k, arrived, "mcp"), engine.policies, progress)
    else:
        out = await routed(engine.policies, prompt, top_k, arrived, "mcp")
    out.pop("cached", None)
    return out


@tool(READ_ONLY)
async def get_policy(name: str, ctx: Context[Engine]) -> dict[str, Any]:
    """A policy's full text."""
    policy = await ctx.request_context.lifespan_context.policies.get(name)
    return {"name": policy.name, "text": policy.text}


class Progress:
    """``ctx.report_progress`` that never fails the call (a client that sent no token gets nothing)."""

    def __init__(self, ctx: Context[Engine]) -> None:
        self.ctx = ctx

    async def __call__(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        try:
            await self.ctx.report_progress(progress, total, message)
        except Exception:  # a closed stream must not cost the answer
            log.debug("progress notification not delivered", exc_info=True)


async def _waiting(work: Any, svc: PolicyService, progress: Progress) -> dict[str, Any]:
    """Run ``work`` while telling ``progress`` how far the index build is, every second until it answers."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=PROGRESS_EVERY_S)
            if done:
                return task.result()
            state = svc.index_state()
            total = float(state.get("total") or 0) or None
            await progress(float(state.get("done") or 0), total,
                           f"route index {state.get('state', 'loading')} ({state.get('phase', '')}): "
                           f"{state.get('done', 0)} of {state.get('total', 0)} texts embedded")
    finally:
        if not task.done():
            task.cancel()


TOOLS = [route, get_policy]


def register(mcp: MCPServer[Engine], engine: Engine) -> None:
    @mcp.resource("bosun://policies", mime_type="application/json")
    @protocol_errors
    async def policies_resource() -> str:
        """Every routable policy: name, routing surface, family and relations (no rule text)."""
        # a static resource gets no Context in mcp 2.3: it reads the Engine the server was built on
        return json.dumps(await engine.policies.listing(), indent=1)

    @mcp.resource("bosun://policy/{name}", mime_type="text/markdown")
    @protocol_errors
    async def policy_resource(name: str, ctx: Context) -> str:  # type: ignore[type-arg]
        """One policy document, whole."""
        return (await lifespan_engine(ctx).policies.get(name)).text

    @mcp.custom_route("/v1/route", methods=["POST"])
    async def http_route(request: Request) -> JSONResponse:
        arrived = time.perf_counter()
        token = engine.config.token
        if token:
            given = request.headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                return JSONResponse({"error": "missing or wrong bearer token"}, status_code=401)
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError, RecursionError):
            telemetry.record_failure("input", via="http", delivered_ms=(time.perf_counter() - arrived) * 1000)
            return JSONResponse({"error": "body must be JSON: {\"prompt\": \"...\"}"}, status_code=400)
        if not isinstance(body, dict):
            return JSONResponse({"error": "body must be a JSON object with 'prompt'"}, status_code=400)
        top_k = body.get("top_k")
        top_k = top_k if isinstance(top_k, int) and not isinstance(top_k, bool) else None
        try:
            if body.get("tools") is not None:  # the Tool Compass: {"prompt", "tools": [{name, description}]}
                out = await engine.compass.rank(body.get("prompt"), body["tools"], top_k)
            else:
                out = await routed(engine.policies, body.get("prompt"), top_k, arrived, "http")
        except BosunError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        except Exception:
            return JSONResponse({"error": internal_error("/v1/route")}, status_code=500)
        return JSONResponse(out)
