"""Exactly-once tool calls and bounded admission: server middleware on every ``tools/call``.

Idempotency (issue 13): a call may carry a key in ``params._meta["bosun/idempotency_key"]``
(``bosun stdio`` assigns one per JSON-RPC request and reuses it when it re-sends after a
daemon restart; any client may pass its own). The key rides in ``CALL_KEY`` to the task
journal, which records it in the same statement as the events the call appends. A key seen
before is answered with the first answer, or, when that answer was not kept (the daemon died
between the commit and keeping it, or it was too large), with a note naming the task and
version at which the call was applied. A key reused for different arguments is refused.

Admission: at most ``max_inflight`` calls run at once and ``max_queued`` wait; beyond that a
call is refused at once with "busy, retry after N s" (a tool error), and a call that waited
longer than ``queue_timeout_s`` is refused the same way, instead of every agent stalling.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections import deque
from typing import Any

from mcp import MCPError
from mcp.server import MCPServer
from mcp.server.context import CallNext, ServerRequestContext
from mcp.types import INVALID_PARAMS, CallToolResult, TextContent

from bosun.server.engine import Engine
from bosun.server.transport.stdio import refuse_marked
from bosun.store.idempotency import CALL_KEY, CallKey, Record

log = logging.getLogger("bosun.idempotency")

META_KEY = "bosun/idempotency_key"
MAX_KEY_CHARS = 200
MAX_KEPT_ANSWER = 256 * 1024  # larger answers are not kept: a repeat then gets the "already applied" note


def call_key(params: Any) -> str | None:
    """The idempotency key of a ``tools/call`` (None when it carries none); -32602 if malformed."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    key = meta.get(META_KEY) if isinstance(meta, dict) else None
    if key is None:
        return None
    if not isinstance(key, str) or not key.strip() or len(key) > MAX_KEY_CHARS:
        raise MCPError(INVALID_PARAMS, f"_meta.{META_KEY}: must be a non-empty string of at most "
                                       f"{MAX_KEY_CHARS} characters (a UUID is a good key)")
    return key


def fingerprint(params: Any) -> str:
    """The call a key was first used for: tool name and arguments, canonical JSON hashed."""
    body = {"name": params.get("name"), "arguments": params.get("arguments") or {}}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _tool_error(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


class Admission:
    """A bounded number of calls in flight and waiting; a flood is refused, not queued forever."""

    def __init__(self, max_inflight: int, max_queued: int, queue_timeout_s: float) -> None:
        self.max_inflight = max_inflight
        self.max_queued = max_queued
        self.queue_timeout_s = queue_timeout_s
        self._slots = asyncio.Semaphore(max_inflight)
        self.waiting = 0
        self.refused = 0
        self._recent: deque[float] = deque(maxlen=200)  # durations of recent calls (retry-after estimate)

    def retry_after(self) -> float:
        """Seconds until the queue ahead has likely drained (at least one)."""
        mean = sum(self._recent) / len(self._recent) if self._recent else 0.5
        return max(1.0, round(mean * (self.waiting + self.max_inflight) / self.max_inflight, 1))

    def busy(self, why: str) -> CallToolResult:
        self.refused += 1
        return _tool_error(f"busy: {why}; nothing was applied; retry after {self.retry_after():g} s")

    async def run(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        if self._slots.locked() and self.waiting >= self.max_queued:
            return self.busy(f"{self.max_inflight} calls running and {self.waiting} waiting")
        self.waiting += 1
        try:
            await asyncio.wait_for(self._slots.acquire(), self.queue_timeout_s)
        except TimeoutError:
            return self.busy(f"waited {self.queue_timeout_s:g} s for a free slot")
        finally:
            self.waiting -= 1
        started = time.monotonic()
        try:
            return await call_next(ctx)
        finally:
            self._recent.append(time.monotonic() - started)
            self._slots.release()


class Idempotency:
    """Answers a repeated key from the record; journals the key of a new one with its effect."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._inflight: dict[str, tuple[asyncio.Lock, int]] = {}  # key -> (lock, calls holding or awaiting it)

    async def run(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        params = ctx.params if isinstance(ctx.params, dict) else {}
        key = call_key(params)
        if key is None:
            return await call_next(ctx)
        store = self.engine.idempotency
        if store is None:  # engine not open: nothing can be applied either
            return await call_next(ctx)
        print_ = fingerprint(params)
        lock, users = self._inflight.get(key, (asyncio.Lock(), 0))
        self._inflight[key] = (lock, users + 1)
        try:
            async with lock:  # the same key twice at once: the second waits and gets the first's answer
                record = await store.get(key)
                if record is not None:
                    return self._replay(record, print_)
                current = CallKey(key)
                token = CALL_KEY.set(current)
                try:
                    result = await call_next(ctx)
                finally:
                    CALL_KEY.reset(token)
                if current.used:
                    await store.keep_answer(key, print_, self._keepable(result))
                return result
        finally:
            lock, users = self._inflight[key]
            if users <= 1:
                del self._inflight[key]
            else:
                self._inflight[key] = (lock, users - 1)

    @staticmethod
    def _keepable(result: Any) -> str | None:
        """The answer as JSON (a handler may return a model or its dict), None when it is too large."""
        try:
            model = result if isinstance(result, CallToolResult) else CallToolResult.model_validate(result)
        except ValueError:
            return None
        text = model.model_dump_json(by_alias=True, exclude_none=True)
        return text if len(text) <= MAX_KEPT_ANSWER else None

    @staticmethod
    def _replay(record: Record, print_: str) -> CallToolResult:
        if record.fingerprint is not None and record.fingerprint != print_:
            return _tool_error(f"_meta.{META_KEY}: key {record.key} was already used for a different call "
                               f"(task {record.task_id}); use a fresh key for a new call")
        if record.answer is not None:
            try:
                return CallToolResult.model_validate_json(record.answer)
            except ValueError:
                log.warning("kept answer for idempotency key %s is unreadable; answering with the record", record.key)
        note = {"already_applied": True, "task_id": record.task_id, "version": record.seq,
                "idempotency_key": record.key,
                "note": "this call was applied before (its answer was not kept); read the task with "
                        "plan(mode='status') instead of calling again"}
        return CallToolResult(content=[TextContent(type="text", text=json.dumps(note, separators=(",", ":")))],
                              structured_content=note)


def register(mcp: MCPServer[Engine], engine: Engine) -> None:
    """Admission outside, idempotency inside: a refused call never touches the key's record."""
    cfg = engine.config
    admission = Admission(cfg.max_inflight, cfg.max_queued, cfg.queue_timeout_s)
    idempotency = Idempotency(engine)
    engine.admission = admission  # /healthz reports what it refused

    async def admit(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        if ctx.method != "tools/call":
            return await call_next(ctx)
        return await admission.run(ctx, call_next)

    async def once(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        if ctx.method != "tools/call":
            return await call_next(ctx)
        return await idempotency.run(ctx, call_next)

    mcp.middleware.append(refuse_marked)  # stdio's answer to a message nested too deep
    mcp.middleware.append(admit)
    mcp.middleware.append(once)
