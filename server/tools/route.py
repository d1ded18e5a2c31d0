"""``route`` and ``get_policy``: which governance documents bear on this prompt, and the whole document.

Also serves ``bosun://policies`` (the listing) and ``bosun://policy/{name}``,
and a plain JSON endpoint ``POST /v1/route`` so the Claude Code hook can ask
the warm daemon without an MCP session (stdlib HTTP, no handshake).
"""

from __future__ import annotations

import hmac
import json
import logging
import time
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import ToolAnnotations
from pydantic import Field
from starlette.requests import Request
from starlette.responses import JSONResponse

from bosun.core.errors import BosunError, InvalidInput
from bosun.server import telemetry
from bosun.server.engine import ModelUnavailable
from bosun.server.errors import tool_errors
from bosun.server.services.policies import EXTENSION_KEY, CorpusError, PolicyService, service_of

log = logging.getLogger("bosun.route")


async def on_open(engine: Any) -> None:
    """Start loading the corpus in the background; the first route waits for it."""
    if EXTENSION_KEY not in engine.extensions:
        svc = PolicyService(engine)
        engine.extensions[EXTENSION_KEY] = svc
        svc.start()


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


def register(mcp: MCPServer[Any]) -> None:
    from bosun.server.app import engine_of

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True), structured_output=True)
    @tool_errors
    async def route(
        prompt: Annotated[str, Field(description="the user's request, as text")],
        ctx: Context[Any],
        top_k: Annotated[int | None, Field(description="max hits (default 2)")] = None,
    ) -> dict[str, Any]:
        """Names of the governance policies that bear on this prompt, with evidence; empty when none apply. Read one with get_policy."""
        arrived = time.perf_counter()
        out = await routed(service_of(engine_of(ctx)), prompt, top_k, arrived, "mcp")
        out.pop("cached", None)
        return out

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True), structured_output=True)
    @tool_errors
    async def get_policy(
        name: Annotated[str, Field(description="a policy name from route")], ctx: Context[Any]
    ) -> dict[str, Any]:
        """The whole policy document, rules with their exceptions."""
        policy = await service_of(engine_of(ctx)).get(name)
        return {"name": policy.name, "text": policy.text}

    @mcp.resource("bosun://policies", mime_type="application/json")
    async def policies_resource() -> str:
        """Every routable policy: name, routing surface, family and relations (no rule text)."""
        # static resources get no Context in mcp 2.3: the engine is the one create_server attached
        return json.dumps(await service_of(mcp.bosun_engine).listing(), indent=1)  # type: ignore[attr-defined]

    @mcp.resource("bosun://policy/{name}", mime_type="text/markdown")
    async def policy_resource(name: str, ctx: Context) -> str:  # type: ignore[type-arg]
        """One policy document, whole."""
        return (await service_of(engine_of(ctx)).get(name)).text


    @mcp.custom_route("/v1/route", methods=["POST"])
    async def http_route(request: Request) -> JSONResponse:
        arrived = time.perf_counter()
        eng = getattr(mcp, "bosun_engine", None)
        if eng is None:
            return JSONResponse({"error": "engine not ready"}, status_code=503)
        token = eng.config.token
        if token:
            given = request.headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                return JSONResponse({"error": "missing or wrong bearer token"}, status_code=401)
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError):
            telemetry.record_failure("input", via="http", delivered_ms=(time.perf_counter() - arrived) * 1000)
            return JSONResponse({"error": "body must be JSON: {\"prompt\": \"...\"}"}, status_code=400)
        if not isinstance(body, dict):
            return JSONResponse({"error": "body must be a JSON object with 'prompt'"}, status_code=400)
        top_k = body.get("top_k")
        try:
            out = await routed(service_of(eng), body.get("prompt"), top_k if isinstance(top_k, int) else None,
                               arrived, "http")
        except BosunError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        except Exception as exc:
            log.exception("/v1/route failed")
            return JSONResponse({"error": f"{type(exc).__name__}: {exc}"}, status_code=500)
        return JSONResponse(out)
