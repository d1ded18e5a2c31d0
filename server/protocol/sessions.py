"""What the protocol modules need to know about the client behind a request.

mcp 2.3 hands middleware and handlers a per-request ``ServerSession``; the long-lived object of
a 2025 handshake session is its ``Connection`` (the standalone stream, ``exit_stack`` for
teardown), which the session holds but does not expose publicly. Reading it here, in one
place, keeps the protocol modules off SDK internals (the SDK is pinned: pyproject.toml).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mcp import MCPError
from mcp.server.context import CallNext, ServerRequestContext
from mcp.types import INVALID_PARAMS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError


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
