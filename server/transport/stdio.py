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

Under ``bosun stdio --standalone`` the first line was already read (and ``initialize`` perhaps answered
with the SDK's recorded answer) by ``early_init`` while the process imported: the SDK gets that line
first, unchanged, and ``AnswerOnce`` keeps its own answer to it from being written twice.
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
from typing import Any

from mcp import MCPError
from mcp.server import MCPServer
from mcp.server.context import CallNext, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCError, JSONRPCResponse
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from bosun.server.transport import early_init
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


class _PrefixedReader(io.RawIOBase):
    """Bytes already read from the wire (by ``early_init``), then the wire itself."""

    def __init__(self, prefix: bytes, fd: int) -> None:
        super().__init__()
        self.prefix = prefix
        self.fd = fd

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.prefix:
            n = min(len(buffer), len(self.prefix))
            buffer[:n] = self.prefix[:n]
            self.prefix = self.prefix[n:]
            return n
        data = os.read(self.fd, len(buffer))
        buffer[: len(data)] = data
        return len(data)


class _GuardedLines(io.RawIOBase):
    """A binary stream over the host's stdin that hands the SDK each line through ``guard_line``."""

    def __init__(self, source: Any) -> None:
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
def guarded_stdin(early: early_init.EarlyInit | None = None) -> Iterator[None]:
    """``sys.stdin`` reads the host's messages through the guard; fd 0 reads the null device meanwhile.

    With ``early``, the wire is its copy of fd 0, and its first line (already read) comes first."""
    private = early.read_fd if early is not None else fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    source: Any
    if early is not None:
        source = io.BufferedReader(_PrefixedReader(*early.take()))
    else:
        source = os.fdopen(private, "rb", buffering=0, closefd=False)
    saved = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BufferedReader(_GuardedLines(source)), encoding="utf-8", errors="replace")
    try:
        yield
    finally:
        sys.stdin = saved
        os.dup2(private, 0)
        if early is None:
            os.close(private)


async def refuse_marked(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
    """Server middleware: answer a request the stdio guard replaced with its refusal."""
    params = ctx.params if isinstance(ctx.params, dict) else {}
    meta = params.get("_meta")
    if ctx.method == "ping" and isinstance(meta, dict) and isinstance(meta.get(REFUSED_META), str):
        raise MCPError(INVALID_REQUEST, meta[REFUSED_META])
    return await call_next(ctx)


class AnswerOnce:
    """The SDK's write stream, with its answer to an ``initialize`` already answered early left unwritten
    (after ``EarlyInit.settle`` compared it with the early line, and recorded it for the next start)."""

    def __init__(self, stream: Any, early: early_init.EarlyInit) -> None:
        self.stream = stream
        self.early = early
        self.settled = False

    async def send(self, item: SessionMessage) -> None:
        message = item.message
        if not self.settled and isinstance(message, JSONRPCResponse | JSONRPCError) and \
                self.early.request_id is not None and message.id == self.early.request_id and \
                type(message.id) is type(self.early.request_id):
            self.settled = True
            line = message.model_dump_json(by_alias=True, exclude_unset=True)  # as the SDK's stdio writer
            if self.early.settle(line, isinstance(message, JSONRPCResponse), HANDSHAKE_PROTOCOL_VERSIONS):
                return
        await self.stream.send(item)

    async def aclose(self) -> None:
        await self.stream.aclose()

    async def __aenter__(self) -> AnswerOnce:
        await self.stream.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self.stream.__aexit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


async def run_stdio(mcp: MCPServer[Any]) -> None:
    """``mcp.run_stdio_async()`` over the guarded stdin; returns when the host closes stdin.

    Under ``early_init`` it is that method's body with the write stream wrapped in ``AnswerOnce``."""
    early = early_init.active()
    with guarded_stdin(early):
        if early is None:
            await mcp.run_stdio_async()
            return
        server = mcp._lowlevel_server
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, AnswerOnce(write_stream, early), server.create_initialization_options())
