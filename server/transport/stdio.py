"""stdio with the HTTP transport's nesting rule: a message nested too deep is answered, not dropped.

The SDK's ``stdio_server`` parses each line with pydantic, whose JSON parser stops at ~200
levels; the error has no request id, so the SDK drops it and the host waits forever (issue 13:
a tools/call nested deeper than ~200 levels never got an answer over ``serve --stdio`` and
``stdio --standalone``). Here each line is measured first (``json_depth``, no recursion); one
deeper than ``MAX_DEPTH`` gets the error HTTP gives (400 there), as a JSON-RPC error carrying the
request's id. Everything else is the SDK's own stdio transport: the same fd claim (stdout
diverted to stderr while serving, so stray prints never reach the host), parsing and writer.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel
import mcp_types as types
from mcp.server import MCPServer
from mcp.server import stdio as sdk_stdio
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage

from bosun.server.transport.http_guard import MAX_DEPTH, json_depth, top_level_id

INVALID_REQUEST = -32600


def too_deep_answer(line: str) -> types.JSONRPCError | None:
    """The error for a line nested deeper than ``MAX_DEPTH`` (None when the line is fine)."""
    raw = line.encode("utf-8", "replace")
    if json_depth(raw) <= MAX_DEPTH:
        return None
    request_id = top_level_id(raw)
    if not isinstance(request_id, int | str):
        request_id = None
    message = f"Invalid request: JSON nested deeper than {MAX_DEPTH} levels (no bosun argument needs more than ~10)"
    error = types.ErrorData(code=INVALID_REQUEST, message=message)
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)  # type: ignore[arg-type]


@asynccontextmanager
async def guarded_stdio_server() -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's ``stdio_server`` with the depth rule in front of its parser."""
    restore: list[Callable[[], None]] = []
    try:
        stdin_buffer, restore_stdin = sdk_stdio._claim_fd(0, sys.stdin, "rb", sdk_stdio._open_stdin_diversion)
        if restore_stdin is not None:
            restore.append(restore_stdin)
        stdout_buffer, restore_stdout = sdk_stdio._claim_fd(1, sys.stdout, "wb", sdk_stdio._open_stdout_diversion)
        if restore_stdout is not None:
            restore.append(restore_stdout)
        stdin = anyio.wrap_file(sdk_stdio._UnownedTextWrapper(stdin_buffer, encoding="utf-8", errors="replace"))
        stdout = anyio.wrap_file(sdk_stdio._UnownedTextWrapper(stdout_buffer, encoding="utf-8"))

        read_writer, read_stream = create_context_streams[SessionMessage | Exception](0)
        write_stream, write_reader = create_context_streams[SessionMessage](0)

        async def stdin_reader() -> None:
            try:
                async with read_writer:
                    async for line in stdin:
                        refused = too_deep_answer(line)
                        if refused is not None:
                            await write_stream.send(SessionMessage(refused))
                            continue
                        try:
                            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                        except Exception as exc:  # the SDK's behaviour: the server logs it
                            await read_writer.send(exc)
                            continue
                        await read_writer.send(SessionMessage(message))
            except anyio.ClosedResourceError:
                await anyio.lowlevel.checkpoint()

        async def stdout_writer() -> None:
            try:
                async with write_reader:
                    async for session_message in write_reader:
                        text = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                        await stdout.write(text + "\n")
                        await stdout.flush()
            except anyio.ClosedResourceError:
                await anyio.lowlevel.checkpoint()

        async with anyio.create_task_group() as tg:
            tg.start_soon(stdin_reader)
            tg.start_soon(stdout_writer)
            yield read_stream, write_stream
    finally:
        for undo in reversed(restore):
            undo()


async def run_stdio(mcp: MCPServer[Any]) -> None:
    """``mcp.run_stdio_async()`` over the guarded transport; returns when the host closes stdin."""
    lowlevel = mcp._lowlevel_server
    async with guarded_stdio_server() as (read_stream, write_stream):
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
