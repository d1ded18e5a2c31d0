"""What the protocol modules need to know about the client behind a request.

mcp 2.3 hands middleware and handlers a per-request ``ServerSession``; the long-lived object of
a 2025 handshake session is its ``Connection`` (the standalone stream, ``exit_stack`` for
teardown), which the session holds but does not expose publicly. Reading it here, in one
place, keeps the protocol modules off SDK internals (the SDK is pinned: pyproject.toml).
"""

from __future__ import annotations

from typing import Any

from mcp_types.version import MODERN_PROTOCOL_VERSIONS


def connection_of(ctx: Any) -> Any:
    """The connection of the request's client (a stable key per session; the session proxy as fallback)."""
    session = ctx.session
    return getattr(session, "_connection", session)


def is_modern(ctx: Any) -> bool:
    """A 2026-07-28 request (no session: logging, subscriptions and the rest ride each request)."""
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
