"""Dispatch mode (``BOSUN_TOOLS=dispatch``): the whole surface as one tool, ``bosun(tool, args)``.

For hosts where every listed tool is paid for in every turn of every agent: one small listing
(each op named with its required arguments and one line on when to call it) instead of eleven
schemas. ``tool="docs"`` answers the full reference of one op (``args: {"tool": "recall"}``) or
of all, the same text as the ``bosun://docs/tools`` resource, for hosts that do not show
resources to the model. A call goes to the same tool function through the same argument check
(``argument_problem``: unknown or invalid arguments refused, naming the field) and the same
error mapping (the ``@tool`` wrapper), with the caller's context, so progress works as well.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mcp.server.context import CallNext, ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from mcp.types import Tool as WireTool

from bosun.server.protocol.docs import tools_doc
from bosun.server.surface import argument_problem, slim_schema

NAME = "bosun"
DOCS_OP = "docs"
# a write through some op is possible; nothing is ever deleted (surface.py: the annotation policy)
ANNOTATIONS = ToolAnnotations(destructive_hint=False)


def _error(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def op_line(built: Tool) -> str:
    """``name(required, mode=a|b): when to call it`` for the dispatch listing (required arguments only)."""
    props = built.parameters.get("properties", {})
    required = []
    for name in built.parameters.get("required", []):
        values = props.get(name, {}).get("enum")
        required.append(f"{name}={'|'.join(values)}" if values else name)
    return f"{built.name}({', '.join(required)}): {first_clause(built.description or '')}"


def first_clause(text: str) -> str:
    """The description up to its first sentence or clause end: the listing names ops, the docs explain."""
    cut = min((i for i in (text.find(". "), text.find("; ")) if i > 0), default=len(text))
    return text[:cut].rstrip(".")


def dispatch_tool(tools: Sequence[Tool], functions: Sequence[Callable[..., Any]]) -> Tool:
    """The one tool that routes ``{tool, args}`` to ``tools`` (built by ``build_tools``)."""
    by_name = {t.name: t for t in tools}
    ops = [*by_name, DOCS_OP]

    async def bosun(tool: str, ctx: Context[Any], args: dict[str, Any] | None = None) -> CallToolResult:
        arguments = args or {}
        if tool == DOCS_OP:
            only = arguments.get("tool")
            if only is not None and only not in by_name:
                return _error(f"args.tool: unknown op {only!r}; ops: {', '.join(by_name)}")
            return CallToolResult(content=[TextContent(type="text", text=tools_doc(functions, only))])
        built = by_name.get(tool)
        if built is None:
            return _error(f"tool: unknown op {tool!r}; ops: {', '.join(ops)}")
        problem = argument_problem(built, arguments)
        if problem is not None:
            return _error(problem)
        try:
            result = await built.run(arguments, context=ctx)
        except ToolError as exc:  # the op's own error, without a second "Error executing tool" prefix
            cause = exc.__cause__
            return _error(str(cause) if isinstance(cause, ToolError) else str(exc))
        return result if isinstance(result, CallToolResult) else _error(f"{tool}: no answer")

    description = (
        f"Call a bosun op: tool=op, args=its arguments. tool=\"{DOCS_OP}\", args={{\"tool\": op}}: its parameters. "
        "Ops:\n" + "\n".join(op_line(t) for t in tools)
    )
    built = Tool.from_function(bosun, name=NAME, description=description, annotations=ANNOTATIONS,
                               structured_output=False)
    # the ops are named once, in the description (an enum here would repeat them)
    built.parameters = {**slim_schema(built.parameters), "additionalProperties": False}
    return built


# -- dispatch per session (BOSUN_TOOLS=dispatch through ``bosun stdio``) --------------------------------
# The daemon is shared by every harness, so one host's BOSUN_TOOLS cannot shape its tool list. The bridge
# names the host's choice on each tools/list and tools/call (params._meta[SESSION_TOOLS_META]); the daemon
# serves the dispatch tool, hidden from everyone else, to the requests that ask for it.
SESSION_TOOLS_META = "bosun/tools"


def requested_tools(params: Any) -> list[str] | None:
    """The BOSUN_TOOLS a request names (``params._meta["bosun/tools"]``, comma-separated), or None."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    value = meta.get(SESSION_TOOLS_META) if isinstance(meta, dict) else None
    if not isinstance(value, str):
        return None
    return [t.strip() for t in value.split(",") if t.strip()]


def session_dispatch(listed: Callable[[list[str]], Sequence[Tool]], served: Sequence[str]) -> Any:
    """Middleware: a request whose ``_meta`` asks for dispatch gets the dispatch tool (over the ops it names with
    it, or all), built by ``listed`` as ``serve`` builds it; other requests never see the hidden ``bosun`` tool
    unless this server lists it (``served``: the names of the tools it lists)."""
    built: dict[tuple[str, ...], Sequence[Tool]] = {}

    def tools_for(wanted: list[str]) -> Sequence[Tool]:
        key = tuple(sorted(wanted))
        if key not in built:
            built[key] = listed(list(key))
        return built[key]

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        if ctx.method not in ("tools/list", "tools/call"):
            return await call_next(ctx)
        wanted = requested_tools(ctx.params)
        dispatch = wanted is not None and "dispatch" in wanted
        if ctx.method == "tools/call":
            params = ctx.params if isinstance(ctx.params, dict) else {}
            ops = [w for w in wanted or () if w != "dispatch"]
            args = params.get("arguments")
            op = args.get("tool") if isinstance(args, dict) else None
            if dispatch and params.get("name") == NAME and ops and op not in (*ops, DOCS_OP):
                return _error(f"tool: unknown op {op!r}; ops: {', '.join([*ops, DOCS_OP])}")
            return await call_next(ctx)
        result: Any = await call_next(ctx)
        tools = result.get("tools") if isinstance(result, dict) else getattr(result, "tools", None)
        if not isinstance(tools, list):
            return result
        if dispatch and wanted is not None:
            one = tools_for(wanted)[0]
            entry = WireTool(name=one.name, description=one.description, input_schema=one.parameters,
                             annotations=one.annotations)
            kept: list[Any] = [entry.model_dump(mode="json", by_alias=True, exclude_none=True)
                               if isinstance(result, dict) else entry]
        elif NAME in served:
            return result
        else:
            kept = [t for t in tools if (t.get("name") if isinstance(t, dict) else getattr(t, "name", None)) != NAME]
        if isinstance(result, dict):
            return {**result, "tools": kept}
        return result.model_copy(update={"tools": kept})

    return middleware
