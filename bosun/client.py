"""A Python client for the bosun daemon: its tools as typed async and sync methods.

An application (a RAG pipeline, an agent loop) calls the warm daemon in a few lines::

    from bosun.client import Bosun

    with Bosun() as b:                                  # the running daemon (daemon.json), else `bosun stdio`
        picked = b.select_context("why did the deploy fail?", passages, budget_tokens=800)
        report = b.audit(answer, [{"content": p, "source_url": u} for p, u in sources])

``AsyncBosun`` is the same with ``async with`` / ``await``. Where to connect: ``server=`` an
``http(s)://…/mcp`` URL, ``"stdio"`` (spawn ``python -m bosun stdio``), or an in-process ``MCPServer``
(tests); by default the daemon named in ``$BOSUN_HOME/daemon.json`` (URL and bearer token), else stdio.

Results are the tools' answers (``structuredContent``) typed as ``TypedDict``s for the keys this client
relies on; every other key the daemon sends is kept. A tool error raises ``ToolCallError`` with the
``field`` the daemon named (``candidates[2].text``), so a caller can point at the bad input.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import re
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Literal, TypedDict, TypeVar, cast

__all__ = [
    "AsyncBosun", "AuditResult", "Bosun", "BosunClientError", "CompassResult", "ConnectionFailed", "PolicyText",
    "RouteHit", "RouteResult", "SelectedItem", "SelectionResult", "ToolCallError",
]

T = TypeVar("T")
ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None]]
Strategy = Literal["hybrid", "psi0", "mmr", "baseline"]


# -- errors ---------------------------------------------------------------------------------------
class BosunClientError(Exception):
    """Anything this client raises."""


class ConnectionFailed(BosunClientError):
    """No daemon could be reached (or started): the message names the endpoint and how to start one."""


class ToolCallError(BosunClientError):
    """The daemon refused a call; ``field`` is the argument it named (``None`` when it named none)."""

    def __init__(self, tool: str, message: str) -> None:
        self.tool = tool
        message = message.removeprefix(f"Error executing tool {tool}: ")  # the SDK's wrapping
        self.message = message
        match = _FIELD.match(message)
        self.field: str | None = match.group(1) if match else None
        super().__init__(f"{tool}: {message}")


_FIELD = re.compile(r"^([A-Za-z_][\w.\[\]]*): ")  # "candidates[2].text: is 1,200,000 bytes; ..."
_REFUSALS = (-32602, -32600, -32601)  # JSON-RPC invalid params / request, method not found


def _root_causes(exc: BaseException) -> list[BaseException]:
    """The leaves of an exception group (the SDK's task groups wrap a refused connection in one)."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _root_causes(inner)]
    return [exc]


def _unreachable(endpoint: str, exc: BaseException) -> str:
    """Why nothing answered at ``endpoint``, and the one command that fixes the usual cause."""
    causes = "; ".join(dict.fromkeys(f"{type(c).__name__}: {c}" if str(c) else type(c).__name__
                                     for c in _root_causes(exc)))
    if endpoint == "stdio":
        return (f"cannot start or reach bosun through `python -m bosun stdio` ({causes}); "
                f"check that bosun is installed in {sys.executable}, or start the daemon with `bosun serve`")
    return (f"cannot reach bosun at {endpoint or 'its endpoint'} ({causes}); is the daemon running? "
            f"start it with `bosun serve`")


# -- typed answers (the keys the client guarantees; the daemon may send more) ---------------------
class RouteHit(TypedDict, total=False):
    name: str
    score: float
    why: list[str]
    requires: list[str]


class RouteResult(TypedDict, total=False):
    hits: list[RouteHit]
    abstained: bool
    notices: list[str]
    corpus_size: int
    route_ms: float


class CompassResult(TypedDict, total=False):
    hits: list[RouteHit]
    abstained: bool
    tools: int
    compass_ms: float


class PolicyText(TypedDict):
    name: str
    text: str


class SelectedItem(TypedDict, total=False):
    id: str
    rank: int
    tokens: int
    relevance: float
    novelty: float
    score: float
    why: str
    source: str
    metadata: dict[str, Any]
    text: str


class SelectionResult(TypedDict, total=False):
    selected: list[SelectedItem]
    tokens_used: int
    budget_tokens: int
    strategy: str
    candidates: int
    rejected: list[dict[str, Any]]
    rejected_total: int
    rejected_counts: dict[str, int]
    note: str


class AuditResult(TypedDict, total=False):
    passed: bool
    trust_passed: bool
    compliance_rate: float
    counts: dict[str, int]
    claims: list[dict[str, Any]]
    claim_verdicts: list[dict[str, Any]]
    violations: list[dict[str, Any]]
    failure_reasons: list[str]
    provenance_map: dict[str, str]


def _default_home() -> Path:
    env = os.environ.get("BOSUN_HOME", "").strip()
    return Path(env).expanduser() if env else Path("~/.bosun").expanduser()


def daemon_endpoint(home: Path | None = None) -> tuple[str, str | None] | None:
    """(MCP URL, bearer token) of the daemon recorded in ``home/daemon.json``, or None."""
    try:
        info = json.loads(((home or _default_home()) / "daemon.json").read_text())
        url = info["url"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return None
    token = info.get("token")
    return url, token if isinstance(token, str) and token else None


class AsyncBosun:
    """The daemon's tools as ``async`` methods over one MCP session (open it with ``async with``)."""

    def __init__(self, server: Any = None, *, home: str | Path | None = None, token: str | None = None,
                 timeout: float = 120.0) -> None:
        self._server = server
        self._home = Path(home).expanduser() if home is not None else None
        self._token = token
        self._timeout = timeout
        self._stack: AsyncExitStack | None = None
        self._client: Any = None
        self._http: Any = None
        self.endpoint = ""  # where this client is connected: a URL, "stdio" or "in-process"

    def _target(self) -> Any:
        import httpx2  # the SDK's own HTTP client library
        from mcp import StdioServerParameters
        from mcp.client.streamable_http import streamable_http_client

        server, token = self._server, self._token
        if server is None:
            found = daemon_endpoint(self._home)
            if found is not None:
                server, token = found[0], token or found[1]
            else:
                server = "stdio"
        if server == "stdio":
            self.endpoint = "stdio"
            env = dict(os.environ)  # the SDK passes only HOME/PATH/SHELL/TERM otherwise (BOSUN_* matter)
            if self._home is not None:
                env["BOSUN_HOME"] = str(self._home)
            return StdioServerParameters(command=sys.executable, args=["-m", "bosun", "stdio"], env=env)
        if isinstance(server, str):
            if not server.startswith(("http://", "https://")):
                raise ConnectionFailed(f"server {server!r}: expected an http(s):// MCP URL, 'stdio' or a server object")
            self.endpoint = server
            headers = {"Authorization": f"Bearer {token}"} if token else None
            # the SDK's defaults: 30 s to connect or write, 300 s to read (a response may stream)
            self._http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0))
            return streamable_http_client(server, http_client=self._http)
        self.endpoint = "in-process"
        return server

    async def __aenter__(self) -> AsyncBosun:
        from mcp import Client

        stack = AsyncExitStack()
        try:
            target = self._target()
            if self._http is not None:  # ours to close: the SDK leaves a client it was given open
                stack.push_async_callback(self._http.aclose)
            self._client = await stack.enter_async_context(Client(target, read_timeout_seconds=self._timeout))
        except BosunClientError:
            await stack.aclose()
            raise
        except Exception as exc:
            await stack.aclose()
            raise ConnectionFailed(_unreachable(self.endpoint, exc)) from exc
        self._stack = stack
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        stack, self._stack, self._client = self._stack, None, None
        if stack is not None:
            await stack.aclose()

    # -- the generic call ------------------------------------------------------------------------
    async def call(self, tool: str, arguments: dict[str, Any], progress: ProgressCallback | None = None) -> dict[str, Any]:
        """Call ``tool`` with ``arguments`` (``None`` values dropped); the answer as a dict, errors raised."""
        if self._client is None:
            raise BosunClientError("the client is not open: use `async with AsyncBosun() as b:`")
        from mcp.shared.exceptions import MCPError

        args = {k: v for k, v in arguments.items() if v is not None}
        try:
            res = await self._client.call_tool(tool, args, progress_callback=progress)
        except MCPError as exc:  # refused before it ran (an unknown tool, arguments not an object): still a refusal
            if exc.error.code in _REFUSALS:
                raise ToolCallError(tool, exc.error.message) from exc
            raise
        text = " ".join(getattr(c, "text", "") for c in res.content or [])
        if res.is_error:
            raise ToolCallError(tool, text or "the tool failed without a message")
        if isinstance(res.structured_content, dict):
            return cast(dict[str, Any], res.structured_content)
        try:
            data = json.loads(text)
        except ValueError:
            return {"text": text}
        return data if isinstance(data, dict) else {"result": data}

    # -- routing ---------------------------------------------------------------------------------
    async def route(self, prompt: str, *, top_k: int | None = None,
                    progress: ProgressCallback | None = None) -> RouteResult:
        """The governance policies that bear on ``prompt`` (names and evidence; empty when none do)."""
        return cast(RouteResult, await self.call("route", {"prompt": prompt, "top_k": top_k}, progress))

    async def compass(self, prompt: str, tools: list[dict[str, Any]], *, top_k: int | None = None,
                      progress: ProgressCallback | None = None) -> CompassResult:
        """Tool Compass: which of ``tools`` (``{name, description}``) fit ``prompt``."""
        return cast(CompassResult, await self.call("route", {"prompt": prompt, "tools": tools, "top_k": top_k},
                                                   progress))

    async def get_policy(self, name: str) -> PolicyText:
        return cast(PolicyText, await self.call("get_policy", {"name": name}))

    # -- context and claims ----------------------------------------------------------------------
    async def select_context(self, goal: str, candidates: list[str | dict[str, Any]], *,
                             context: list[str | dict[str, Any]] | None = None, budget_tokens: int | None = None,
                             strategy: Strategy | None = None, progress: ProgressCallback | None = None,
                             **options: Any) -> SelectionResult:
        """The candidates that fit ``budget_tokens``, relevant and not redundant; ``options`` as the tool takes them."""
        args = {"goal": goal, "candidates": candidates, "context": context, "budget_tokens": budget_tokens,
                "strategy": strategy, **options}
        return cast(SelectionResult, await self.call("select_context", args, progress))

    async def audit(self, response: str, chunks: list[dict[str, Any]], *, query: str | None = None,
                    config: dict[str, Any] | None = None, as_of: str | None = None,
                    progress: ProgressCallback | None = None) -> AuditResult:
        """Each claim of ``response`` checked against ``chunks`` (``{content, source_url}``): verdicts and trust."""
        args = {"response": response, "chunks": chunks, "query": query, "config": config, "as_of": as_of}
        return cast(AuditResult, await self.call("audit", args, progress))

    async def filter_sources(self, chunks: list[dict[str, Any]], config: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self.call("filter_sources", {"chunks": chunks, "config": config})

    # -- task state (the arguments are the tools' own; see each tool's description) ---------------
    async def plan(self, mode: str, **args: Any) -> dict[str, Any]:
        return await self.call("plan", {"mode": mode, **args})

    async def observe(self, task_id: str, kind: str, **args: Any) -> dict[str, Any]:
        return await self.call("observe", {"task_id": task_id, "kind": kind, **args})

    async def recall(self, ref: str, **args: Any) -> dict[str, Any]:
        return await self.call("recall", {"ref": ref, **args})

    async def precheck(self, task_id: str, tool: str, **args: Any) -> dict[str, Any]:
        return await self.call("precheck", {"task_id": task_id, "tool": tool, **args})

    async def checkpoint(self, task_id: str, mode: str, **args: Any) -> dict[str, Any]:
        return await self.call("checkpoint", {"task_id": task_id, "mode": mode, **args})

    async def handoff(self, task_id: str, mode: str, **args: Any) -> dict[str, Any]:
        return await self.call("handoff", {"task_id": task_id, "mode": mode, **args})


class Bosun:
    """``AsyncBosun`` for synchronous code: one background event loop holds the session.

    Works where an event loop is already running (a notebook, a web handler): calls are handed to
    the client's own loop thread and waited for.
    """

    def __init__(self, server: Any = None, *, home: str | Path | None = None, token: str | None = None,
                 timeout: float = 120.0) -> None:
        self._async = AsyncBosun(server, home=home, token=token, timeout=timeout)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._session: concurrent.futures.Future[None] | None = None
        self._closing = asyncio.Event()

    @property
    def endpoint(self) -> str:
        return self._async.endpoint

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            coro.close()
            raise BosunClientError("the client is not open: use `with Bosun() as b:`")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def __enter__(self) -> Bosun:
        loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=loop.run_forever, name="bosun-client", daemon=True)
        self._thread.start()
        self._loop = loop
        opened: concurrent.futures.Future[None] = concurrent.futures.Future()
        # one task holds the session from open to close (the SDK's task groups must exit in the task that
        # entered them); calls run as their own tasks on the same loop
        self._session = asyncio.run_coroutine_threadsafe(self._hold(opened), loop)
        try:
            opened.result()
        except BaseException:
            self._stop()
            raise
        return self

    async def _hold(self, opened: concurrent.futures.Future[None]) -> None:
        self._closing = asyncio.Event()
        try:
            async with self._async:
                opened.set_result(None)
                await self._closing.wait()
        except BaseException as exc:
            if not opened.done():
                opened.set_exception(exc)
                return
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        loop, session = self._loop, self._session
        if loop is None or session is None:
            return
        try:
            loop.call_soon_threadsafe(self._closing.set)
            session.result(timeout=30)
        finally:
            self._stop()

    def _stop(self) -> None:
        loop, thread, self._loop, self._thread, self._session = self._loop, self._thread, None, None, None
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)
            if thread is not None:
                thread.join(timeout=10)
            loop.close()

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return self._run(self._async.call(tool, arguments))

    def route(self, prompt: str, *, top_k: int | None = None) -> RouteResult:
        return self._run(self._async.route(prompt, top_k=top_k))

    def compass(self, prompt: str, tools: list[dict[str, Any]], *, top_k: int | None = None) -> CompassResult:
        return self._run(self._async.compass(prompt, tools, top_k=top_k))

    def get_policy(self, name: str) -> PolicyText:
        return self._run(self._async.get_policy(name))

    def select_context(self, goal: str, candidates: list[str | dict[str, Any]], *,
                       context: list[str | dict[str, Any]] | None = None, budget_tokens: int | None = None,
                       strategy: Strategy | None = None, **options: Any) -> SelectionResult:
        return self._run(self._async.select_context(goal, candidates, context=context, budget_tokens=budget_tokens,
                                                    strategy=strategy, **options))

    def audit(self, response: str, chunks: list[dict[str, Any]], *, query: str | None = None,
              config: dict[str, Any] | None = None, as_of: str | None = None) -> AuditResult:
        return self._run(self._async.audit(response, chunks, query=query, config=config, as_of=as_of))

    def filter_sources(self, chunks: list[dict[str, Any]], config: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._run(self._async.filter_sources(chunks, config))

    def plan(self, mode: str, **args: Any) -> dict[str, Any]:
        return self._run(self._async.plan(mode, **args))

    def observe(self, task_id: str, kind: str, **args: Any) -> dict[str, Any]:
        return self._run(self._async.observe(task_id, kind, **args))

    def recall(self, ref: str, **args: Any) -> dict[str, Any]:
        return self._run(self._async.recall(ref, **args))

    def precheck(self, task_id: str, tool: str, **args: Any) -> dict[str, Any]:
        return self._run(self._async.precheck(task_id, tool, **args))

    def checkpoint(self, task_id: str, mode: str, **args: Any) -> dict[str, Any]:
        return self._run(self._async.checkpoint(task_id, mode, **args))

    def handoff(self, task_id: str, mode: str, **args: Any) -> dict[str, Any]:
        return self._run(self._async.handoff(task_id, mode, **args))
