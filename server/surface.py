"""One policy for the MCP surface: how every tool is declared, listed, answered and fails.

- A tool module marks its tool functions with ``@tool(ANNOTATIONS)``; ``build_tools`` turns
  them into SDK ``Tool`` objects (public API) for the server's constructor.
- Listing: the input schema every agent pays for on every turn is slimmed once here
  (no pydantic ``title``s, no ``anyOf [T, null]`` + ``default: null``); no output schema.
- Answers: a tool returns a dict (or ``Answer(dict, text)``); the model-facing text is compact
  JSON (the SDK would indent it: ~25% more tokens on every call) and ``structured_content``
  keeps the dict for programs.
- Errors: ``BosunError`` becomes a tool error naming the field (tools) or a JSON-RPC error with
  ``mcp.types`` codes (resources, prompts); anything else is logged and named, never a traceback.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from mcp import MCPError
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import INTERNAL_ERROR, INVALID_PARAMS, CallToolResult, TextContent, ToolAnnotations

from bosun.core.errors import BosunError

P = ParamSpec("P")
R = TypeVar("R")
log = logging.getLogger("bosun.server")

# -- annotations (hints to the host; they say what a call does to bosun's state) -------------
# Only hints that differ from the spec's defaults are sent (read-only false, destructive true,
# idempotent false, open-world true): every listed byte is paid for in every agent turn.
READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
# journals an event (a recall counted in the task's ledger) and changes nothing else
RECORDS = ToolAnnotations(destructive_hint=False, open_world_hint=False)
# changes a task's state; nothing is ever deleted
WRITES = ToolAnnotations(destructive_hint=False, open_world_hint=False)

_SPEC = "__bosun_tool__"


@dataclass(frozen=True)
class Answer:
    """A tool answer whose model-facing text is not its JSON (recall's recalled lines)."""

    data: dict[str, Any]
    text: str


def compact(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def as_result(answer: dict[str, Any] | Answer) -> CallToolResult:
    """The CallToolResult of an answer: compact text for the model, the dict for programs."""
    if isinstance(answer, Answer):
        return CallToolResult(content=[TextContent(type="text", text=answer.text)], structured_content=answer.data)
    return CallToolResult(content=[TextContent(type="text", text=compact(answer))], structured_content=answer)


def tool(annotations: ToolAnnotations) -> Callable[[Callable[P, Awaitable[Any]]], Callable[P, Awaitable[CallToolResult]]]:
    """Mark an async function as a bosun tool: errors mapped, answer shaped, annotations attached."""

    def mark(fn: Callable[P, Awaitable[Any]]) -> Callable[P, Awaitable[CallToolResult]]:
        @functools.wraps(fn)
        async def wrapper(*args: P.args, **kwargs: P.kwargs) -> CallToolResult:
            try:
                return as_result(await fn(*args, **kwargs))
            except ToolError:
                raise
            except BosunError as exc:
                raise ToolError(str(exc)) from exc
            except Exception as exc:
                log.exception("tool %s failed", fn.__name__)
                raise ToolError(f"internal error in {fn.__name__}: {type(exc).__name__}: {exc}") from exc

        setattr(wrapper, _SPEC, annotations)
        return wrapper

    return mark


def protocol_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """For resources and prompts: BosunError -> a JSON-RPC error that keeps its message (the SDK hides others)."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except MCPError:
            raise
        except BosunError as exc:
            raise MCPError(INVALID_PARAMS, str(exc)) from exc
        except Exception as exc:
            log.exception("%s failed", fn.__name__)
            raise MCPError(INTERNAL_ERROR, f"internal error in {fn.__name__}: {type(exc).__name__}") from exc

    return wrapper


def lifespan_engine(ctx: Any) -> Any:
    """The Engine behind a resource or prompt call (they take a bare ``Context`` in mcp 2.3)."""
    return ctx.request_context.lifespan_context


def tools_of(namespace: Iterable[Any]) -> list[Callable[..., Any]]:
    """The functions marked with ``@tool`` among ``namespace``."""
    return [fn for fn in namespace if callable(fn) and hasattr(fn, _SPEC)]


def build_tools(functions: Sequence[Callable[..., Any]], wanted: Sequence[str] = ()) -> list[Tool]:
    """SDK ``Tool`` objects for the marked functions, with slim schemas; only ``wanted`` when given."""
    tools = []
    for fn in functions:
        built = Tool.from_function(fn, annotations=getattr(fn, _SPEC), structured_output=False)
        built.parameters = slim_schema(built.parameters)
        tools.append(built)
    if wanted:
        known = {t.name for t in tools}
        unknown = sorted(set(wanted) - known)
        if unknown:
            raise ValueError(f"BOSUN_TOOLS names unknown tools {unknown}; known: {', '.join(sorted(known))}")
        tools = [t for t in tools if t.name in wanted]
    return tools


def slim_schema(schema: Any) -> Any:
    """A tool input schema without what costs tokens and says nothing: pydantic ``title``s, and
    ``anyOf [T, null]`` + ``default: null`` on optional parameters (an omitted optional is null)."""
    if isinstance(schema, list):
        return [slim_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: slim_schema(v) for k, v in schema.items() if k != "title" or not isinstance(v, str)}
    if isinstance(schema.get("properties"), dict):  # a property may be named "title"
        out["properties"] = {k: slim_schema(v) for k, v in schema["properties"].items()}
    any_of = out.get("anyOf")
    if isinstance(any_of, list) and len(any_of) == 2 and {"type": "null"} in any_of and out.get("default", 0) is None:
        other = next(s for s in any_of if s != {"type": "null"})
        out.pop("anyOf")
        out.pop("default")
        out = {**other, **out}
    return out
