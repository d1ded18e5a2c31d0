"""bosun's log records, forwarded as MCP ``notifications/message`` to the clients that asked for them.

Two eras, one rule (a client gets what it asked for, nothing else, and never a secret):

- 2025 handshake sessions ask with ``logging/setLevel``: from then on every ``bosun.*`` record
  at or above that level reaches that session (and no other). A record logged while one of the
  session's own requests runs rides that request's stream (an HTTP client without a standalone
  stream still sees it); any other record goes on the session's standalone stream.
- 2026-07-28 has no ``logging/setLevel``: a request opts in with the ``_meta`` log level, and the
  records logged while that request runs ride its stream.

Every message is scrubbed with the redactor before it leaves, like everything bosun stores. The
daemon's own stderr keeps its level: lowering the ``bosun`` logger for a session that wants
``debug`` adds a filter on the root handlers so the terminal does not fill up with it.
Records are sent from a task on the server's loop (``emit`` may run on a worker thread); the
request-scoped ones are awaited before the request answers, so they arrive before the result.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import weakref
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import mcp.types as types
from mcp.server import MCPServer
from mcp.server.context import CallNext, ServerRequestContext
from mcp.types import LOG_LEVEL_META_KEY

from bosun.core.redact import default_redactor
from bosun.server.protocol.sessions import connection_of, is_modern, schedule_on, serve_legacy_method

ROOT_LOGGER = "bosun"
# MCP (RFC 5424) levels as Python level numbers; notice, alert and emergency sit between Python's
LEVELS: dict[str, int] = {"debug": logging.DEBUG, "info": logging.INFO, "notice": 25, "warning": logging.WARNING,
                          "error": logging.ERROR, "critical": logging.CRITICAL, "alert": 55, "emergency": 60}


def mcp_level(levelno: int) -> str:
    """The MCP level of a Python record: the highest MCP level at or below it."""
    name = "debug"
    for candidate, number in LEVELS.items():
        if levelno >= number:
            name = candidate
    return name


@dataclass
class _Request:
    """The request running in this context: where its records go, and the sends to await."""

    session: Any
    request_id: Any
    connection: Any
    threshold: int | None  # 2026 opt-in level; None: not opted in (or a handshake session)
    pending: list[asyncio.Task[None]] = field(default_factory=list)


_current: contextvars.ContextVar[_Request | None] = contextvars.ContextVar("bosun_log_request", default=None)


class _KeepStderrLevel(logging.Filter):
    """On the root handlers: bosun records below the daemon's own level stay out of stderr."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.name.startswith(ROOT_LOGGER) and record.levelno < self.level)


class LogForwarder(logging.Handler):
    """A handler on the ``bosun`` logger that forwards each record to the sessions that asked."""

    def __init__(self, scrub: Callable[[str], str] | None = None) -> None:
        super().__init__(logging.DEBUG)
        self.scrub = scrub or default_redactor().scrub
        self.logger = logging.getLogger(ROOT_LOGGER)
        self.sessions: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self.opt_ins: Counter[int] = Counter()  # thresholds of 2026 requests running now
        self.loop: asyncio.AbstractEventLoop | None = None
        self.own_level: int | None = None  # the logger's effective level before any session lowered it
        self.saved_level = logging.NOTSET  # and its own setting, put back when nobody wants more
        self.stderr_filter: _KeepStderrLevel | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.setFormatter(logging.Formatter("%(message)s"))

    # -- wiring ------------------------------------------------------------------------------

    def install(self) -> None:
        if self not in self.logger.handlers:
            self.logger.addHandler(self)

    def uninstall(self) -> None:
        self.logger.removeHandler(self)
        self._restore_level()

    async def set_level(self, ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams) -> types.EmptyResult:
        """``logging/setLevel``: this session gets records at ``params.level`` and above from now on."""
        self.loop = asyncio.get_running_loop()
        connection = connection_of(ctx)
        if connection not in self.sessions:
            stack = getattr(connection, "exit_stack", None)
            if stack is not None:  # the session ends: stop sending to it (the weak key would too, later)
                stack.callback(self._forget, weakref.ref(connection))
        self.sessions[connection] = LEVELS[params.level]
        self._apply_level()
        return types.EmptyResult()

    def _forget(self, ref: weakref.ref[Any]) -> None:
        connection = ref()
        if connection is not None:
            self.sessions.pop(connection, None)
        self._apply_level()

    def middleware(self) -> Any:
        """Server middleware: records logged while a request runs can ride that request's stream."""

        async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
            if ctx.request_id is None:
                return await call_next(ctx)
            threshold = None
            if is_modern(ctx):
                asked = (ctx.meta or {}).get(LOG_LEVEL_META_KEY)  # type: ignore[union-attr]
                threshold = LEVELS.get(asked) if isinstance(asked, str) else None
            if threshold is None and not self.sessions:
                return await call_next(ctx)  # nobody listens: no bookkeeping on the hot path
            self.loop = asyncio.get_running_loop()
            request = _Request(ctx.session, ctx.request_id, connection_of(ctx), threshold)
            token = _current.set(request)
            if threshold is not None:
                self.opt_ins[threshold] += 1
                self._apply_level()
            try:
                return await call_next(ctx)
            finally:
                _current.reset(token)
                if threshold is not None:
                    self.opt_ins[threshold] -= 1
                    if not self.opt_ins[threshold]:
                        del self.opt_ins[threshold]
                    self._apply_level()
                if request.pending:  # the request's log lines go out before its answer
                    await asyncio.gather(*request.pending, return_exceptions=True)

        return middleware

    # -- the logger's level ---------------------------------------------------------------------

    def _wanted(self) -> int | None:
        levels = list(self.sessions.values()) + list(self.opt_ins)
        return min(levels) if levels else None

    def _apply_level(self) -> None:
        wanted = self._wanted()
        if self.own_level is None:
            self.own_level = self.logger.getEffectiveLevel()
            self.saved_level = self.logger.level
        if wanted is None or wanted >= self.own_level:
            self._restore_level()
            return
        if self.stderr_filter is None:
            self.stderr_filter = _KeepStderrLevel(self.own_level)
            for handler in logging.getLogger().handlers:
                handler.addFilter(self.stderr_filter)
        self.logger.setLevel(wanted)

    def _restore_level(self) -> None:
        if self.own_level is None:
            return
        self.logger.setLevel(self.saved_level)
        if self.stderr_filter is not None:
            for handler in logging.getLogger().handlers:
                handler.removeFilter(self.stderr_filter)
            self.stderr_filter = None
        self.own_level = None

    # -- forwarding -------------------------------------------------------------------------------

    def emit(self, record: logging.LogRecord) -> None:
        request = _current.get()
        targets = [c for c, level in list(self.sessions.items()) if record.levelno >= level]
        scoped = request is not None and request.threshold is not None and record.levelno >= request.threshold
        if not targets and not scoped:
            return
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        try:
            params = {"level": mcp_level(record.levelno), "logger": record.name, "data": self.scrub(self.format(record))}
        except Exception:
            self.handleError(record)
            return
        sends: list[tuple[Any, Any]] = []  # (session for a request-scoped send | None, connection)
        if scoped and request is not None:
            sends.append((request, None))
        for connection in targets:
            same = request is not None and request.connection is connection
            sends.append((request if same else None, connection))
        for req, connection in sends:
            self._schedule(loop, self._send(req, connection, params), req)

    def _schedule(self, loop: asyncio.AbstractEventLoop, coro: Any, request: _Request | None) -> None:
        schedule_on(loop, coro, self.tasks, request.pending.append if request is not None else None)

    @staticmethod
    async def _send(request: _Request | None, connection: Any, params: dict[str, Any]) -> None:
        notification = types.LoggingMessageNotification(params=types.LoggingMessageNotificationParams(**params))
        try:
            if request is not None:
                await request.session.send_notification(notification, related_request_id=request.request_id)
            else:
                await connection.notify("notifications/message", params)
        except Exception:  # a client that went away loses its log line, nothing else
            pass


def register(mcp: MCPServer[Any], forwarder: LogForwarder) -> None:
    """Serve ``logging/setLevel`` (2025 sessions; served as middleware, the SDK's public seam: 2026 requests
    pass on to the SDK's -32601) and route log records per session (see the module docstring)."""
    mcp.middleware.append(serve_legacy_method("logging/setLevel", types.SetLevelRequestParams, forwarder.set_level))
    mcp.middleware.append(forwarder.middleware())
