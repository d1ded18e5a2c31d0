"""Idempotency records: a state-changing call applied once, however often it is sent.

A call carries a key (the stdio bridge assigns one per JSON-RPC request and reuses it when it
re-sends after a daemon restart; a client may pass its own). The journal write the call makes
records the key in the same statement (``task_events.idem_key`` and a trigger, see
``store/tasks.py``), so the key is on record exactly when the effect is. The first answer is
kept next to it afterwards; a call that repeats a key gets that answer, or, when the daemon
died between the commit and keeping the answer, a note that it was already applied and at
which version. Never a second application.

``CALL_KEY`` carries the key of the call being served from the middleware to the journal (the
one choke point every journal write goes through), so no service needs a new parameter.
"""

from __future__ import annotations

import contextvars
import time
from dataclasses import dataclass
from typing import Protocol

import aiosqlite

from bosun.core.errors import BosunError
from bosun.store.db import InlineReader, fetch_inline, run

RETENTION_S = 7 * 24 * 3600.0  # a re-send comes within seconds; a week covers a host resuming a session


class AlreadyApplied(BosunError):
    """The call's idempotency key is on record already: its effect happened once and is not repeated."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(f"already applied: this call (idempotency key {key}) was applied before; "
                         "nothing was applied again")


@dataclass
class CallKey:
    """The key of the call in progress and what its journal write recorded (None until it wrote)."""

    key: str
    task_id: str | None = None
    version: int | None = None

    @property
    def used(self) -> bool:
        return self.version is not None


CALL_KEY: contextvars.ContextVar[CallKey | None] = contextvars.ContextVar("bosun_call_key", default=None)


@dataclass(frozen=True)
class Record:
    """A key on record: the event it produced, and the first answer if it was kept."""

    key: str
    task_id: str
    seq: int
    created_at: float
    fingerprint: str | None
    answer: str | None


class IdempotencyStore(Protocol):
    """Idempotency records (either backend); keys are recorded by the journal append itself."""

    async def get(self, key: str) -> Record | None: ...

    async def keep_answer(self, key: str, fingerprint: str, answer: str | None) -> None: ...

    async def prune(self, older_than_s: float = RETENTION_S) -> None: ...


class SQLiteIdempotencyStore:
    """The ``idempotency`` table (rows are inserted by the journal's trigger, never here)."""

    def __init__(self, conn: aiosqlite.Connection, reader: aiosqlite.Connection | None = None,
                 inline: InlineReader | None = None) -> None:
        self.conn = conn
        self.reader = reader or conn
        self.inline = inline  # the lookup every keyed call makes, on the loop's thread (answers are <= 256 KiB)

    async def get(self, key: str) -> Record | None:
        rows = await fetch_inline(self.inline, self.reader, "SELECT key, task_id, seq, created_at, fingerprint, answer FROM idempotency "
                                        "WHERE key = ?", (key,), "look up the idempotency key")
        if not rows:
            return None
        r = rows[0]
        return Record(str(r[0]), str(r[1]), int(r[2]), float(r[3]), r[4], r[5])

    async def keep_answer(self, key: str, fingerprint: str, answer: str | None) -> None:
        """Store the first answer (None: too large to keep; the fingerprint is kept either way)."""
        await run(self.conn, "UPDATE idempotency SET fingerprint = ?, answer = ? WHERE key = ? AND answer IS NULL",
                  (fingerprint, answer, key), "keep the call's answer")

    async def prune(self, older_than_s: float = RETENTION_S) -> None:
        """Forget keys older than the retention (their events stay in the journal)."""
        await run(self.conn, "DELETE FROM idempotency WHERE created_at < ?", (time.time() - older_than_s,),
                  "prune idempotency keys")
