"""Open the SQLite database (WAL), apply migrations, hand out the connections.

The connection policy (docs/fleet.md):

- One **writer** connection per process (aiosqlite: its worker thread serialises the journal
  and the other small writes), plus the blob writer's own connection for large blobs
  (``store/refs.py``).
- One **reader** connection (``open_reader``, read-only) for every read a tool makes: short-ref
  resolution, blob reads, journal catch-up. WAL lets it read beside both writers, and a read
  never holds a transaction open on the writer's connection.
- Every statement is **one hop** (``run``/``fetch``: executed and its cursor finished on the
  worker thread). A cursor stepped across two hops keeps a read transaction open on its
  connection; a write that another coroutine slips into that gap cannot upgrade a stale
  snapshot and fails with "database is locked" at once, without waiting for the busy timeout
  (22% of calls at 50 agents).
- Small point reads on the hot path of a call (a short ref and its bytes, a blob under
  ``INLINE_MAX_BYTES``, an idempotency key) go first to an **inline reader** (``InlineReader``):
  a read-only stdlib connection used on the event loop's own thread, which never waits (busy
  timeout 0). An aiosqlite statement is a thread hop (~50 us of CPU alone, more under load: a
  queue put, a thread wake-up, a callback back onto the loop); an indexed read of a small row is
  ~10 us. Any failure there (busy, a table another connection just created) sends the statement
  to the reader connection as before, which retries and names the failure.
- A statement that still meets SQLITE_BUSY is retried until ``BUSY_TIMEOUT_S``: a failed
  statement is rolled back whole, so the retry cannot apply anything twice.
- Any other SQLite failure (disk full, I/O error) becomes a ``StorageError`` that says what
  failed and whether retrying is safe, never a traceback in the tool answer.
``synchronous=NORMAL`` in WAL mode survives a killed process (only a power
loss can drop the last commits), which is the durability bosun promises.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from bosun.core.errors import StorageError
from bosun.store.private import private_dir, private_file, tighten
from bosun.store.schema import MIGRATIONS, SCHEMA_VERSION
from bosun.store.sqlite_uri import readonly_uri

T = TypeVar("T")
BUSY_TIMEOUT_S = 5.0


def is_busy(exc: BaseException) -> bool:
    """SQLITE_BUSY / SQLITE_LOCKED (the statement did nothing and may simply be run again)."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def storage_error(exc: sqlite3.Error, operation: str) -> StorageError:
    """The tool-facing form of a SQLite failure (the SQL and the caller's data stay out of it)."""
    text = str(exc).lower()
    if is_busy(exc):
        return StorageError(operation, f"the database stayed busy for {BUSY_TIMEOUT_S:.0f}s", True,
                            "the daemon is overloaded; retry in a few seconds")
    if "full" in text:
        return StorageError(operation, "the disk is full", True, "free space under BOSUN_HOME, then retry")
    if "readonly" in text or "read-only" in text:
        return StorageError(operation, "the database is read-only", True, "check the permissions of BOSUN_HOME")
    if "disk i/o" in text or "malformed" in text or "not a database" in text:
        return StorageError(operation, f"the database file failed ({exc})", False,
                            "run `bosun verify` and check the disk")
    return StorageError(operation, f"SQLite error: {exc}", True, "retry once; if it fails again, check the daemon log")


async def with_retry(step: Callable[[], Awaitable[T]], operation: str) -> T:
    """``step()`` retried while SQLite answers busy, for up to ``BUSY_TIMEOUT_S``; other SQLite errors
    become a ``StorageError`` (``sqlite3.IntegrityError`` passes: it is the caller's conflict)."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    delay = 0.002
    while True:
        try:
            return await step()
        except sqlite3.IntegrityError:
            raise
        except sqlite3.Error as exc:
            if not is_busy(exc) or time.monotonic() + delay > deadline:
                raise storage_error(exc, operation) from exc
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.1)


async def fetch(conn: aiosqlite.Connection, sql: str, params: Sequence[Any] = (),
                operation: str = "read the store") -> list[Any]:
    """Every row of a query in one hop (the cursor is finished on the worker thread), busy retried."""
    return list(await with_retry(lambda: conn.execute_fetchall(sql, params), operation))


async def run(conn: aiosqlite.Connection, sql: str, params: Sequence[Any] = (),
              operation: str = "write to the store") -> None:
    """Execute a statement whose rows nobody reads, with its cursor made and freed on
    aiosqlite's thread.

    ``await conn.execute(...)`` hands back a cursor that the event loop's thread frees
    later; freeing it resets its statement on a connection the worker thread may be using at
    that moment, and SQLite answers "bad parameter or other API misuse" (seen in ~1 of 8
    runs of 60 concurrent writes). ``execute_fetchall`` keeps the cursor inside the worker's
    call: one hop, nothing left behind.
    """
    await with_retry(lambda: conn.execute_fetchall(sql, params), operation)


async def run_many(conn: aiosqlite.Connection, sql: str, rows: Sequence[Sequence[Any]],
                   operation: str = "write to the store") -> None:
    """``run`` for a batch: the cursor is closed on the worker thread before it is dropped."""

    async def step() -> None:
        async with conn.executemany(sql, rows):
            pass

    await with_retry(step, operation)


class SchemaTooNew(RuntimeError):
    """The database was written by a newer bosun; refuse rather than corrupt it."""


async def open_db(path: Path | str) -> aiosqlite.Connection:
    """Open (creating if needed) the database at ``path`` and migrate it forward."""
    if str(path) != ":memory:":
        private_dir(Path(path).parent)
        private_file(Path(path))  # SQLite gives -wal and -shm the database's mode
    conn = await aiosqlite.connect(str(path), isolation_level=None)
    try:
        await run(conn, "PRAGMA journal_mode=WAL")
        await run(conn, "PRAGMA synchronous=NORMAL")
        await run(conn, f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
        await run(conn, "PRAGMA foreign_keys=ON")
        await migrate(conn)
        if str(path) != ":memory:":
            for suffix in ("-wal", "-shm"):  # left by an older bosun with the old mode
                tighten(Path(str(path) + suffix))
    except BaseException:
        await conn.close()  # never leave the worker thread behind a failed open
        raise
    return conn


async def migrate(conn: aiosqlite.Connection) -> int:
    """Apply every migration not yet recorded; returns the schema version."""
    await run(conn, "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    applied = {row[0] for row in await fetch(conn, "SELECT name FROM schema_migrations")}
    known = {name for name, _ in MIGRATIONS}
    unknown = applied - known
    if unknown:
        raise SchemaTooNew(
            f"database has migrations this bosun does not know ({', '.join(sorted(unknown))}); "
            "upgrade bosun or point BOSUN_HOME elsewhere"
        )
    for name, sql in MIGRATIONS:
        if name in applied:
            continue
        await run(conn, "BEGIN IMMEDIATE")
        try:
            for statement in _split(sql):
                await run(conn, statement)
            await run(conn, "INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)", (name, time.time()))
            await run(conn, "COMMIT")
        except BaseException:
            await run(conn, "ROLLBACK")
            raise
    return SCHEMA_VERSION


INLINE_MAX_BYTES = 256 * 1024  # larger rows are read on the reader's thread: a copy that size is not "small"


class InlineReader:
    """Point reads of small rows on the caller's (the event loop's) thread, never waiting.

    A read-only autocommit connection: each statement is its own read transaction, finished
    (``fetchall``) before ``fetch`` returns, so no snapshot stays open. ``busy_timeout`` is 0, so a
    busy database answers at once instead of stalling the loop; ``fetch`` then returns None and
    the caller runs the same statement on the threaded reader (``db.fetch``: retried, and any
    real failure named there). Callers bound what a row can weigh (``INLINE_MAX_BYTES``) in SQL."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn: sqlite3.Connection | None = conn

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Any] | None:
        """Every row of ``sql``, or None when it could not run here at once (ask the threaded reader)."""
        conn = self._conn
        if conn is None:
            return None
        try:
            return conn.execute(sql, params).fetchall()
        except sqlite3.Error:
            return None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def aclose(self) -> None:
        self.close()


async def fetch_inline(inline: InlineReader | None, conn: aiosqlite.Connection, sql: str,
                       params: Sequence[Any] = (), operation: str = "read the store") -> list[Any]:
    """``fetch``, through ``inline`` when it can answer at once (same rows: the same statement)."""
    if inline is not None:
        rows = inline.fetch(sql, params)
        if rows is not None:
            return rows
    return await fetch(conn, sql, params, operation)


def open_inline_reader(path: Path | str) -> InlineReader | None:
    """The ``InlineReader`` of the migrated database at ``path`` (None for ``:memory:`` or when it cannot
    be opened: every read then takes the threaded reader)."""
    if str(path) == ":memory:":
        return None
    try:
        conn = sqlite3.connect(readonly_uri(path), uri=True, isolation_level=None, check_same_thread=False)
    except sqlite3.Error:
        return None
    try:
        conn.execute("PRAGMA busy_timeout=0")
        conn.execute("PRAGMA query_only=ON")
    except sqlite3.Error:
        conn.close()
        return None
    return InlineReader(conn)


async def open_reader(path: Path | str) -> aiosqlite.Connection | None:
    """A read-only connection to the migrated database at ``path`` (None for ``:memory:``: read on the writer)."""
    if str(path) == ":memory:":
        return None
    conn = await aiosqlite.connect(readonly_uri(path), uri=True, isolation_level=None)
    try:
        await run(conn, f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
        await run(conn, "PRAGMA query_only=ON")
    except BaseException:
        await conn.close()
        raise
    return conn


def _split(sql: str) -> list[str]:
    return [s.strip() for s in sql.split(";") if s.strip()]
