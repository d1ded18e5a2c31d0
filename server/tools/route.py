"""``route`` and ``get_policy``: which governance documents bear on this prompt, and the whole document.

Also serves ``bosun://policies`` (the listing) and ``bosun://policy/{name}``, and a plain JSON
endpoint ``POST /v1/route`` so the Claude Code hook can ask the warm daemon without an MCP
session (stdlib HTTP, no handshake). Every route is recorded in telemetry (outcome, latency,
names; never the prompt).
"""

from __future__ import annotations

import hmac
import json
import logging
import time
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field
from starlette.requests import Request
from starlette.responses import JSONResponse

from bosun.core.errors import BosunError, InvalidInput
from bosun.server import telemetry
from bosun.server.engine import Engine, ModelUnavailable
from bosun.server.services.policies import CorpusError, PolicyService
from bosun.server.surface import READ_ONLY, internal_error, lifespan_engine, protocol_errors, tool

log = logging.getLogger("bosun.route")


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
    prompt: Annotated[str, Field(description="the user's request, as text")],
    ctx: Context[Engine],
    top_k: Annotated[int | None, Field(description="max hits (default 2)", ge=1, le=10)] = None,
) -> dict[str, Any]:
    """Names of the governance policies that bear on this prompt, with evidence; empty when none apply. Read one with get_policy."""
    out = await routed(ctx.request_context.lifespan_context.policies, prompt, top_k, time.perf_counter(), "mcp")
    out.pop("cached", None)
    return out


@tool(READ_ONLY)
async def get_policy(
    name: Annotated[str, Field(description="a policy name from route")], ctx: Context[Engine]
) -> dict[str, Any]:
    """The whole policy document, rules with their exceptions."""
    policy = await ctx.request_context.lifespan_context.policies.get(name)
    return {"name": policy.name, "text": policy.text}


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
        try:
            out = await routed(engine.policies, body.get("prompt"), top_k if isinstance(top_k, int) else None,
                               arrived, "http")
        except BosunError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        except Exception:
            return JSONResponse({"error": internal_error("/v1/route")}, status_code=500)
        return JSONResponse(out)
