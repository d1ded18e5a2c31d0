"""PostgreSQL: the connection pool, the migrations, and the tool-facing form of its failures.

The driver is psycopg 3 with psycopg_pool (docs/storage.md: measured against asyncpg in the
same run; equal on a bare connection, faster pooled because asyncpg's pool resets every
connection it takes back with an extra round trip; typed, and it has LISTEN, COPY and a
streamed cursor built in).

Connection policy: every statement takes a connection from the pool in autocommit mode, so a
single statement is its own transaction (the journal append is one statement, as on SQLite);
a multi-statement write opens ``conn.transaction()``. The pool is sized for a daemon's
admission limit, not for one connection per agent.

``application_name`` carries a per-process ``origin``: the journal's trigger puts it in the
change notice, so a daemon can tell its own writes from another daemon's (store/pg_listen.py).
"""

from __future__ import annotations

import logging
import secrets
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from bosun.core.errors import StorageError
from bosun.store.db import SchemaTooNew
from bosun.store.pg_schema import MIGRATION_LOCK, PG_MIGRATIONS

log = logging.getLogger("bosun.store.pg")

POOL_MIN = 1
POOL_MAX = 16
BLOB_POOL_MAX = 4
POOL_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 10


async def _no_flush_wait(conn: psycopg.AsyncConnection[Any]) -> None:
    await conn.execute("SET synchronous_commit = off")


def new_origin() -> str:
    """A name for this process's connections, unique across hosts (fits application_name's 63 bytes)."""
    return f"bosun:{socket.gethostname()[:32]}:{secrets.token_hex(6)}"


def redact_url(url: str) -> str:
    """The URL without its password (what health and the logs show)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def is_postgres_url(url: str) -> bool:
    return urlsplit(url).scheme in ("postgresql", "postgres")


def is_bosun_check(exc: BaseException) -> bool:
    """Raised by one of bosun's own triggers (SQLSTATE class ``BS``: stale seq, append-only)."""
    return isinstance(exc, psycopg.Error) and (exc.sqlstate or "").startswith("BS")


def storage_error(exc: BaseException, operation: str, wrote: bool = False) -> StorageError:
    """A PostgreSQL failure as the tools report it (never the SQL or the caller's data).

    ``wrote``: the statement may have reached the server, so a lost connection leaves its
    outcome unknown (an idempotency key makes the re-send safe anyway).
    """
    if isinstance(exc, PoolTimeout):
        return StorageError(operation, f"no database connection became free within {POOL_TIMEOUT_S:.0f}s", True,
                            "the daemon or the database is overloaded, or PostgreSQL is restarting; retry in a few seconds")
    if isinstance(exc, pg_errors.DiskFull):
        return StorageError(operation, "the database server's disk is full", True, "free space on the server")
    if isinstance(exc, pg_errors.ReadOnlySqlTransaction):
        return StorageError(operation, "the database is read-only (a standby?)", True,
                            "point BOSUN_DATABASE_URL at the primary")
    if isinstance(exc, pg_errors.InsufficientPrivilege):
        return StorageError(operation, "the database role lacks a privilege", False,
                            "grant the bosun role ownership of its schema")
    if isinstance(exc, psycopg.OperationalError):
        advice = ("re-send the call with the same idempotency key (bosun stdio adds one to every call): it is "
                  "applied at most once; the daemon reconnects by itself" if wrote else
                  "retry in a few seconds: the daemon reconnects by itself once PostgreSQL answers at "
                  "BOSUN_DATABASE_URL")
        return StorageError(operation, f"the database connection failed ({type(exc).__name__})", not wrote, advice)
    return StorageError(operation, f"PostgreSQL error: {type(exc).__name__}", not wrote,
                        "retry once; if it fails again, check the daemon log")


class PgDatabase:
    """The pool of one daemon, and the helpers every PostgreSQL store uses."""

    def __init__(self, url: str, origin: str | None = None, max_size: int = POOL_MAX) -> None:
        self.url = url
        self.origin = origin or new_origin()
        kwargs = {"autocommit": True, "application_name": self.origin, "connect_timeout": CONNECT_TIMEOUT_S}
        self.pool = AsyncConnectionPool(url, min_size=POOL_MIN, max_size=max_size, timeout=POOL_TIMEOUT_S,
                                        open=False, kwargs=kwargs, name="bosun")
        # blob writes commit without waiting for the WAL flush: a blob is content-addressed and only matters
        # once a journal event names it, and that event's own (synchronous) commit flushes the WAL through
        # the blob's earlier commit record. A server crash can lose only blobs nothing durable points at yet;
        # observe pays one flush, not two.
        self.blob_pool = AsyncConnectionPool(url, min_size=POOL_MIN, max_size=BLOB_POOL_MAX, timeout=POOL_TIMEOUT_S,
                                             open=False, kwargs=kwargs, configure=_no_flush_wait,
                                             name="bosun-blobs")

    async def open(self) -> None:
        """Connect once (an unreachable server is a StorageError at once, not after the pool's retries),
        migrate on that connection, then open the pool."""
        try:
            first = await psycopg.AsyncConnection.connect(self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
                                                          application_name=self.origin + ":migrate")
        except psycopg.Error as exc:
            raise StorageError("open the database", f"cannot connect to {redact_url(self.url)}", True,
                               "check BOSUN_DATABASE_URL and that PostgreSQL accepts connections") from exc
        async with first:
            await migrate(first)
        try:
            await self.pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
            await self.blob_pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        await self.blob_pool.close()
        await self.pool.close()

    @asynccontextmanager
    async def connection(self, operation: str, wrote: bool = False,
                         blobs: bool = False) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A pooled connection (``blobs``: from the blob writers' pool); driver failures leave as a
        StorageError (integrity errors pass through)."""
        try:
            async with (self.blob_pool if blobs else self.pool).connection() as conn:
                yield conn
        except PoolTimeout as exc:
            raise storage_error(exc, operation, False) from exc
        except psycopg.Error as exc:
            if isinstance(exc, pg_errors.IntegrityError) or is_bosun_check(exc):
                raise  # the caller's answer (a conflict, a reused key), not a storage failure
            raise storage_error(exc, operation, wrote) from exc

    async def fetch(self, sql: str, params: Any = (), operation: str = "read the store") -> list[tuple[Any, ...]]:
        """Every row of a read. A read is run once more on a fresh connection when the pooled one turns
        out dead (the server restarted, a proxy dropped it): a read has no effect to repeat."""
        for attempt in (1, 2):
            conn: psycopg.AsyncConnection[Any] | None = None
            try:
                async with self.pool.connection() as conn:
                    cur = await conn.execute(sql, params, prepare=True)
                    return list(await cur.fetchall())
            except psycopg.OperationalError as exc:
                if attempt == 2 or conn is None or not conn.closed:
                    raise storage_error(exc, operation) from exc
                log.info("a pooled connection was dead (%s); reading again on a fresh one", exc)
            except psycopg.Error as exc:
                if isinstance(exc, pg_errors.IntegrityError) or is_bosun_check(exc):
                    raise
                raise storage_error(exc, operation) from exc
        raise AssertionError("unreachable")

    async def run(self, sql: str, params: Any = (), operation: str = "write to the store", blobs: bool = False) -> None:
        async with self.connection(operation, wrote=True, blobs=blobs) as conn:
            await conn.execute(sql, params, prepare=True)


async def migrate(conn: psycopg.AsyncConnection[Any]) -> int:
    """Apply every PostgreSQL migration not yet recorded, under an advisory lock (two daemons
    starting together migrate once); a database with migrations this bosun does not know is refused."""
    await conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
    try:
        await conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations "
                           "(name TEXT PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)")
        cur = await conn.execute("SELECT name FROM schema_migrations")
        applied = {str(r[0]) for r in await cur.fetchall()}
        unknown = applied - {name for name, _ in PG_MIGRATIONS}
        if unknown:
            raise SchemaTooNew(
                f"database has migrations this bosun does not know ({', '.join(sorted(unknown))}); "
                "upgrade bosun or point BOSUN_DATABASE_URL elsewhere"
            )
        for name, sql in PG_MIGRATIONS:
            if name in applied:
                continue
            async with conn.transaction():  # DDL is transactional: a failed migration leaves nothing
                await conn.execute(sql.encode())  # several statements: no parameters, simple protocol
                await conn.execute("INSERT INTO schema_migrations (name, applied_at) VALUES (%s, %s)",
                                   (name, time.time()))
            log.info("applied migration %s", name)
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))
    return len(PG_MIGRATIONS)
