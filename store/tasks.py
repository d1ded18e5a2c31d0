"""The task journal: append-only events per task, with optimistic concurrency.

``task_events`` is the source of truth; ``tasks`` is an index (objective,
status, version) kept in step by triggers, so every append is ONE SQL statement
and therefore atomic on the shared autocommit connection (no BEGIN/COMMIT that
another coroutine's statements could slip into). Triggers also make the journal
append-only (UPDATE/DELETE abort) and gap-free: an event whose seq is not
``last seq + 1`` aborts, which is how a stale ``expected_version`` is caught even
across processes that share the database file.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import aiosqlite

from bosun.core.errors import Conflict
from bosun.core.task.state import Event
from bosun.store.db import fetch, run
from bosun.store.idempotency import AlreadyApplied
from bosun.store.sqlite_uri import readonly_uri

# one statement each (the migration runner splits on ';', so triggers live here, idempotent)
_TRIGGERS = (
    """CREATE TRIGGER IF NOT EXISTS task_events_gap_free BEFORE INSERT ON task_events
    WHEN NEW.seq != (SELECT COALESCE(MAX(seq), 0) + 1 FROM task_events WHERE task_id = NEW.task_id)
    BEGIN SELECT RAISE(ABORT, 'task_events: stale or out-of-order seq'); END""",
    """CREATE TRIGGER IF NOT EXISTS task_events_started AFTER INSERT ON task_events
    WHEN NEW.kind = 'task_started'
    BEGIN
        INSERT INTO tasks (task_id, objective, status, version, created_at, updated_at)
        VALUES (NEW.task_id, COALESCE(json_extract(NEW.payload_json, '$.objective'), ''), 'open',
                NEW.seq, NEW.created_at, NEW.created_at);
    END""",
    """CREATE TRIGGER IF NOT EXISTS task_events_version AFTER INSERT ON task_events
    WHEN NEW.kind != 'task_started'
    BEGIN
        UPDATE tasks SET version = NEW.seq, updated_at = NEW.created_at,
            status = CASE WHEN NEW.kind = 'task_closed'
                          THEN COALESCE(json_extract(NEW.payload_json, '$.status'), 'done')
                          ELSE status END
        WHERE task_id = NEW.task_id;
    END""",
    """CREATE TRIGGER IF NOT EXISTS task_events_no_update BEFORE UPDATE ON task_events
    BEGIN SELECT RAISE(ABORT, 'task_events is append-only'); END""",
    """CREATE TRIGGER IF NOT EXISTS task_events_no_delete BEFORE DELETE ON task_events
    BEGIN SELECT RAISE(ABORT, 'task_events is append-only'); END""",
    # the idempotency key rides on the batch's last event: recorded in the same statement, so a key
    # is on record exactly when its events are, and a second use aborts the whole insert
    """CREATE TRIGGER IF NOT EXISTS task_events_idempotency AFTER INSERT ON task_events
    WHEN NEW.idem_key IS NOT NULL
    BEGIN
        INSERT INTO idempotency (key, task_id, seq, created_at)
        VALUES (NEW.idem_key, NEW.task_id, NEW.seq, NEW.created_at);
    END""",
)

# SQLite's bound-parameter limit is 32766; 6 per row
_MAX_ROWS = 5000


@dataclass(frozen=True)
class NewEvent:
    """An event not yet numbered: the store assigns seq."""

    kind: str
    payload: Mapping[str, Any]
    agent: str | None = None


@dataclass(frozen=True)
class TaskRow:
    task_id: str
    objective: str
    status: str
    version: int
    created_at: float
    updated_at: float


class TaskStore(Protocol):
    """Persistence of task journals (SQLite now; PostgreSQL is the planned second backend)."""

    async def setup(self) -> None: ...

    async def append(self, task_id: str, events: Sequence[NewEvent], expected_version: int,
                     idempotency_key: str | None = None) -> list[Event]:
        """Append after ``expected_version`` (0 for a new task), all or nothing; Conflict if stale.

        ``idempotency_key`` is recorded in the same transaction; AlreadyApplied if it was used before."""
        ...

    async def events(self, task_id: str, since_seq: int = 0) -> list[Event]: ...

    async def version(self, task_id: str) -> int | None: ...

    async def task(self, task_id: str) -> TaskRow | None: ...

    async def list_tasks(self, status: str | None = None, limit: int = 50) -> list[TaskRow]: ...


def dump_payload(payload: Mapping[str, Any]) -> str:
    return json.dumps(dict(payload), ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def event_rows(task_id: str, events: Sequence[NewEvent], expected_version: int,
               idempotency_key: str | None) -> tuple[list[Event], list[Any]]:
    """The events an append writes (seq after ``expected_version``) and their INSERT parameters, seven
    per row; the idempotency key rides on the last row. Both backends insert exactly these."""
    if len(events) > _MAX_ROWS:
        raise ValueError(f"at most {_MAX_ROWS} events per append")
    now = time.time()
    out = [
        Event(task_id=task_id, seq=expected_version + i + 1, kind=e.kind, payload=dict(e.payload),
              agent=e.agent, created_at=now)
        for i, e in enumerate(events)
    ]
    params: list[Any] = []
    for i, ev in enumerate(out):
        key = idempotency_key if i == len(out) - 1 else None
        params += [ev.task_id, ev.seq, ev.kind, dump_payload(ev.payload), ev.agent, ev.created_at, key]
    return out, params


class SQLiteTaskStore:
    """Task journal in the bosun SQLite database (shared autocommit connection; reads on ``reader``).

    Every awaited aiosqlite call is a thread hop (50-250 us here), so reads use
    ``execute_fetchall`` (one hop) and writes are one statement with no separate
    COMMIT (the connection is in autocommit mode). ``version`` is the hot path of
    every task-scoped call (is my cached state current?): when the database path
    is known it runs on a private read-only connection in the caller's thread, an
    indexed lookup of ~10 us instead of a hop; WAL lets it read beside the writer.
    """

    def __init__(self, conn: aiosqlite.Connection, path: str | Path | None = None,
                 reader: aiosqlite.Connection | None = None) -> None:
        self.conn = conn
        self.reader = reader or conn
        self._path = None if path is None or str(path) == ":memory:" else Path(path)
        self._ro: sqlite3.Connection | None = None

    def _reader(self) -> sqlite3.Connection | None:
        if self._ro is None and self._path is not None:
            try:
                self._ro = sqlite3.connect(readonly_uri(self._path), uri=True, check_same_thread=False,
                                           isolation_level=None)
                self._ro.execute("PRAGMA busy_timeout=2000")
            except sqlite3.Error:
                self._path = None  # fall back to the shared connection
        return self._ro

    async def aclose(self) -> None:
        if self._ro is not None:
            self._ro.close()
            self._ro = None

    async def setup(self) -> None:
        for sql in _TRIGGERS:
            await run(self.conn, sql)

    async def append(self, task_id: str, events: Sequence[NewEvent], expected_version: int,
                     idempotency_key: str | None = None) -> list[Event]:
        if not events:
            return []
        out, params = event_rows(task_id, events, expected_version, idempotency_key)
        sql = ("INSERT INTO task_events (task_id, seq, kind, payload_json, agent, created_at, idem_key) VALUES "
               + ",".join(["(?, ?, ?, ?, ?, ?, ?)"] * len(out)))
        try:
            # autocommit: committed when this returns; busy is retried, other failures are a StorageError
            await run(self.conn, sql, params, "append to the task journal")
        except sqlite3.IntegrityError as exc:
            if idempotency_key is not None and "idempotency" in str(exc):
                raise AlreadyApplied(idempotency_key) from exc
            raise Conflict(f"task {task_id}: version {expected_version} is stale ({exc})") from exc
        return out

    async def events(self, task_id: str, since_seq: int = 0) -> list[Event]:
        rows = await fetch(self.reader, "SELECT seq, kind, payload_json, agent, created_at FROM task_events "
                           "WHERE task_id = ? AND seq > ? ORDER BY seq", (task_id, since_seq), "read the task journal")
        return [
            Event(task_id=task_id, seq=int(r[0]), kind=str(r[1]), payload=json.loads(r[2]), agent=r[3],
                  created_at=float(r[4]))
            for r in rows
        ]

    async def version(self, task_id: str) -> int | None:
        sql = "SELECT MAX(seq) FROM task_events WHERE task_id = ?"
        reader = self._reader()
        if reader is not None:
            try:
                row = reader.execute(sql, (task_id,)).fetchone()
                return None if row is None or row[0] is None else int(row[0])
            except sqlite3.Error:
                pass  # e.g. the table was just created by another connection: ask the writer
        rows = await fetch(self.reader, sql, (task_id,), "read the task version")
        return None if not rows or rows[0][0] is None else int(rows[0][0])

    async def task(self, task_id: str) -> TaskRow | None:
        rows = await fetch(self.reader, "SELECT task_id, objective, status, version, created_at, updated_at "
                           "FROM tasks WHERE task_id = ?", (task_id,), "read the task")
        row = rows[0] if rows else None
        return None if row is None else TaskRow(str(row[0]), str(row[1]), str(row[2]), int(row[3]),
                                                 float(row[4]), float(row[5]))

    async def list_tasks(self, status: str | None = None, limit: int = 50) -> list[TaskRow]:
        sql = "SELECT task_id, objective, status, version, created_at, updated_at FROM tasks"
        args: tuple[Any, ...] = ()
        if status:
            sql += " WHERE status = ?"
            args = (status,)
        sql += " ORDER BY updated_at DESC LIMIT ?"
        rows = await fetch(self.reader, sql, (*args, int(limit)), "list tasks")
        return [TaskRow(str(r[0]), str(r[1]), str(r[2]), int(r[3]), float(r[4]), float(r[5])) for r in rows]
