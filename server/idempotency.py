"""Exactly-once tool calls and bounded admission: server middleware on every ``tools/call``.

Idempotency: a call may carry a key in ``params._meta["bosun/idempotency_key"]``
(``bosun stdio`` assigns one per JSON-RPC request and reuses it when it re-sends after a
daemon restart; any client may pass its own). The key rides in ``CALL_KEY`` to the task
journal, which records it in the same statement as the events the call appends. A key seen
before is answered with the first answer, or, when that answer was not kept (the daemon died
between the commit and keeping it, or it was too large), with a note naming the task and
version at which the call was applied. A key reused for different arguments is refused.

Admission: at most ``max_inflight`` calls run at once and ``max_queued`` wait; beyond that a
call is refused at once with "busy, retry after N s" (a tool error), and a call that waited
longer than ``queue_timeout_s`` is refused the same way, instead of every agent stalling.

Deadline: a call still running ``call_timeout_s`` after it was admitted is answered with a tool
error naming the tool, and cancelled, if it has not started its journal write. A call whose write
has started is never cut: it finishes and gets its real answer (writes either finish or are not
started). The write is seen through ``CALL_KEY``: every journal write consults it right before
the statement and notes its version right after (``services/tasks.py``), so every call, keyed or
not, carries a ``CallScope`` there.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from mcp import MCPError
from mcp.server import MCPServer
from mcp.server.context import CallNext, ServerRequestContext
from mcp.types import INVALID_PARAMS, CallToolResult, TextContent

from bosun.core.errors import StorageError
from bosun.server.engine import Engine
from bosun.server.spooled_values import lookup
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
    """The call a key was first used for: tool name and arguments, canonical JSON hashed.

    The canonical JSON is hashed piece by piece, so a 100 MB ``result`` is never written out as
    one more text (and then its UTF-8): the pieces are the same bytes ``json.dumps`` would make."""
    body = {"name": params.get("name"), "arguments": params.get("arguments") or {}}
    digest = hashlib.sha256()
    for piece in _canonical_pieces(body):
        digest.update(piece.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


BIG_TEXT = 1 << 20  # characters: a string this long is escaped and hashed a slice at a time


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _canonical_pieces(value: Any) -> Iterator[str]:
    """``_canonical(value)`` in pieces: whole for a value without a big string, else opened up. A huge
    string held in a file (``spooled_values``) is read from it: the fingerprint is the one the same call
    would have had with the string in memory."""
    spooled = lookup(value)
    if spooled is not None:
        yield '"'
        for text in spooled.text_slices(BIG_TEXT):
            yield _canonical(text)[1:-1]
        yield '"'
    elif isinstance(value, str):
        if len(value) <= BIG_TEXT:
            yield _canonical(value)
            return
        yield '"'
        for at in range(0, len(value), BIG_TEXT):  # escaping is per character: slices escape the same
            yield _canonical(value[at:at + BIG_TEXT])[1:-1]
        yield '"'
    elif isinstance(value, dict) and _holds_big_text(value):
        yield "{"
        for i, key in enumerate(sorted(value)):
            yield ("," if i else "") + _canonical(key) + ":"
            yield from _canonical_pieces(value[key])
        yield "}"
    elif isinstance(value, list) and _holds_big_text(value):
        yield "["
        for i, item in enumerate(value):
            if i:
                yield ","
            yield from _canonical_pieces(item)
        yield "]"
    else:
        yield _canonical(value)


def _holds_big_text(value: Any) -> bool:
    if isinstance(value, str):
        return len(value) > BIG_TEXT or lookup(value) is not None
    if isinstance(value, dict):
        return all(isinstance(k, str) for k in value) and any(_holds_big_text(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_big_text(v) for v in value)
    return False


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
        self.deadline: Deadline | None = None  # set by register: /healthz reports its timeouts too

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
        if self._slots.locked():  # only a call that must wait pays for the timed wait (a task and a timer)
            self.waiting += 1
            try:
                await asyncio.wait_for(self._slots.acquire(), self.queue_timeout_s)
            except TimeoutError:
                return self.busy(f"waited {self.queue_timeout_s:g} s for a free slot")
            finally:
                self.waiting -= 1
        else:
            await self._slots.acquire()  # a free slot: taken at once, without suspending
        started = time.monotonic()
        try:
            return await call_next(ctx)
        finally:
            self._recent.append(time.monotonic() - started)
            self._slots.release()


class CallScope(CallKey):
    """The ``CALL_KEY`` of a call in progress: its idempotency key (None without one) and its write state.

    The journal reads ``key`` right before it writes and sets ``version`` right after
    (``services/tasks.py``); those two moments bracket the call's first write. Once the deadline
    has passed, a write that has not started is refused here (nothing is applied). Any other read
    of ``key`` only makes the deadline more careful (it then lets the call finish)."""

    def __init__(self, key: str | None) -> None:
        self._key = key
        self.task_id: str | None = None
        self._version: int | None = None
        self.writing = False  # a journal write has started (or finished): the call is no longer cut
        self.expired = False  # the deadline has passed

    @property
    def key(self) -> str:  # type: ignore[override]  # None for a call without an idempotency key
        if self.expired and not self.writing:
            raise asyncio.CancelledError("the call's deadline passed before its write started")
        self.writing = True
        return self._key  # type: ignore[return-value]

    @key.setter
    def key(self, value: str) -> None:
        self._key = value

    @property
    def version(self) -> int | None:  # type: ignore[override]
        return self._version

    @version.setter
    def version(self, value: int | None) -> None:
        self._version = value


class Deadline:
    """Answers a call that runs past ``seconds`` with a timeout error; cancels it only before its write."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        # when the deadline fires: the loop's timer (tests fire it by hand, so no test depends on timing)
        self.schedule: Callable[[float, Callable[[], None]], Any] = (
            lambda delay, fire: asyncio.get_running_loop().call_later(delay, fire))
        self.timed_out = 0  # calls answered with the timeout error
        self.overran = 0  # calls past the deadline left to finish because their write had started

    async def run(self, tool: str, scope: CallScope, call: Any) -> Any:
        """``await call()`` under the deadline (none when ``seconds`` is 0)."""
        if self.seconds <= 0:
            return await call()
        task = asyncio.current_task()
        assert task is not None
        cut = False

        def expire() -> None:
            nonlocal cut
            scope.expired = True
            if scope.writing:
                self.overran += 1
                log.warning("%s is past its %g s deadline during its write; letting it finish", tool, self.seconds)
                return
            cut = True
            task.cancel()

        timer = self.schedule(self.seconds, expire)
        try:
            return await call()
        except asyncio.CancelledError:
            if cut and task.uncancel() == 0:  # our cancel, not the client's or the server's
                self.timed_out += 1
                return self.answer(tool)
            raise
        finally:
            timer.cancel()

    def answer(self, tool: str) -> CallToolResult:
        return _tool_error(f"{tool}: timed out after {self.seconds:g} s (BOSUN_CALL_TIMEOUT_S) and was cancelled "
                           "before it changed anything; nothing was applied; retrying is safe (with less "
                           "input, or a larger BOSUN_CALL_TIMEOUT_S)")


class Idempotency:
    """Answers a repeated key from the record; journals the key of a new one with its effect."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._inflight: dict[str, tuple[asyncio.Lock, int]] = {}  # key -> (lock, calls holding or awaiting it)

    async def run(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext, key: str | None,
                  scope: CallScope) -> Any:
        """The call, or the first answer to its key; ``scope`` is the call's ``CALL_KEY``."""
        store = self.engine.idempotency
        if key is None or store is None:  # no key, or engine not open (nothing can be applied either)
            return await call_next(ctx)
        params = ctx.params if isinstance(ctx.params, dict) else {}
        # a huge argument is hashed on a thread (~2 s for 100 MB), in slices the loop can run between
        print_ = await asyncio.to_thread(fingerprint, params) if _holds_big_text(params) else fingerprint(params)
        lock, users = self._inflight.get(key, (asyncio.Lock(), 0))
        self._inflight[key] = (lock, users + 1)
        try:
            async with lock:  # the same key twice at once: the second waits and gets the first's answer
                try:
                    record = await store.get(key)
                except StorageError as exc:  # the database is unreachable: nothing was applied, say so
                    return _tool_error(str(exc))
                if record is not None:
                    return self._replay(record, print_)
                result = await call_next(ctx)
                if scope.used:
                    try:
                        await store.keep_answer(key, print_, self._keepable(result))
                    except StorageError as exc:  # applied and keyed: a repeat gets {"already_applied": true}
                        log.warning("the answer to idempotency key %s was not kept: %s", key, exc)
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
    """Admission outside, then the deadline, then idempotency: a refused call never touches the key's
    record, and a call cut by its deadline has written nothing (so its key stays unused)."""
    cfg = engine.config
    admission = Admission(cfg.max_inflight, cfg.max_queued, cfg.queue_timeout_s)
    deadline = Deadline(cfg.call_timeout_s)
    idempotency = Idempotency(engine)
    engine.admission = admission  # /healthz reports what it refused
    admission.deadline = deadline

    async def calls(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        if ctx.method != "tools/call":
            return await call_next(ctx)
        params = ctx.params if isinstance(ctx.params, dict) else {}
        key = call_key(params)
        tool = str(params.get("name") or "tool")

        async def admitted(ctx: ServerRequestContext[Any, Any]) -> Any:
            scope = CallScope(key)
            token = CALL_KEY.set(scope)
            try:
                return await deadline.run(tool, scope, lambda: idempotency.run(ctx, call_next, key, scope))
            finally:
                CALL_KEY.reset(token)

        return await admission.run(ctx, admitted)

    mcp.middleware.append(refuse_marked)  # stdio's answer to a message nested too deep
    mcp.middleware.append(calls)
