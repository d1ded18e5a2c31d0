"""What the protocol modules need to know about the client behind a request.

mcp 2.3 hands middleware and handlers a per-request ``ServerSession``; the long-lived object of
a 2025 handshake session is its ``Connection`` (the standalone stream, ``exit_stack`` for
teardown), which the session holds but does not expose publicly. Reading it here, in one
place, keeps the protocol modules off SDK internals (the SDK is pinned: pyproject.toml).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from mcp import MCPError
from mcp.server.context import CallNext, ServerRequestContext
from mcp.types import INVALID_PARAMS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError


def schedule_on(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], tasks: set[asyncio.Task[Any]],
                on_start: Callable[[asyncio.Task[Any]], None] | None = None) -> None:
    """Run ``coro`` as a task on ``loop``, from that loop or any other thread (a log record or a change
    notice can come from a worker thread); the task is kept in ``tasks`` until done. A loop that has
    closed meanwhile gets nothing: the coroutine is closed, never left un-awaited."""

    def start() -> None:
        task = loop.create_task(coro)
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        if on_start is not None:
            on_start(task)

    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        start()
    else:
        try:
            loop.call_soon_threadsafe(start)
        except RuntimeError:  # the loop closed meanwhile
            coro.close()


def connection_of(ctx: Any) -> Any:
    """The connection of the request's client (a stable key per session; the session proxy as fallback)."""
    session = ctx.session
    return getattr(session, "_connection", session)


def is_modern(ctx: Any) -> bool:
    """A 2026-07-28 request (no session: logging, subscriptions and the rest ride each request)."""
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def serve_legacy_method(method: str, params_type: type[BaseModel],
                        handler: Callable[[Any, Any], Awaitable[BaseModel]]) -> Any:
    """Server middleware answering a 2025-era ``method`` (``logging/setLevel``, ``resources/subscribe``...).

    ``MCPServer`` has no public way to add a request handler, and middleware is its public seam: the
    request is answered here and never reaches the SDK's lookup. A 2026 request passes on (the
    method does not exist in that era: the SDK answers -32601). ``app.py`` advertises the capability
    in the ``initialize`` answer."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        if ctx.method != method or ctx.request_id is None or is_modern(ctx):
            return await call_next(ctx)
        try:
            params = params_type.model_validate(dict(ctx.params or {}), by_name=False)
        except ValidationError as exc:
            raise MCPError(INVALID_PARAMS, f"{method}: invalid params ({exc.error_count()} error(s))") from exc
        result = await handler(ctx, params)
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)

    return middleware
