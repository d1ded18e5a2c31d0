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

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations

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
