"""Open the SQLite database (WAL), apply migrations, hand out the connection.

One shared aiosqlite connection per process (its worker thread serialises the journal and
the other small writes), plus the blob writer's own connection for large blobs
(``store/refs.py``); WAL lets them, and readers (``bosun verify``, a second CLI), work side
by side.
``synchronous=NORMAL`` in WAL mode survives a killed process (only a power
loss can drop the last commits), which is the durability bosun promises.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiosqlite

from bosun.store.private import private_dir, private_file, tighten
from bosun.store.schema import MIGRATIONS, SCHEMA_VERSION


async def run(conn: aiosqlite.Connection, sql: str, params: Sequence[Any] = ()) -> None:
    """Execute a statement whose rows nobody reads, with its cursor made and freed on
    aiosqlite's thread.

    ``await conn.execute(...)`` hands back a cursor that the event loop's thread frees
    later; freeing it resets its statement on a connection the worker thread may be using at
    that moment, and SQLite answers "bad parameter or other API misuse" (seen in ~1 of 8
    runs of 60 concurrent writes). ``execute_fetchall`` keeps the cursor inside the worker's
    call: one hop, nothing left behind.
    """
    await conn.execute_fetchall(sql, params)


async def run_many(conn: aiosqlite.Connection, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    """``run`` for a batch: the cursor is closed on the worker thread before it is dropped."""
    async with conn.executemany(sql, rows):
        pass


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
        await run(conn, "PRAGMA busy_timeout=5000")
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
    async with conn.execute("SELECT name FROM schema_migrations") as cur:
        applied = {row[0] for row in await cur.fetchall()}
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


def _split(sql: str) -> list[str]:
    return [s.strip() for s in sql.split(";") if s.strip()]
