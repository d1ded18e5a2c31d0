"""stdio with the HTTP transport's nesting rule: a message nested too deep is answered, not dropped.

The SDK's stdio transport parses each line with pydantic, whose JSON parser stops at ~200
levels; the error has no request id, so the SDK drops it and the host waits forever (before this check,
a tools/call nested deeper than ~200 levels never got an answer over ``serve --stdio`` and
``stdio --standalone``). Here each line is measured before the SDK sees it (``json_depth``, no
recursion). A line deeper than ``MAX_DEPTH`` is replaced by a shallow ``ping`` with the same id
that carries the refusal in ``_meta``; the ``refuse_marked`` middleware answers it with the error
HTTP gives (400 there) as JSON-RPC ``-32600``. Everything else is the SDK's own stdio transport
(``run_stdio_async``): its stdout claim, parser and writer.

Like the SDK, the real stdin is moved off fd 0 while serving (fd 0 reads the null device), so a
child process cannot read the host's messages.

Under ``bosun stdio --standalone`` the first lines were already read (and the handshake perhaps answered
with the SDK's recorded answers) by ``early_init`` while the process imported: the SDK gets those bytes
first, unchanged, and ``answered_once_stdout`` keeps its own answers to them from being written twice.
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
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from bosun.server.transport import early_init
from bosun.server.transport.json_scan import MAX_DEPTH, json_depth, top_level_id

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
    """The wire after ``early_init`` read its first line: that line (and what came with it), then the wire.
    The hand-over waits for the first line in the SDK's reader thread, never on the event loop."""

    def __init__(self, early: early_init.EarlyInit) -> None:
        super().__init__()
        self.early = early
        self.prefix: bytes | None = None
        self.fd = early.read_fd

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.prefix is None:
            self.prefix, self.fd = self.early.take()
        if self.prefix:
            n = min(len(buffer), len(self.prefix))
            buffer[:n] = self.prefix[:n]
            self.prefix = self.prefix[n:]
            return n
        data = os.read(self.fd, len(buffer))
        buffer[: len(data)] = data
        return len(data)


class _GuardedLines(io.RawIOBase):
    """A binary stream over the host's stdin that hands the SDK each line through ``guard_line``
    (and, under ``early_init``, shows the handshake's lines to ``note_line`` first)."""

    def __init__(self, source: Any, early: early_init.EarlyInit | None = None) -> None:
        super().__init__()
        self.source = source
        self.pending = b""
        self.early = early
        self.offset = 0  # bytes of the wire read so far

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self.pending:
            line = self.source.readline()
            if not line:
                return 0
            if self.early is not None:
                self.offset += len(line)
                if self.early.watching:
                    self.early.note_line(line, self.offset)
                else:
                    self.early = None
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
        source = io.BufferedReader(_PrefixedReader(early))
    else:
        source = os.fdopen(private, "rb", buffering=0, closefd=False)
    saved = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BufferedReader(_GuardedLines(source, early)), encoding="utf-8", errors="replace")
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


class _AnswerOnceWriter(io.RawIOBase):
    """The wire (a copy of fd 1) for the SDK's stdio writer, minus its answers to the handshake requests
    ``early_init`` already answered: each line is passed on whole, and the SDK's answer to each request the
    early reader registered goes to ``EarlyInit.settle_id`` (compared with the early line, recorded for the
    next start) instead. Once the handshake is over and settled, bytes pass straight through."""

    def __init__(self, fd: int, early: early_init.EarlyInit) -> None:
        super().__init__()
        self.fd = fd
        self.early = early
        self.partial = b""
        self.settled = False

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        size = len(chunk)
        if not self.settled and not self.early.expecting():
            self.settled = True  # nothing more to check, keep back or record
            chunk, self.partial = self.partial + chunk, b""
        if self.settled:
            self._out(chunk)
            return size
        self.partial += chunk
        while not self.settled and b"\n" in self.partial:
            line, _, self.partial = self.partial.partition(b"\n")
            if not self._drop(line):
                self._out(line + b"\n")
            self.settled = not self.early.expecting()
        if self.settled and self.partial:
            self.partial, rest = b"", self.partial
            self._out(rest)
        return size

    def _drop(self, line: bytes) -> bool:
        try:
            message = json.loads(line)
        except ValueError:
            return False
        if not isinstance(message, dict) or "method" in message or "id" not in message:
            return False
        id_text = early_init.id_json(message["id"])
        if id_text is None:
            return False
        return bool(self.early.settle_id(id_text, line.decode(errors="replace"), "result" in message,
                                         HANDSHAKE_PROTOCOL_VERSIONS))

    def _out(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]


@contextlib.contextmanager
def answered_once_stdout(early: early_init.EarlyInit) -> Iterator[None]:
    """``sys.stdout`` writes to the wire through ``_AnswerOnceWriter``; fd 1 points at stderr meanwhile, as
    the SDK's own claim of fd 1 does (it serves a stream that is not fd 1 in place: this one)."""
    private = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    os.dup2(2, 1)
    saved = sys.stdout
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(_AnswerOnceWriter(private, early)), encoding="utf-8")
    try:
        yield
    finally:
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        sys.stdout = saved
        os.dup2(private, 1)
        os.close(private)


async def run_stdio(mcp: MCPServer[Any]) -> None:
    """``mcp.run_stdio_async()`` over the guarded stdin; returns when the host closes stdin.

    Under ``early_init`` its stdout is ``answered_once_stdout``: the early answer is not written twice."""
    early = early_init.active()
    with guarded_stdin(early), answered_once_stdout(early) if early is not None else contextlib.nullcontext():
        await mcp.run_stdio_async()
