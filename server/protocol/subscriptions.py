"""Resource subscriptions: a harness learns that a task changed, or that the policy corpus did,
without polling.

- A committed task write (``engine.tasks.changes``: another agent's update, a handoff result
  folded into the parent) announces ``bosun://task/{id}/manifest`` and ``.../status`` as updated.
- A new policy index generation (``engine.policies.changes``) announces ``resources/list_changed``
  (the ``bosun://policy/{name}`` set and ``bosun://policies`` changed).

2025 handshake sessions subscribe per URI with ``resources/subscribe`` (any URI is accepted, as
the spec allows; only the task URIs above are ever announced) and get the list change on their
standalone stream. 2026-07-28 clients open a ``subscriptions/listen`` stream, which the SDK serves
from the ``SubscriptionBus`` given to the server: every change is published there too, and the
SDK's listen handler delivers only what each stream asked for.

Change notices are synchronous calls from the writing code, on the loop or a worker thread: each
one is handed to the server's loop, which sends the notifications in a task of its own, so a
slow client never delays a write.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable, Coroutine
from typing import Any

import mcp.types as types
from mcp.server import MCPServer
from mcp.server.context import CallNext, ServerRequestContext
from mcp.server.subscriptions import ResourcesListChanged, ResourceUpdated, SubscriptionBus

from bosun.server.protocol.sessions import connection_of, is_modern, schedule_on, serve_legacy_method

log = logging.getLogger("bosun.server")


def task_uris(task_id: str) -> list[str]:
    """The resources a task write changes."""
    return [f"bosun://task/{task_id}/manifest", f"bosun://task/{task_id}/status"]


class Subscriptions:
    """Who subscribed to what, and the senders of the change notices."""

    def __init__(self, bus: SubscriptionBus) -> None:
        self.bus = bus
        self.by_connection: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
        self.sessions: weakref.WeakSet[Any] = weakref.WeakSet()  # handshake sessions: list_changed goes to all
        self.loop: asyncio.AbstractEventLoop | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self._removers: list[Callable[[], None]] = []

    # -- lifecycle (the server's lifespan) ------------------------------------------------------

    def start(self, engine: Any) -> None:
        self.loop = asyncio.get_running_loop()
        self._removers = [engine.tasks.changes.add(self.task_changed),
                          engine.policies.changes.add(self.policies_changed)]

    def stop(self) -> None:
        for remove in self._removers:
            remove()
        self._removers = []

    # -- requests -------------------------------------------------------------------------------

    async def subscribe(self, ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams) -> types.EmptyResult:
        self._uris(ctx).add(str(params.uri))
        return types.EmptyResult()

    async def unsubscribe(self, ctx: ServerRequestContext[Any, Any],
                          params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        self._uris(ctx).discard(str(params.uri))
        return types.EmptyResult()

    def _uris(self, ctx: ServerRequestContext[Any, Any]) -> set[str]:
        connection = connection_of(ctx)
        return self.by_connection.setdefault(connection, set())

    def middleware(self) -> Any:
        """Server middleware: remembers each handshake session, the audience of ``list_changed``."""

        async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
            if not is_modern(ctx):
                self.sessions.add(connection_of(ctx))
            return await call_next(ctx)

        return middleware

    # -- change notices (synchronous, from the writer) -------------------------------------------

    def task_changed(self, task_id: str) -> None:
        self._soon(self._announce_task(task_id))

    def policies_changed(self, _: str) -> None:
        self._soon(self._announce_list_changed())

    def _soon(self, coro: Coroutine[Any, Any, None]) -> None:
        loop = self.loop
        if loop is None or loop.is_closed():
            coro.close()
            return
        schedule_on(loop, coro, self.tasks)

    async def _announce_task(self, task_id: str) -> None:
        for uri in task_uris(task_id):
            await self.bus.publish(ResourceUpdated(uri=uri))
            for connection, uris in list(self.by_connection.items()):
                if uri in uris:
                    await _quietly(connection.send_resource_updated(uri))

    async def _announce_list_changed(self) -> None:
        await self.bus.publish(ResourcesListChanged())
        for connection in list(self.sessions):
            await _quietly(connection.send_resource_list_changed())


async def _quietly(send: Coroutine[Any, Any, None]) -> None:
    """A notice to a client that went away is lost; it never fails the others (``notify`` is best-effort)."""
    try:
        await send
    except Exception:
        log.debug("a change notice could not be delivered", exc_info=True)


def register(mcp: MCPServer[Any], subscriptions: Subscriptions) -> None:
    """Serve ``resources/subscribe`` and ``resources/unsubscribe`` (2025 sessions)."""
    mcp.middleware.append(serve_legacy_method("resources/subscribe", types.SubscribeRequestParams,
                                              subscriptions.subscribe))
    mcp.middleware.append(serve_legacy_method("resources/unsubscribe", types.UnsubscribeRequestParams,
                                              subscriptions.unsubscribe))
    mcp.middleware.append(subscriptions.middleware())
