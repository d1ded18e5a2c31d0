"""LISTEN for the journal's change notices: another daemon's task write reaches this daemon's listeners.

The journal trigger notifies ``bosun_tasks`` with ``<origin>\\t<task_id>`` on every committed
append (store/pg_schema.py). One dedicated connection per daemon listens; notices from this
daemon's own origin are dropped (its TaskService already told its listeners). If the
connection drops, it reconnects with backoff and calls ``on_gap``: notices sent meanwhile
are lost, so the caller treats every task it holds as possibly changed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import psycopg

from bosun.core.errors import StorageError
from bosun.store.pg_schema import NOTIFY_CHANNEL

log = logging.getLogger("bosun.store.pg")

RETRY_MAX_S = 5.0


class TaskChangeListener:
    """Runs ``on_change(task_id)`` for every other daemon's journal write, on the event loop."""

    def __init__(self, url: str, origin: str, on_change: Callable[[str], None],
                 on_gap: Callable[[], None] | None = None) -> None:
        self.url = url
        self.origin = origin
        self.on_change = on_change
        self.on_gap = on_gap
        self.received = 0
        self._task: asyncio.Task[None] | None = None
        self._listening = asyncio.Event()

    async def start(self) -> None:
        """Start listening; returns once the first LISTEN is in place (a write after this is heard)."""
        self._task = asyncio.create_task(self._run(), name="bosun-pg-listen")
        waiter = asyncio.create_task(self._listening.wait())
        await asyncio.wait({waiter, self._task}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if self._task.done():
            self._task.result()  # raises what the first connection raised

    async def _connect(self) -> psycopg.AsyncConnection[Any]:
        conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True,
                                                     application_name=self.origin + ":listen")
        await conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
        return conn

    async def _run(self) -> None:
        delay = 0.1
        first = True
        while True:
            try:
                conn = await self._connect()
            except psycopg.Error as exc:
                if first:
                    raise StorageError("listen for other daemons' task writes", "cannot connect", True,
                                       "check that PostgreSQL accepts connections at BOSUN_DATABASE_URL") from exc
                log.warning("change listener: reconnect failed (%s); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
                continue
            try:
                self._listening.set()
                if not first and self.on_gap is not None:
                    self.on_gap()
                first, delay = False, 0.1
                async for notice in conn.notifies():
                    self._deliver(notice.payload)
            except psycopg.Error as exc:
                log.warning("change listener: connection lost (%s); reconnecting", exc)
            finally:
                await conn.close()

    def _deliver(self, payload: str) -> None:
        origin, sep, task_id = payload.partition("\t")
        if not sep or origin == self.origin:
            return
        self.received += 1
        try:
            if task_id:
                self.on_change(task_id)
            elif self.on_gap is not None:  # a task id too long for a notice: some task changed
                self.on_gap()
        except Exception:  # one broken listener never stops the loop
            log.exception("a task change listener failed (ignored)")

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, psycopg.Error):
                pass
            self._task = None
