"""``observe``: log an action and its outcome; large results leave the prompt behind a stub.

kind=result|failure: the output is scrubbed of secrets, stored (verified ref),
journaled, and either passed through (small: the agent keeps it, bosun answers
in ~10 tokens) or replaced by a stub (ref, sizes, outline, recall calls).
With ``intent``, an offloaded answer also carries the lines that bear on it.
kind=dropped: the drop receipt that credits savings (``result``: the ref or a list of refs).
kind=file (``result``: the path): path, sha256, mtime, size of a file under BOSUN_ROOTS. kind=decision|constraint: appended to
the task. kind=head|contract: the system head / tool contract, checked for
cache-busting volatile tokens.

The listing is paid on every agent turn, so it stays at <= 160 tokens (``bench/tool_tokens.py``):
the pruning mode and forced offload are the task's settings (plan) and the CLI's flags, and seal
drift is checked by plan and precheck, not here.
"""

from __future__ import annotations

import hmac
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field
from starlette.requests import Request
from starlette.responses import JSONResponse

from bosun.core.errors import BosunError, InvalidInput, NotFound
from bosun.server.engine import Engine
from bosun.server.surface import WRITES, internal_error, tool

ObserveKind = Literal["result", "failure", "dropped", "file", "decision", "constraint", "head", "contract"]


@tool(WRITES)
async def observe(
    task_id: str,
    kind: ObserveKind,
    ctx: Context[Engine],
    tool: str | None = None,
    args: Any = None,
    result: Annotated[Any, Field(description="output|path|ref(s)")] = None,
    intent: Annotated[str | None, Field(description="what you need")] = None,
    text: str | None = None,
    agent: str | None = None,
) -> dict[str, Any]:
    """Call on tool outputs >150 tokens; returns a stub (ref, outline, intent lines)."""
    refs = result if kind == "dropped" and isinstance(result, list) else None
    path = result if kind == "file" and isinstance(result, str) else None
    if refs is not None or path is not None:
        result = None
    engine = ctx.request_context.lifespan_context
    try:
        return await engine.observe.run(task_id, kind, tool, args, result, None, path, text, refs,
                                        agent=agent, intent=intent)
    except (InvalidInput, NotFound) as exc:
        # a wrong task_id is the likelier mistake than a missing argument: name it first (costs nothing
        # on a call that succeeds, which is why it is checked here and not before every observe)
        if isinstance(exc, InvalidInput) and task_id:
            await engine.tasks.get(task_id)
        if kind == "file" and str(exc).startswith("path: "):  # kind=file takes its path in `result`: name that
            raise InvalidInput("result", str(exc).removeprefix("path: ")) from exc
        raise


TOOLS = [observe]


def register(mcp: MCPServer[Engine], engine: Engine) -> None:
    """``POST /v1/observe``: ``bosun run`` hands over a spooled command output (stdlib HTTP, no MCP session)."""

    @mcp.custom_route("/v1/observe", methods=["POST"])
    async def http_observe(request: Request) -> JSONResponse:
        token = engine.config.token
        if token and not hmac.compare_digest(request.headers.get("authorization", "").encode(),
                                             f"Bearer {token}".encode()):
            return JSONResponse({"error": "missing or wrong bearer token"}, status_code=401)
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError, RecursionError):
            return JSONResponse({"error": "body must be a JSON object"}, status_code=400)
        if not isinstance(body, dict):
            return JSONResponse({"error": "body must be a JSON object"}, status_code=400)
        task = body.get("task")
        try:
            out = await engine.observe.observe_spool(
                task if isinstance(task, str) and task.strip() else None, body.get("session"),
                body.get("command"), body.get("spool"), body.get("exit_code"), body.get("intent"), body.get("mode"))
        except BosunError as exc:
            return JSONResponse({"error": str(exc)}, status_code=404 if isinstance(exc, NotFound) else 400)
        except OSError:
            return JSONResponse({"error": "the spool file could not be read"}, status_code=400)
        except Exception:
            return JSONResponse({"error": internal_error("/v1/observe")}, status_code=500)
        return JSONResponse(out)
