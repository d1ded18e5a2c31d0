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
from pathlib import Path

import aiosqlite

from bosun.store.schema import MIGRATIONS, SCHEMA_VERSION


class SchemaTooNew(RuntimeError):
    """The database was written by a newer bosun; refuse rather than corrupt it."""


async def open_db(path: Path | str) -> aiosqlite.Connection:
    """Open (creating if needed) the database at ``path`` and migrate it forward."""
    if str(path) != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = await aiosqlite.connect(str(path), isolation_level=None)
    try:
        await conn.execute("PRAGMA journal_mode=WAL")
        await conn.execute("PRAGMA synchronous=NORMAL")
        await conn.execute("PRAGMA busy_timeout=5000")
        await conn.execute("PRAGMA foreign_keys=ON")
        await migrate(conn)
    except BaseException:
        await conn.close()  # never leave the worker thread behind a failed open
        raise
    return conn


async def migrate(conn: aiosqlite.Connection) -> int:
    """Apply every migration not yet recorded; returns the schema version."""
    await conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)"
    )
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
        await conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _split(sql):
                await conn.execute(statement)
            await conn.execute(
                "INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)", (name, time.time())
            )
            await conn.execute("COMMIT")
        except BaseException:
            await conn.execute("ROLLBACK")
            raise
    return SCHEMA_VERSION


def _split(sql: str) -> list[str]:
    return [s.strip() for s in sql.split(";") if s.strip()]
