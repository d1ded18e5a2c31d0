"""The task journal on PostgreSQL: the same contract as ``SQLiteTaskStore``, enforced by the server.

An append is ONE ``INSERT ... VALUES (...), (...)`` in autocommit: atomic, and checked row by
row by the triggers of ``store/pg_schema.py`` (gap-free under a per-task advisory lock,
append-only, the ``tasks`` index and the idempotency key written in the same statement, and a
NOTIFY to every other daemon on commit).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import errors as pg_errors

from bosun.core.errors import Conflict
from bosun.core.task.state import Event
from bosun.store.idempotency import AlreadyApplied
from bosun.store.pg_db import PgDatabase
from bosun.store.tasks import NewEvent, TaskRow, event_rows

STALE_SEQ = "BS001"  # raised by bosun_task_events_gap_free


class PgTaskStore:
    """Task journals in the ``task_events`` table (``tasks`` is the trigger-kept index)."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    async def setup(self) -> None:
        """Nothing to do: the triggers come with the migrations."""

    async def aclose(self) -> None:
        """The pool is the backend's to close."""

    async def append(self, task_id: str, events: Sequence[NewEvent], expected_version: int,
                     idempotency_key: str | None = None) -> list[Event]:
        if not events:
            return []
        out, params = event_rows(task_id, events, expected_version, idempotency_key)
        sql = ("INSERT INTO task_events (task_id, seq, kind, payload_json, agent, created_at, idem_key) VALUES "
               + ",".join(["(%s, %s, %s, %s, %s, %s, %s)"] * len(out)))
        try:
            await self.db.run(sql, params, "append to the task journal")
        except pg_errors.UniqueViolation as exc:
            if idempotency_key is not None and exc.diag.table_name == "idempotency":
                raise AlreadyApplied(idempotency_key) from exc
            raise Conflict(f"task {task_id}: version {expected_version} is stale (seq taken)") from exc
        except psycopg.Error as exc:
            if exc.sqlstate == STALE_SEQ:
                raise Conflict(f"task {task_id}: version {expected_version} is stale ({exc.diag.message_primary})") \
                    from exc
            raise
        return out

    async def events(self, task_id: str, since_seq: int = 0) -> list[Event]:
        rows = await self.db.fetch("SELECT seq, kind, payload_json, agent, created_at FROM task_events "
                                   "WHERE task_id = %s AND seq > %s ORDER BY seq", (task_id, since_seq),
                                   "read the task journal")
        return [
            Event(task_id=task_id, seq=int(r[0]), kind=str(r[1]), payload=json.loads(r[2]), agent=r[3],
                  created_at=float(r[4]))
            for r in rows
        ]

    async def version(self, task_id: str) -> int | None:
        rows = await self.db.fetch("SELECT MAX(seq) FROM task_events WHERE task_id = %s", (task_id,),
                                   "read the task version")
        return None if not rows or rows[0][0] is None else int(rows[0][0])

    async def task(self, task_id: str) -> TaskRow | None:
        rows = await self.db.fetch("SELECT task_id, objective, status, version, created_at, updated_at "
                                   "FROM tasks WHERE task_id = %s", (task_id,), "read the task")
        return _row(rows[0]) if rows else None

    async def list_tasks(self, status: str | None = None, limit: int = 50) -> list[TaskRow]:
        if status:
            rows = await self.db.fetch("SELECT task_id, objective, status, version, created_at, updated_at "
                                       "FROM tasks WHERE status = %s ORDER BY updated_at DESC LIMIT %s",
                                       (status, int(limit)), "list tasks")
        else:
            rows = await self.db.fetch("SELECT task_id, objective, status, version, created_at, updated_at "
                                       "FROM tasks ORDER BY updated_at DESC LIMIT %s", (int(limit),), "list tasks")
        return [_row(r) for r in rows]


def _row(r: tuple[Any, ...]) -> TaskRow:
    return TaskRow(str(r[0]), str(r[1]), str(r[2]), int(r[3]), float(r[4]), float(r[5]))
