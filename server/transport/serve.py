"""Run the daemon: streamable HTTP, stdio, or both, over one Engine.

HTTP binds its own socket first so the real port (``--port 0`` picks a free
one) is known before ``daemon.json`` is written. Anything bound beyond
loopback requires a bearer token.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from mcp.server import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

import bosun
from bosun.server.app import create_server
from bosun.server.config import Config
from bosun.server.dashboard.fleet import heartbeat
from bosun.server.engine import Engine
from bosun.server.transport.daemon_file import (
    DaemonRunning,
    hold_serve_lock,
    remove_daemon_file,
    write_daemon_file,
)
from bosun.server.transport.http_guard import HttpGuard
from bosun.server.transport.listen import ServeError, bind_socket, bound_address, url_host
from bosun.server.transport.stdio import run_stdio
from bosun.server.transport.workers import SessionTag, WorkerLink, serve_handed
from bosun.store.private import tighten_home

log = logging.getLogger("bosun.serve")

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]
PUBLIC_PATHS = ("/healthz",)
DEFAULT_MAX_BODY = 33 * 1024 * 1024  # two default-size payloads JSON-escaped, plus the envelope
BODY_SPOOL_DIR = "spool"  # under BOSUN_HOME (0700): large request bodies wait there in unlinked 0600 files
KEEP_ALIVE_S = 75  # idle HTTP keep-alive, seconds


def body_limit(max_payload_bytes: int) -> int:
    """The one HTTP body limit, from BOSUN_MAX_PAYLOAD_BYTES: a payload JSON-escaped (text escapes to
    at most ~2x; observe names the field when the payload itself is over) plus 1 MiB of envelope.
    Both the guard and the SDK's own body limit (4 MiB by default) get it."""
    return 2 * max_payload_bytes + (1 << 20)


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class BearerAuth:
    """Plain ASGI middleware: every path but /healthz needs ``Authorization: Bearer <token>``.

    The SDK's OAuth resource-server mode would advertise an authorization
    server bosun does not have; a shared secret is the honest model here.
    """

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("path") not in PUBLIC_PATHS:
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")],
                    }
                )
                await send({"type": "http.response.body", "body": b'{"error":"missing or wrong bearer token"}'})
                return
        await self.app(scope, receive, send)


def http_app(mcp: MCPServer[Any], host: str, token: str | None, max_body: int = DEFAULT_MAX_BODY,
             session_idle_timeout_s: float | None = None, max_sessions: int | None = None,
             spool_dir: Path | None = None, big_observe: int = 0) -> Any:
    """The Starlette app behind every HTTP route, with the same Host/Origin/body rules (and token) for all."""
    if not is_loopback(host) and not token:
        raise ServeError(f"binding to {host} exposes bosun beyond this machine: set BOSUN_TOKEN (a bearer token)")
    security = None
    if not is_loopback(host):
        # bearer auth protects a non-loopback bind; Host-header allowlists would break sidecar names
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    sessions: dict[str, Any] = {}
    if session_idle_timeout_s is not None:
        sessions["session_idle_timeout"] = session_idle_timeout_s
    if max_sessions is not None:
        sessions["max_sessions"] = max_sessions
    app = mcp.streamable_http_app(host=host, transport_security=security, max_request_body_size=max_body, **sessions)
    guarded = HttpGuard(app, loopback=is_loopback(host), max_body=max_body, spool_dir=spool_dir,
                        big_observe=big_observe)
    return BearerAuth(guarded, token) if token else guarded


async def serve(
    config: Config,
    *,
    http: bool = True,
    stdio: bool = False,
    engine: Engine | None = None,
    write_daemon: bool = True,
) -> None:
    """Serve until stopped: SIGTERM/SIGINT, or stdin EOF when stdio is on.

    A worker of ``bosun serve --workers N`` (``BOSUN_WORKER_FD`` set by its supervisor) takes no lock,
    binds nothing and writes no ``daemon.json``: the supervisor does, and hands it connections."""
    link = WorkerLink.from_env() if http else None
    if link is not None:
        write_daemon = False
    lock = None
    if http and write_daemon:  # one daemon per home: refuse before anything is written
        try:
            lock = hold_serve_lock(config.home)
        except DaemonRunning as exc:
            raise ServeError(str(exc)) from exc
    try:
        await _serve(config, http, stdio, engine or Engine(config), write_daemon, link)
    finally:
        if lock is not None:
            lock.close()  # the kernel would drop it at exit anyway; closing says we are done


async def _serve(config: Config, http: bool, stdio: bool, engine: Engine, write_daemon: bool,
                 link: WorkerLink | None = None) -> None:
    tighten_home(config.home)  # 0700, and 0600 for the log and lock files a bridge created before us
    mcp = create_server(engine)
    stop = anyio.Event()
    if http:  # fail before anything starts: a clear ServeError, not a task-group traceback
        app = http_app(mcp, config.host, config.token, body_limit(config.max_payload_bytes),
                       config.session_idle_timeout_s, config.max_sessions, config.home / BODY_SPOOL_DIR,
                       config.big_observe_bytes)
        if link is not None:
            app = SessionTag(app, link.index)
        sock = bind_socket(config.host, config.port) if link is None else None
        url = f"http://{url_host(config.host)}:{sock.getsockname()[1]}/mcp" if sock is not None else ""
    async with anyio.create_task_group() as tg:
        tg.start_soon(_watch_signals, stop)
        if http:
            tg.start_soon(heartbeat, engine, link.index if link is not None else None, stop)
            uv = uvicorn.Server(
                uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                               timeout_graceful_shutdown=0.5,  # type: ignore[arg-type]  # uvicorn takes a float
                               # longer than a client pool keeps an idle connection (httpx: 5 s), so a
                               # client never reuses one the server has just closed
                               timeout_keep_alive=KEEP_ALIVE_S)
            )
            # bosun handles SIGTERM/SIGINT itself (stopping stdio and HTTP together)
            uv.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]

            async def run_http() -> None:
                try:
                    await uv.serve(sockets=[sock] if sock is not None else [])
                finally:
                    stop.set()

            async def run_handed() -> None:  # a worker: connections come from the supervisor
                assert link is not None
                while not uv.started and not stop.is_set():
                    await anyio.sleep(0.01)
                try:
                    await serve_handed(link, uv)
                finally:
                    stop.set()  # the supervisor is gone

            async def stop_http() -> None:
                await stop.wait()
                uv.should_exit = True

            tg.start_soon(run_http)
            tg.start_soon(stop_http)
            if link is not None:
                tg.start_soon(run_handed)
            if write_daemon:
                while not uv.started and not stop.is_set():
                    await anyio.sleep(0.01)
                write_daemon_file(config.home, url, config.token, bosun.__version__)
            if sock is not None:
                bound = sock.getsockname()
                log.info("bosun %s serving %s (listening on %s, home %s)", bosun.__version__, url,
                         bound_address(bound[0], bound[1]), config.home)
            else:
                log.info("bosun %s worker %d (pid %d) serving for its supervisor, home %s", bosun.__version__,
                         link.index if link else -1, os.getpid(), config.home)
        try:
            if stdio:
                await run_stdio(mcp)  # the SDK's stdio with the nesting rule; returns when the host closes stdin
                _divert_stdout()
                stop.set()
            else:
                await stop.wait()
        finally:
            if http and write_daemon:
                remove_daemon_file(config.home)
            stop.set()
            tg.cancel_scope.deadline = anyio.current_time() + 8  # uvicorn drains in <= 0.5 s, the Engine closes in <= ~2 s


def _divert_stdout() -> None:
    """After the stdio session ends, point fd 1 at stderr for the rest of the process.

    The SDK restores fd 1 when it stops serving; a model load still running in a
    worker thread (or a library's atexit print) must not reach the host's pipe.
    """
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    os.dup2(2, 1)
    sys.stdout = sys.stderr


async def _watch_signals(stop: anyio.Event) -> None:
    """Set ``stop`` on SIGTERM/SIGINT/SIGHUP; return as soon as ``stop`` is set either way."""
    async with anyio.create_task_group() as tg:

        async def receive() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
                async for _ in signals:
                    stop.set()
                    return

        tg.start_soon(receive)
        await stop.wait()
        tg.cancel_scope.cancel()
