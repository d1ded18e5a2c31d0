"""``bosun://docs/tools``: the reference the lean tool list leaves out, one section per tool.

Generated from the tool functions themselves, so it cannot drift from what the server accepts:
the listed description (the docstring's first paragraph), the rest of the docstring (ops,
examples, what each enum value means) and every parameter with its type, accepted values,
bounds and default, from the full input schema (the listing drops bounds and some defaults).
The dispatch tool serves the same text through ``tool="docs"`` for hosts that do not show
resources to the model.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.tools import Tool

from bosun.server.surface import docs_text, listed_description

URI = "bosun://docs/tools"
_BOUNDS = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}


def _type_of(schema: dict[str, Any]) -> str:
    """A short, readable type: ``string``, ``integer >= 1``, ``one of a|b``, ``array of string``."""
    options = schema.get("anyOf")
    if isinstance(options, list):
        return " or ".join(_type_of(o) for o in options if o != {"type": "null"})
    if "enum" in schema:
        return "one of " + "|".join(str(v) for v in schema["enum"])
    kind = str(schema.get("type", "any"))
    if kind == "array" and isinstance(schema.get("items"), dict):
        kind = "array of " + _type_of(schema["items"])
    bounds = [f"{sign} {schema[key]}" for key, sign in _BOUNDS.items() if key in schema]
    return " ".join([kind, *bounds])


def parameter_lines(fn: Callable[..., Any]) -> list[str]:
    """One markdown bullet per parameter of the tool function, from its full (unslimmed) schema."""
    schema = Tool.from_function(fn, structured_output=False).parameters
    required = set(schema.get("required", []))
    lines = []
    for name, prop in schema.get("properties", {}).items():
        parts = [_type_of(prop)]
        if name in required:
            parts.append("required")
        elif prop.get("default") not in (None, "", [], {}):
            parts.append("default " + json.dumps(prop["default"]))
        text = f"- `{name}` ({', '.join(parts)})"
        if prop.get("description"):
            text += f": {prop['description']}"
        lines.append(text)
    return lines


def tool_section(fn: Callable[..., Any]) -> str:
    """The markdown section of one tool."""
    out = [f"## {fn.__name__}", "", listed_description(fn)]
    body = docs_text(fn)
    if body:
        out += ["", body]
    params = parameter_lines(fn)
    if params:
        out += ["", "Parameters:", *params]
    return "\n".join(out)


def tools_doc(functions: Sequence[Callable[..., Any]], only: str | None = None) -> str:
    """The whole reference (or the section of tool ``only``)."""
    chosen = [fn for fn in functions if only is None or fn.__name__ == only]
    head = ["# bosun tools", "", "One section per tool: when to call it, its ops and parameters, examples. Every tool "
            "works on bosun's own state (tasks, stored outputs, policies): none reaches outside it.", ""]
    return "\n".join(([] if only else head) + ["\n\n".join(tool_section(fn) for fn in chosen)]) + "\n"


def register(mcp: MCPServer[Any], functions: Sequence[Callable[..., Any]]) -> None:
    """``bosun://docs/tools``, built on its first read instead of before ``initialize`` is answered: it
    derives every tool's full schema again (~0.1-0.4 s of start-up)."""
    text: list[str] = []

    @mcp.resource(URI, mime_type="text/markdown")
    def tools_docs() -> str:
        """Every tool's reference: ops, parameters with bounds and defaults, examples."""
        if not text:
            text.append(tools_doc(functions))
        return text[0]
