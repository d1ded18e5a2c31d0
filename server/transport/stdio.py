"""stdio with the HTTP transport's nesting rule: a message nested too deep is answered, not dropped.

The SDK's stdio transport parses each line with pydantic, whose JSON parser stops at ~200
levels; the error has no request id, so the SDK drops it and the host waits forever (issue 13:
a tools/call nested deeper than ~200 levels never got an answer over ``serve --stdio`` and
``stdio --standalone``). Here each line is measured before the SDK sees it (``json_depth``, no
recursion). A line deeper than ``MAX_DEPTH`` is replaced by a shallow ``ping`` with the same id
that carries the refusal in ``_meta``; the ``refuse_marked`` middleware answers it with the error
HTTP gives (400 there) as JSON-RPC ``-32600``. Everything else is the SDK's own stdio transport
(``run_stdio_async``): its stdout claim, parser and writer.

Like the SDK, the real stdin is moved off fd 0 while serving (fd 0 reads the null device), so a
child process cannot read the host's messages.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import logging
import os
import sys
from collections.abc import Iterator
from typing import Any, BinaryIO

from mcp import MCPError
from mcp.server import MCPServer
from mcp.server.context import CallNext, ServerRequestContext

from bosun.server.transport.http_guard import MAX_DEPTH, json_depth, top_level_id

log = logging.getLogger("bosun.stdio")

INVALID_REQUEST = -32600
REFUSED_META = "bosun/refused"
TOO_DEEP = f"Invalid request: JSON nested deeper than {MAX_DEPTH} levels (no bosun argument needs more than ~10)"


def guard_line(line: bytes) -> bytes | None:
    """``line`` as the SDK should see it: itself, a marked ping for a line too deep, or None (drop it)."""
    if json_depth(line) <= MAX_DEPTH:
        return line
    request_id = top_level_id(line)
    if not isinstance(request_id, int | str) or isinstance(request_id, bool):
        log.warning("dropped a message nested deeper than %d levels that carries no id", MAX_DEPTH)
        return None
    marked = {"jsonrpc": "2.0", "id": request_id, "method": "ping", "params": {"_meta": {REFUSED_META: TOO_DEEP}}}
    return json.dumps(marked).encode() + b"\n"


class _GuardedLines(io.RawIOBase):
    """A binary stream over the host's stdin that hands the SDK each line through ``guard_line``."""

    def __init__(self, source: BinaryIO) -> None:
        super().__init__()
        self.source = source
        self.pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self.pending:
            line = self.source.readline()
            if not line:
                return 0
            self.pending = guard_line(line) or b""
        n = min(len(buffer), len(self.pending))
        buffer[:n] = self.pending[:n]
        self.pending = self.pending[n:]
        return n


@contextlib.contextmanager
def guarded_stdin() -> Iterator[None]:
    """``sys.stdin`` reads the host's messages through the guard; fd 0 reads the null device meanwhile."""
    private = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    source = os.fdopen(private, "rb", buffering=0, closefd=False)
    saved = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BufferedReader(_GuardedLines(source)), encoding="utf-8", errors="replace")
    try:
        yield
    finally:
        sys.stdin = saved
        os.dup2(private, 0)
        os.close(private)


async def refuse_marked(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
    """Server middleware: answer a request the stdio guard replaced with its refusal."""
    params = ctx.params if isinstance(ctx.params, dict) else {}
    meta = params.get("_meta")
    if ctx.method == "ping" and isinstance(meta, dict) and isinstance(meta.get(REFUSED_META), str):
        raise MCPError(INVALID_REQUEST, meta[REFUSED_META])
    return await call_next(ctx)


async def run_stdio(mcp: MCPServer[Any]) -> None:
    """``mcp.run_stdio_async()`` over the guarded stdin; returns when the host closes stdin."""
    with guarded_stdin():
        await mcp.run_stdio_async()
