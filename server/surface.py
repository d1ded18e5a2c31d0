"""One policy for the MCP surface: how every tool is declared, listed, answered and fails.

- A tool module marks its tool functions with ``@tool(ANNOTATIONS)``; ``build_tools`` turns
  them into SDK ``Tool`` objects (public API) for the server's constructor.
- Listing: what every agent pays for on every turn is slimmed once here. The description is
  the first paragraph of the tool function's docstring (when to call it); the rest of the
  docstring and the full parameter schema are the reference served as ``bosun://docs/tools``
  (``server/protocol/docs.py``). The listed input schema has no pydantic ``title``s, no
  ``anyOf [T, null]`` + ``default: null``, no bounds (``argument_guard`` enforces and explains
  them), no ``additionalProperties: true`` (the default) and no default that is what omitting
  the argument means anyway (``false``, ``0``, ``""``, empty lists); no output schema.
- Answers: a tool returns a dict (or ``Answer(dict, text)``); the model-facing text is compact
  JSON (the SDK would indent it: ~25% more tokens on every call) and ``structured_content``
  keeps the dict for programs.
- Arguments: ``argument_guard`` checks every ``tools/call`` before the SDK does: an unknown
  argument is refused naming the closest known one (pydantic would silently drop it), and
  pydantic's errors are rewritten for a person (field, problem, what is accepted; no URLs).
- Errors: ``BosunError`` becomes a tool error naming the field (tools) or a JSON-RPC error with
  ``mcp.types`` codes (resources, prompts); anything else is logged under an error id and only
  the id is returned, never the exception's text or a traceback.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import json
import logging
import secrets
import traceback
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from mcp import MCPError
from mcp.server.context import CallNext, ServerRequestContext
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import INTERNAL_ERROR, INVALID_PARAMS, CallToolResult, TextContent, ToolAnnotations
from pydantic import ValidationError

from bosun.core.errors import BosunError
from bosun.core.redact import default_redactor

P = ParamSpec("P")
R = TypeVar("R")
log = logging.getLogger("bosun.server")

# -- annotations (hints to the host; they say what a call does to bosun's state) -------------
# The three hints a host decides on are true for every tool: read-only, destructive (the spec
# default is true; no bosun tool destroys anything: the journal is append-only, refs are never
# deleted) and idempotent (the spec default, false, is true of every tool that writes: each call
# journals once more; the spec reads destructive and idempotent "only when readOnlyHint ==
# false", so read-only tools send neither). openWorldHint is not sent: its default (true, "may
# reach external entities") is the cautious reading for a host, bosun's world is closed (stated
# in bosun://docs/tools), and the hint would cost 4 tokens per tool on every agent turn.
READ_ONLY = ToolAnnotations(read_only_hint=True)
# journals an event (a recall counted in the task's ledger) and changes nothing else
RECORDS = ToolAnnotations(destructive_hint=False)
# changes a task's state (a new task, a contract, a journal entry); nothing is ever deleted
WRITES = ToolAnnotations(destructive_hint=False)

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
            except MCPError:
                raise
            except (ToolError, BosunError) as exc:
                return refusal(fn.__name__, str(exc))
            except Exception:
                return refusal(fn.__name__, internal_error(fn.__name__))

        setattr(wrapper, _SPEC, annotations)
        return wrapper

    return mark


def refusal(tool_name: str, message: str) -> CallToolResult:
    """A tool error as the model reads it: ``field: what is wrong; accepted: ...``, nothing before it.

    Returned rather than raised: the SDK prefixes a raised error with "Error executing tool <name>: ",
    which only the argument guard's errors escaped, so the same mistake read two ways."""
    log.info("tool %s refused its arguments", tool_name)  # not the message: it can quote caller data
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


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
            raise MCPError(INTERNAL_ERROR, internal_error(fn.__name__)) from exc

    return wrapper


def internal_error(where: str) -> str:
    """Log the exception being handled under a fresh id; the message names only the id.

    The exception's own text can hold paths, SQL or the caller's data: it stays in the (scrubbed) log."""
    error_id = secrets.token_hex(4)
    # the traceback can quote caller data (a payload in an exception message): scrubbed like everything stored
    log.error("error %s in %s\n%s", error_id, where, default_redactor().scrub(traceback.format_exc()))
    return (f"internal error {error_id} in {where}: bosun could not finish this call; it is not caused by "
            f"your arguments. Retry once; if it fails again, report error id {error_id}")


def lifespan_engine(ctx: Any) -> Any:
    """The Engine behind a resource or prompt call (they take a bare ``Context`` in mcp 2.3)."""
    return ctx.request_context.lifespan_context


# -- arguments ---------------------------------------------------------------------------------

def argument_guard(tools: Sequence[Tool]) -> Any:
    """Server middleware: every ``tools/call`` names a known tool and only known arguments, valid ones.

    Runs before the SDK's own validation, which drops unknown arguments silently (a typo in
    ``based_on_version`` would turn optimistic concurrency off) and answers with pydantic's
    text. A bad argument is a tool error the model can act on; a malformed request (unknown
    tool, ``arguments`` not an object) is a JSON-RPC ``-32602``."""
    by_name = {t.name: t for t in tools}
    listing = ", ".join(sorted(by_name))

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        if ctx.method != "tools/call":
            return await call_next(ctx)
        params = ctx.params if isinstance(ctx.params, dict) else {}
        name = params.get("name")
        built = by_name.get(name) if isinstance(name, str) else None
        if built is None:
            raise MCPError(INVALID_PARAMS, f"name: unknown tool {name!r}; accepted: {listing}")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise MCPError(INVALID_PARAMS, f"arguments: must be a JSON object of named arguments for {name}, "
                                           f"got {_json_type(arguments)}")
        problem = argument_problem(built, arguments)
        if problem is not None:
            return refusal(str(name), problem)
        return await call_next(ctx)

    return middleware


def argument_problem(built: Tool, arguments: dict[str, Any]) -> str | None:
    """What is wrong with ``arguments`` for ``built``, written for the model that sent them; None if fine."""
    known = [k for k in built.parameters.get("properties", {})]
    for key in arguments:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}? " if close else ""
            return f"{key}: unknown argument of {built.name}; {hint}accepted: {', '.join(known)}"
    try:
        built.fn_metadata.validate_arguments(arguments)
    except ValidationError as exc:
        return "; ".join(_explain(err, built) for err in exc.errors(include_url=False)[:3])
    return None


def _explain(err: Any, built: Tool) -> str:
    """One pydantic error as ``field: problem; accepted: ...``, without pydantic's jargon."""
    loc = err.get("loc", ())
    field = str(loc[0]) if loc else "arguments"
    for part in loc[1:]:
        field += f"[{part}]" if isinstance(part, int) else f".{part}"
    kind = str(err.get("type", ""))
    ctx = err.get("ctx") or {}
    got = err.get("input")
    shown = _shown(got)
    if kind == "missing":
        return f"{field}: required by {built.name} and missing"
    if kind in ("literal_error", "enum"):
        return f"{field}: {shown} is not one of the accepted values; accepted: {ctx.get('expected', '')}"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        sign = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}[kind]
        bound = next(iter(ctx.values()), "")
        return f"{field}: {shown} is out of range; accepted: {sign} {bound}"
    if kind.endswith("_type") or kind.endswith("_parsing"):
        wanted = kind.removesuffix("_type").removesuffix("_parsing").replace("_", " ")
        return f"{field}: expected {_article(wanted)}, got {_json_type(got)} {shown}{_shape_of(built, loc)}"
    return f"{field}: {err.get('msg', 'invalid value')} (got {shown})"


def _shape_of(built: Tool, loc: Sequence[Any]) -> str:
    """``; accepted: <shape>`` from the argument's listed description (``[{field, op, value}]``), if it has one:
    the shape the caller got wrong, which the bare type does not show."""
    if len(loc) != 1:
        return ""
    prop = built.parameters.get("properties", {}).get(str(loc[0]))
    description = prop.get("description") if isinstance(prop, dict) else None
    return f"; accepted: {description}" if isinstance(description, str) and description else ""


def _article(word: str) -> str:
    names = {"int": "integer", "bool": "boolean (true/false)", "str": "string", "dict": "JSON object",
             "list": "JSON array", "float": "number", "tuple": "JSON array", "model": "JSON object"}
    word = names.get(word, word)
    return ("an " if word[:1] in "aeiou" else "a ") + word


def _json_type(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def tools_of(namespace: Iterable[Any]) -> list[Callable[..., Any]]:
    """The functions marked with ``@tool`` among ``namespace``."""
    return [fn for fn in namespace if callable(fn) and hasattr(fn, _SPEC)]


def build_tools(functions: Sequence[Callable[..., Any]], wanted: Sequence[str] = ()) -> list[Tool]:
    """SDK ``Tool`` objects for the marked functions, with slim schemas; only ``wanted`` when given."""
    tools = []
    for fn in functions:
        built = Tool.from_function(fn, description=listed_description(fn), annotations=getattr(fn, _SPEC),
                                   structured_output=False)
        # additionalProperties false: clients that validate see the rule argument_guard enforces
        built.parameters = {**slim_schema(built.parameters), "additionalProperties": False}
        tools.append(built)
    if wanted:
        known = {t.name for t in tools}
        unknown = sorted(set(wanted) - known)
        if unknown:
            raise ValueError(f"BOSUN_TOOLS names unknown tools {unknown}; known: {', '.join(sorted(known))}")
        tools = [t for t in tools if t.name in wanted]
    return tools


def listed_description(fn: Callable[..., Any]) -> str:
    """The first paragraph of ``fn``'s docstring, on one line: when to call the tool and what it returns."""
    doc = inspect.getdoc(fn) or ""
    return " ".join(doc.split("\n\n", 1)[0].split())


def docs_text(fn: Callable[..., Any]) -> str:
    """The rest of ``fn``'s docstring (ops, examples, enum meanings): the docs resource's text."""
    doc = inspect.getdoc(fn) or ""
    parts = doc.split("\n\n", 1)
    return parts[1].strip() if len(parts) > 1 else ""


_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems",
           "minLength", "maxLength")


def _means_omitted(default: Any) -> bool:
    """A default a caller learns nothing from (``null`` is handled with its ``anyOf``)."""
    empties: tuple[Any, ...] = (False, 0, "", [], {})
    return any(default == empty and type(default) is type(empty) for empty in empties)


def slim_schema(schema: Any) -> Any:
    """A tool input schema without what costs tokens and says nothing to a caller: pydantic ``title``s,
    ``anyOf [T, null]`` + ``default: null`` on optional parameters (an omitted optional is null),
    ``additionalProperties: true`` (the JSON Schema default), bounds (the guard enforces and explains
    them) and defaults that equal omission (``false``, ``0``, ``""``, ``[]``)."""
    if isinstance(schema, list):
        return [slim_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: slim_schema(v) for k, v in schema.items()
           if not (k == "title" and isinstance(v, str)) and k not in _BOUNDS
           and not (k == "additionalProperties" and v is True)
           and not (k == "default" and _means_omitted(v))}
    if isinstance(schema.get("properties"), dict):  # a property may be named "title" or "default"
        out["properties"] = {k: slim_schema(v) for k, v in schema["properties"].items()}
    any_of = out.get("anyOf")
    if isinstance(any_of, list) and len(any_of) == 2 and {"type": "null"} in any_of and out.get("default", 0) is None:
        other = next(s for s in any_of if s != {"type": "null"})
        out.pop("anyOf")
        out.pop("default")
        out = {**other, **out}
    return out
