"""Turn domain errors into MCP tool errors the calling model can read.

mcp 2.3 hides the message of any exception that is not a ToolError behind
"Error executing tool <name>", so every tool body runs inside ``tool_errors``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from mcp.server.mcpserver.exceptions import ToolError

from bosun.core.errors import BosunError

P = ParamSpec("P")
R = TypeVar("R")
log = logging.getLogger("bosun.server")


def tool_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Decorator: BosunError -> ToolError with its message; anything else is logged and named."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except ToolError:
            raise
        except BosunError as exc:
            raise ToolError(str(exc)) from exc
        except Exception as exc:
            log.exception("tool %s failed", fn.__name__)
            raise ToolError(f"internal error in {fn.__name__}: {type(exc).__name__}: {exc}") from exc

    return wrapper
