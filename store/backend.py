"""The one backend factory: ``open_stores`` gives the Engine every store, on SQLite or PostgreSQL.

Without a database URL everything lives in ``$BOSUN_HOME/bosun.db`` (SQLite, WAL) as before;
with ``BOSUN_DATABASE_URL=postgresql://...`` the task journal, refs, embedding cache and
idempotency keys live in PostgreSQL, and several daemons (each with its own BOSUN_HOME) share
them. Services only see the Protocols; nothing outside ``store/`` opens a connection.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiosqlite

from bosun.store.embeddings import EmbeddingStore
from bosun.store.fleet import FleetStore, LocalFleet
from bosun.store.idempotency import IdempotencyStore
from bosun.store.refindex import RefIndex
from bosun.store.refs import RefStore
from bosun.store.tasks import TaskStore

log = logging.getLogger("bosun.store")

OnChange = Callable[[str], None]
OnGap = Callable[[], None]


@dataclass
class Stores:
    """Every store of one daemon, and how to close them."""

    backend: str  # "sqlite" | "postgresql"
    location: str  # the database file, or the URL without its password
    schema_version: int
    tasks: TaskStore
    refs: RefStore
    ref_index: RefIndex
    embeddings: EmbeddingStore
    idempotency: IdempotencyStore
    conn: aiosqlite.Connection | None = None  # SQLite only: the writer connection
    reader: aiosqlite.Connection | None = None  # SQLite only: the read-only connection
    fleet: FleetStore = field(default_factory=LocalFleet)  # every daemon on this state (store/fleet.py)
    origin: str = ""  # PostgreSQL: this process's name in the fleet (its connections' application_name)
    _closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    _watch: Callable[[OnChange, OnGap | None], Awaitable[Callable[[], Awaitable[None]]]] | None = None

    async def watch_tasks(self, on_change: OnChange, on_gap: OnGap | None = None) -> None:
        """Call ``on_change(task_id)`` when ANOTHER process writes a task (PostgreSQL: LISTEN/NOTIFY).

        On SQLite a daemon is alone with its home (serve.lock), so there is nothing to hear.
        """
        if self._watch is not None:
            self._closers.insert(0, await self._watch(on_change, on_gap))

    async def aclose(self) -> None:
        """Close in order (listener, writers that finish pending puts, then connections); idempotent."""
        closers, self._closers = self._closers, []
        for close in closers:
            try:
                await close()
            except Exception:
                log.exception("closing a store failed")


async def open_stores(db_path: Path | str, database_url: str | None = None) -> Stores:
    """Open (and migrate) the configured backend."""
    if database_url:
        return await _open_postgres(database_url)
    return await _open_sqlite(db_path)


async def _open_sqlite(db_path: Path | str) -> Stores:
    from bosun.store.db import open_db, open_inline_reader, open_reader
    from bosun.store.embeddings import SQLiteEmbeddingStore
    from bosun.store.idempotency import SQLiteIdempotencyStore
    from bosun.store.refindex import SQLiteRefIndex
    from bosun.store.refs import BlobWriter, SQLiteRefStore
    from bosun.store.schema import SCHEMA_VERSION
    from bosun.store.tasks import SQLiteTaskStore

    conn = await open_db(db_path)
    try:
        reader = await open_reader(db_path)
    except BaseException:
        await conn.close()
        raise
    path = str(db_path)
    inline = open_inline_reader(db_path) if reader is not None else None  # after the migration: tables exist
    refs = SQLiteRefStore(conn, None if path == ":memory:" else BlobWriter(path), reader, inline)
    tasks = SQLiteTaskStore(conn, db_path, reader)
    stores = Stores("sqlite", path, SCHEMA_VERSION, tasks, refs, SQLiteRefIndex(reader or conn, inline),
                    SQLiteEmbeddingStore(conn, reader), SQLiteIdempotencyStore(conn, reader, inline), conn, reader)
    stores._closers = [tasks.aclose, refs.aclose]
    if inline is not None:
        stores._closers.append(inline.aclose)
    if reader is not None:
        stores._closers.append(reader.close)
    stores._closers.append(conn.close)
    return stores


async def _open_postgres(url: str) -> Stores:
    try:
        from bosun.store.pg_db import PgDatabase, redact_url
        from bosun.store.pg_fleet import PgFleet
    except ImportError as exc:  # the driver is a dependency; a trimmed install says what is missing
        raise RuntimeError("BOSUN_DATABASE_URL needs psycopg 3 with its pool: pip install 'psycopg[binary,pool]'") \
            from exc
    from bosun.store.pg_listen import TaskChangeListener
    from bosun.store.pg_misc import PgEmbeddingStore, PgIdempotencyStore
    from bosun.store.pg_refs import PgRefIndex, PgRefStore
    from bosun.store.pg_schema import PG_SCHEMA_VERSION
    from bosun.store.pg_tasks import PgTaskStore

    db = PgDatabase(url)
    await db.open()
    refs = PgRefStore(db)

    async def watch(on_change: OnChange, on_gap: OnGap | None) -> Callable[[], Awaitable[None]]:
        listener = TaskChangeListener(url, db.origin, on_change, on_gap)
        await listener.start()
        return listener.aclose

    stores = Stores("postgresql", redact_url(url), PG_SCHEMA_VERSION, PgTaskStore(db), refs, PgRefIndex(db),
                    PgEmbeddingStore(db), PgIdempotencyStore(db), fleet=PgFleet(db), origin=db.origin)
    stores._closers = [refs.aclose, db.close]
    stores._watch = watch
    return stores
