"""``bosun serve --workers N``: N daemon processes behind one port, each with its own warm model.

One asyncio process uses one core; a host has several. The supervisor (this module's
``run_workers``) binds the port, starts N ``bosun serve`` workers and hands each accepted
connection to one of them (the socket itself, over a unix ``SOCK_SEQPACKET`` link with
``SCM_RIGHTS``): no byte of the traffic passes through the supervisor, so it costs one peek and
one ``sendmsg`` per connection, not per request.

Why not plain ``SO_REUSEPORT``: the kernel picks the process at the SYN, by address hash, before any
byte of HTTP is read. An MCP session lives in the memory of the process that answered its
``initialize``; the client's next connection (a second pool connection, the GET stream, a reconnect)
would land on another process and get 404. So the supervisor peeks at the first request's headers
(``MSG_PEEK``: nothing is consumed) and routes on ``Mcp-Session-Id``:

- each worker prefixes the session ids it issues with ``w<index>-`` (``SessionTag``, an ASGI wrapper
  that strips the prefix again on the way in, so the SDK sees its own ids);
- a connection whose first request carries ``w<i>-...`` goes to worker ``i``; one without a session
  id (an ``initialize``, ``/healthz``, the dashboard) goes to the next worker in turn;
- a worker that died is started again under the same index; the sessions it held are gone, and its
  clients get the SDK's 404 for an unknown session, which is what a client re-establishes on (the
  ``bosun stdio`` bridge does so by itself, as after a daemon restart).

A keep-alive connection stays with the worker that got it; MCP clients keep one HTTP client per
session, so one connection carries one session. (A client that multiplexed sessions over one
connection would get 404 for the ones another worker owns; the HAProxy setup routes per request.)

The workers share the state only through PostgreSQL: N processes on one SQLite file are not proven
safe here (writes to one task are serialised inside a daemon, not across processes, and a
subscription would not hear another process's writes), so ``--workers`` above 1 requires
``BOSUN_DATABASE_URL`` and says so. Everything per-process (the model, the session table, the
admission limit) is per worker; ``BOSUN_HOME`` is shared (the supervisor holds ``serve.lock`` and
writes ``daemon.json``; the workers append to the one telemetry file).
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("bosun.serve")

ENV_FD = "BOSUN_WORKER_FD"  # set in a worker's environment: the link's file descriptor
ENV_INDEX = "BOSUN_WORKER_INDEX"
SESSION_HEADER = b"mcp-session-id"
PEEK_BYTES = 16384  # a first request's header block fits (the SDK's are < 1 KiB)
PEEK_TIMEOUT_S = 30.0  # a connection that sends no complete header block by then is closed
RESPAWN_MIN_S = 0.5
RESPAWN_MAX_S = 30.0
EARLY_DEATHS = 3  # a worker that dies this many times in a row before it is ready stops the supervisor
STOP_GRACE_S = 12.0  # a worker drains (uvicorn) and closes its Engine within ~8 s; then SIGKILL
MAX_WORKERS = 64
_TAG = re.compile(rb"^w(\d{1,3})-")


class WorkersError(RuntimeError):
    """``--workers`` cannot start as configured (the message says why)."""


def check_workers(workers: int, database_url: str | None, stdio: bool) -> None:
    """Refuse what N processes cannot do, with the reason and the fix."""
    if not 1 <= workers <= MAX_WORKERS:
        raise WorkersError(f"--workers must be between 1 and {MAX_WORKERS}, got {workers}")
    if workers > 1 and not database_url:
        raise WorkersError(
            f"--workers {workers} needs BOSUN_DATABASE_URL (PostgreSQL): {workers} processes on one SQLite file "
            "are not proven safe (writes to one task are serialised inside a daemon, not across processes, and "
            "a subscription would not hear another process's writes); set BOSUN_DATABASE_URL=postgresql://... "
            "or run one worker")
    if workers > 1 and stdio:
        raise WorkersError("--workers serves HTTP only; drop --stdio (a stdio host runs `bosun stdio`, which "
                           "attaches to this daemon)")


def owner_of(session_id: bytes) -> int | None:
    """The worker index a session id was issued by (``w<i>-``), or None."""
    m = _TAG.match(session_id)
    return int(m.group(1)) if m else None


def first_session_id(head: bytes) -> bytes | None:
    """The ``Mcp-Session-Id`` of the first request in ``head`` (its header block, maybe partial)."""
    for line in head.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]:
        name, sep, value = line.partition(b":")
        if sep and name.strip().lower() == SESSION_HEADER:
            return value.strip()
    return None


# -- the worker side ------------------------------------------------------------------------------


class SessionTag:
    """ASGI wrapper of a worker: session ids leave as ``w<index>-<id>`` and come back without the prefix."""

    def __init__(self, app: Any, index: int) -> None:
        self.app = app
        self.prefix = f"w{index}-".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = scope.get("headers") or []
        if any(k == SESSION_HEADER for k, _ in headers):
            scope = dict(scope)
            scope["headers"] = [(k, _untag(v) if k == SESSION_HEADER else v) for k, v in headers]

        async def tagged(message: Any) -> None:
            if message.get("type") == "http.response.start":
                out = [(k, self.prefix + v if k.lower() == SESSION_HEADER else v)
                       for k, v in message.get("headers") or []]
                message = {**message, "headers": out}
            await send(message)

        await self.app(scope, receive, tagged)


def _untag(value: bytes) -> bytes:
    m = _TAG.match(value)
    return value[m.end():] if m else value


@dataclass
class WorkerLink:
    """A worker's end of the supervisor's link: connections arrive on it; EOF means the supervisor is gone."""

    sock: socket.socket
    index: int

    @classmethod
    def from_env(cls) -> WorkerLink | None:
        fd = os.environ.get(ENV_FD)
        if not fd:
            return None
        sock = socket.socket(fileno=int(fd))
        sock.setblocking(False)
        return cls(sock, int(os.environ.get(ENV_INDEX, "0")))

    def ready(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.send(b"ready")

    async def serve(self, accept: Callable[[socket.socket], Awaitable[None]]) -> None:
        """Take every connection the supervisor hands over (``accept`` serves it) until the link closes."""
        while True:
            try:
                msg, fds, _, _ = socket.recv_fds(self.sock, 16, 4)
            except BlockingIOError:
                await _ready(self.sock, None, writer=False)
                continue
            except OSError:
                return
            if not msg and not fds:
                return  # the supervisor exited (or killed): stop serving, as on SIGTERM
            for fd in fds:
                await accept(socket.socket(fileno=fd))


async def serve_handed(link: WorkerLink, uv: Any) -> None:
    """Serve the connections ``link`` hands over with uvicorn's own protocol (after ``uv`` started
    with no listening socket); returns when the supervisor goes away."""
    loop = asyncio.get_running_loop()
    config = uv.config

    def protocol() -> asyncio.Protocol:
        proto: asyncio.Protocol = config.http_protocol_class(config=config, server_state=uv.server_state,
                                                             app_state=uv.lifespan.state)
        return proto

    async def accept(sock: socket.socket) -> None:
        sock.setblocking(False)
        try:
            await loop.connect_accepted_socket(protocol, sock)
        except OSError:
            sock.close()  # the client went away between the supervisor's peek and here

    link.ready()
    await link.serve(accept)


# -- the supervisor -------------------------------------------------------------------------------


@dataclass
class Worker:
    index: int
    proc: subprocess.Popen[bytes] | None = None
    link: socket.socket | None = None
    ready: bool = False
    early_deaths: int = 0
    started_at: float = 0.0


@dataclass
class Supervisor:
    """Starts, watches and stops the workers; routes each accepted connection to one of them."""

    n: int
    argv: list[str]
    env: dict[str, str]
    workers: list[Worker] = field(default_factory=list)
    stopping: bool = False
    failed: str | None = None
    handed: int = 0
    _turn: int = 0
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    def spawn(self, w: Worker) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {**self.env, ENV_FD: str(theirs.fileno()), ENV_INDEX: str(w.index)}
        w.proc = subprocess.Popen(self.argv, env=env, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL)
        theirs.close()
        ours.setblocking(False)
        w.link, w.ready, w.started_at = ours, False, time.monotonic()
        asyncio.get_running_loop().add_reader(ours, self._on_link, w)
        log.info("worker %d started: pid %d", w.index, w.proc.pid)

    def _on_link(self, w: Worker) -> None:
        assert w.link is not None
        try:
            msg = w.link.recv(64)
        except BlockingIOError:
            return
        except OSError:
            msg = b""
        if msg == b"ready":
            w.ready, w.early_deaths = True, 0
            self._changed.set()
            return
        if not msg:  # the worker exited: its end of the link closed with it
            asyncio.get_running_loop().remove_reader(w.link)
            w.link.close()
            w.link = None
            asyncio.get_running_loop().create_task(self._reap(w))

    async def _reap(self, w: Worker) -> None:
        assert w.proc is not None
        code = await asyncio.to_thread(w.proc.wait)
        self._changed.set()
        if self.stopping:
            return
        w.early_deaths = w.early_deaths + 1 if not w.ready else 1
        if not w.ready and w.early_deaths >= EARLY_DEATHS:
            self.failed = f"worker {w.index} exited with {code} {EARLY_DEATHS} times before it was ready"
            return
        delay = min(RESPAWN_MAX_S, RESPAWN_MIN_S * 2 ** (w.early_deaths - 1))
        log.warning("worker %d (pid %d) exited with %s; starting it again in %.1fs", w.index, w.proc.pid, code, delay)
        await asyncio.sleep(delay)
        if not self.stopping:
            self.spawn(w)

    def live(self) -> list[Worker]:
        return [w for w in self.workers if w.link is not None]

    def choose(self, session_id: bytes | None) -> Worker | None:
        """The session's worker if it is alive; else the next live worker in turn (ready ones first)."""
        live = self.live()
        if not live:
            return None
        owner = owner_of(session_id) if session_id else None
        if owner is not None and owner < len(self.workers) and self.workers[owner].link is not None:
            return self.workers[owner]
        pool = [w for w in live if w.ready] or live
        self._turn += 1
        return pool[self._turn % len(pool)]

    async def hand(self, conn: socket.socket) -> None:
        """Peek at the first request's headers, pick the worker, hand it the socket."""
        try:
            head = await _peek_head(conn)
            if head is None:
                return
            for _ in range(2):  # a worker that died just now: the next one
                w = self.choose(first_session_id(head))
                if w is None or w.link is None:
                    await asyncio.sleep(0.2)  # every worker is restarting
                    continue
                try:
                    await _send_fd(w.link, conn.fileno())
                    self.handed += 1
                    return
                except OSError:
                    continue
        finally:
            conn.close()  # the worker holds its own copy now

    async def wait_ready(self) -> None:
        while not self.failed and not all(w.ready for w in self.workers):
            self._changed.clear()
            await self._changed.wait()

    async def stop(self) -> None:
        """SIGTERM every worker, wait for them (SIGKILL after ``STOP_GRACE_S``)."""
        self.stopping = True
        procs = [w.proc for w in self.workers if w.proc is not None]
        for p in procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for p in procs:
            try:
                await asyncio.to_thread(p.wait, max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("worker pid %d did not stop within %.0fs; killing it", p.pid, STOP_GRACE_S)
                p.kill()
                await asyncio.to_thread(p.wait)
        for w in self.workers:
            if w.link is not None:
                with contextlib.suppress(Exception):
                    asyncio.get_running_loop().remove_reader(w.link)
                w.link.close()
                w.link = None


async def _ready(sock: socket.socket, timeout: float | None, writer: bool = False) -> bool:
    """Until ``sock`` is readable (writable with ``writer``); False when ``timeout`` passed first."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not fut.done():
            fut.set_result(None)

    (loop.add_writer if writer else loop.add_reader)(sock, wake)
    try:
        await asyncio.wait_for(fut, timeout)
        return True
    except TimeoutError:
        return False
    finally:
        (loop.remove_writer if writer else loop.remove_reader)(sock)


async def _peek_head(conn: socket.socket) -> bytes | None:
    """The bytes received so far, up to the end of the first header block (nothing consumed); None when
    the client closed or sent no complete header block in time."""
    deadline = time.monotonic() + PEEK_TIMEOUT_S
    while True:
        try:
            head: bytes | None = conn.recv(PEEK_BYTES, socket.MSG_PEEK)
        except BlockingIOError:
            head = None
        except OSError:
            return None
        if head == b"":
            return None  # closed before a request
        if head and (b"\r\n\r\n" in head or len(head) >= PEEK_BYTES):
            return head
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        if head is None:
            if not await _ready(conn, left):
                return None
        else:
            await asyncio.sleep(0.005)  # a partial header block: the socket stays readable while it waits unread


async def _send_fd(link: socket.socket, fd: int) -> None:
    while True:
        try:
            link.sendmsg([b"c"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
            return
        except BlockingIOError:
            if not await _ready(link, 10, writer=True):
                raise OSError("the worker takes no connection") from None


def worker_env(config: Any) -> dict[str, str]:
    """The workers' environment: this one, with the resolved settings they must share."""
    env = dict(os.environ)
    env["BOSUN_HOME"] = str(config.home)
    env["BOSUN_HOST"] = config.host
    env["BOSUN_DATABASE_URL"] = config.database_url or ""
    if config.policies:
        env["BOSUN_POLICIES"] = os.pathsep.join(str(p) for p in config.policies)
    env.pop(ENV_FD, None)
    return env


def _ensure_model(config: Any) -> None:
    """Assemble the default model once, before N workers would each try at the same moment."""
    if config.model_dir is not None:
        return
    from bosun.server.model import default_model_dir, read_manifest

    if read_manifest(default_model_dir(config.home)):
        return
    subprocess.run([sys.executable, "-m", "bosun", "provision", "--home", str(config.home)],
                   stdout=subprocess.DEVNULL, check=False)


async def supervise(config: Any, workers: int) -> None:
    """Bind, start the workers, route connections until SIGTERM/SIGINT/SIGHUP, stop the workers."""
    import bosun
    from bosun.server.transport.daemon_file import remove_daemon_file, write_daemon_file
    from bosun.server.transport.listen import ServeError, bind_socket, bound_address, url_host

    sock = bind_socket(config.host, config.port)
    port = sock.getsockname()[1]
    url = f"http://{url_host(config.host)}:{port}/mcp"
    sup = Supervisor(workers, [sys.executable, "-m", "bosun", "serve"], worker_env(config),
                     [Worker(i) for i in range(workers)])
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    handing: set[asyncio.Task[None]] = set()

    def on_accept() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                log.warning("accept failed: %s", exc)
                return
            conn.setblocking(False)
            task = loop.create_task(sup.hand(conn))
            handing.add(task)
            task.add_done_callback(handing.discard)

    try:
        for w in sup.workers:
            sup.spawn(w)
        ready = loop.create_task(sup.wait_ready())
        stopped = loop.create_task(stop.wait())
        await asyncio.wait({ready, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if sup.failed:
            raise ServeError(sup.failed + "; its log lines above say why")
        loop.add_reader(sock, on_accept)
        if not stop.is_set():
            write_daemon_file(config.home, url, config.token, bosun.__version__)
            log.info("bosun %s serving %s with %d workers (listening on %s, home %s)", bosun.__version__, url,
                     workers, bound_address(*sock.getsockname()[:2]), config.home)
        while not stop.is_set() and not sup.failed:
            stopped = loop.create_task(stop.wait())
            changed = loop.create_task(sup._changed.wait())
            await asyncio.wait({stopped, changed}, return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()
            changed.cancel()
            sup._changed.clear()
        if sup.failed:
            raise ServeError(sup.failed + "; its log lines above say why")
    finally:
        with contextlib.suppress(Exception):
            loop.remove_reader(sock)
        sock.close()  # no new connections: the workers drain the ones they hold
        remove_daemon_file(config.home)
        await sup.stop()
        for task in list(handing):
            task.cancel()


def run_workers(config: Any, workers: int, stdio: bool = False) -> int:
    """``bosun serve --workers N`` (N > 1): 0 on a clean stop, 2 when it cannot start."""
    from bosun.server.transport.daemon_file import DaemonRunning, hold_serve_lock
    from bosun.server.transport.listen import ServeError

    try:
        check_workers(workers, config.database_url, stdio)
        lock = hold_serve_lock(config.home)
    except (WorkersError, DaemonRunning) as exc:
        print(f"bosun serve: {exc}", file=sys.stderr)
        return 2
    try:
        _ensure_model(config)
        asyncio.run(supervise(config, workers))
    except ServeError as exc:
        print(f"bosun serve: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    finally:
        lock.close()
    return 0
