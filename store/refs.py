"""Content-addressed blobs: ``mem://sha256:<hex>``, verified on every read.

``RefStore`` is the seam for a second backend (PostgreSQL, object storage):
the Engine and the tools only see the protocol.

Writes of a file-backed store go through a ``BlobWriter``: one thread with its own
SQLite connection that hashes and inserts. Hashing and inserting a megabyte hold the
GIL for almost none of their ~1.5 ms, so the event loop serves other calls meanwhile,
and ``put_soon`` lets a caller (observe) start the write and build its answer while
the bytes are being stored. Reads go to the reader connection (``db.open_reader``; WAL: a
committed blob is visible to it at once), so a 100 MB read never queues behind the journal.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import logging
import re
import sqlite3
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

import aiosqlite

from bosun.core.errors import IntegrityError, InvalidInput, NotFound
from bosun.store.db import INLINE_MAX_BYTES, InlineReader, fetch, run_many, storage_error

log = logging.getLogger(__name__)

REF_PREFIX = "mem://sha256:"
_HEX = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class RefInfo:
    """What is known about a stored blob without reading it."""

    sha256: str
    media_type: str
    size: int
    created_at: float

    @property
    def ref(self) -> str:
        return REF_PREFIX + self.sha256


def make_ref(digest: str) -> str:
    return REF_PREFIX + digest


def parse_ref(ref: str, field: str = "ref") -> str:
    """Accept ``mem://sha256:<hex>``, ``sha256:<hex>``, ``bosun://ref/<hex>`` or bare hex."""
    if not isinstance(ref, str) or not ref.strip():
        raise InvalidInput(field, "must be a non-empty string", "mem://sha256:<64 hex chars>")
    text = ref.strip()
    for prefix in (REF_PREFIX, "sha256:", "bosun://ref/"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
            break
    text = text.lower()
    if not _HEX.match(text):
        raise InvalidInput(field, f"not a content address: {ref[:80]!r}", "mem://sha256:<64 hex chars>")
    return text


class RefStore(Protocol):
    """Persistence of content-addressed blobs."""

    async def put(self, data: bytes, media_type: str = "text/plain") -> str: ...

    def put_soon(self, data: bytes, media_type: str = "text/plain") -> PendingPut:
        """Start storing ``data`` now; ``await pending.ref()`` gives its ref once it is committed.

        Await it before anything durable points at the ref.
        """
        ...

    async def put_many(self, items: Iterable[tuple[bytes, str]]) -> list[str]: ...

    async def get(self, ref: str) -> bytes: ...

    async def info(self, ref: str) -> RefInfo: ...

    async def exists(self, ref: str) -> bool: ...

    async def verify(self, ref: str) -> bool: ...

    async def aclose(self) -> None:
        """Finish the writes already submitted and release what the store holds (not a shared connection)."""
        ...


_INSERT = "INSERT OR IGNORE INTO refs (sha256, media_type, size, data, created_at) VALUES (?, ?, ?, ?, ?)"
Blob = tuple[bytes, str]  # bytes, media type


def _blobs(items: Iterable[tuple[bytes | bytearray | memoryview, str]]) -> list[Blob]:
    """Validated, immutable copies of what a caller wants stored (checked before any work starts)."""
    out: list[Blob] = []
    for data, media_type in items:
        if not isinstance(data, bytes | bytearray | memoryview):
            raise InvalidInput("data", f"must be bytes, got {type(data).__name__}")
        out.append((data if isinstance(data, bytes) else bytes(data), media_type))
    return out


def _rows(blobs: list[Blob]) -> tuple[list[tuple[str, str, int, bytes, float]], list[str]]:
    now = time.time()
    rows = [(hashlib.sha256(b).hexdigest(), media, len(b), b, now) for b, media in blobs]
    return rows, [make_ref(r[0]) for r in rows]


class PendingPut:
    """A blob write in flight (``RefStore.put_soon``)."""

    def __init__(self, future: concurrent.futures.Future[list[str]] | asyncio.Future[list[str]]) -> None:
        self._future = future

    def done(self) -> bool:
        return self._future.done()

    async def ref(self) -> str:
        """The ref, once the bytes are committed (raises what the write raised)."""
        f = self._future
        try:
            if isinstance(f, concurrent.futures.Future):
                if f.done():  # committed already: no round trip through the event loop
                    return f.result()[0]
                return (await asyncio.wrap_future(f))[0]
            return (await f)[0]
        except sqlite3.IntegrityError:
            raise
        except sqlite3.Error as exc:
            raise storage_error(exc, "store the payload") from exc

    async def settle(self) -> None:
        """Wait for the write to end, whatever its outcome (a caller that failed before awaiting it)."""
        try:
            await self.ref()
        except Exception:  # the caller's own error is the one to report
            pass


class BlobWriter:
    """One thread with its own connection to the database file: hashes and stores blobs.

    Every batch is one transaction, committed before its future resolves (the same
    durability as the shared connection: WAL, ``synchronous=NORMAL``). Writes from this
    connection and the shared one are serialised by SQLite's lock (busy timeout 5 s).

    Blobs are what grows the WAL, and SQLite checkpoints it inside the commit that crosses
    its threshold, syncing the database file (10-27 ms here): a call that happened to cross
    it waits. So a second thread checkpoints (PASSIVE: writers carry on) once writes have
    paused for ``IDLE_S``: paced like an agent's calls, the WAL is then already copied back
    when the next megabyte arrives. In a burst with no pause, SQLite's own trigger still runs.
    """

    IDLE_S = 0.05

    def __init__(self, path: str) -> None:
        self.path = path
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="bosun-blobs")
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._unchecked = 0  # blob bytes written since the last checkpoint
        self._last_write = 0.0
        self.checkpoints = 0
        self._checkpointer = threading.Thread(target=self._checkpoint_when_idle, name="bosun-wal", daemon=True)
        self._checkpointer.start()

    def submit(self, blobs: list[Blob]) -> concurrent.futures.Future[list[str]]:
        with self._lock:
            if self._closed:
                raise RuntimeError("the blob writer is closed")
            return self._pool.submit(self._write, blobs)

    def _write(self, blobs: list[Blob]) -> list[str]:
        rows, refs = _rows(blobs)  # hashing releases the GIL: the event loop runs meanwhile
        if self._conn is None:
            self._conn = _connect(self.path)
        conn = self._conn
        if len(rows) == 1:  # one statement is its own transaction (autocommit): fewer trips through the GIL
            conn.execute(_INSERT, rows[0])
        else:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(_INSERT, rows)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        with self._wake:
            self._unchecked += sum(r[2] for r in rows)
            self._last_write = time.monotonic()
            self._wake.notify()
        return refs

    def _checkpoint_when_idle(self) -> None:
        """Checkpoint after writes pause; ends when the writer closes. Never raises."""
        conn: sqlite3.Connection | None = None
        try:
            while True:
                with self._wake:
                    while not self._closed:
                        idle = time.monotonic() - self._last_write
                        if self._unchecked and idle >= self.IDLE_S:
                            break
                        self._wake.wait(self.IDLE_S - idle if self._unchecked else None)
                    if self._closed:
                        return
                    self._unchecked = 0
                try:
                    if conn is None:
                        conn = _connect(self.path)
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.checkpoints += 1
                except sqlite3.Error as exc:  # SQLite's own trigger still runs at the next threshold
                    log.warning("background WAL checkpoint failed: %s", exc)
        finally:
            if conn is not None:
                conn.close()

    def _close_conn(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        """Finish the writes already submitted, then close the connections and the threads."""
        with self._wake:
            if self._closed:
                return
            self._closed = True
            self._wake.notify_all()
        self._pool.submit(self._close_conn).result()
        self._pool.shutdown(wait=True)
        self._checkpointer.join()


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=5.0, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def verified(digest: str, data: bytes) -> bytes:
    """``data`` if it hashes to ``digest``, else IntegrityError: every read path checks the same way."""
    # hashlib releases the GIL on large buffers: verifying 100 MB in a thread keeps the loop serving
    actual = (await asyncio.to_thread(_sha256, data)) if len(data) > (1 << 20) else _sha256(data)
    if actual != digest:
        raise IntegrityError(
            f"ref {make_ref(digest)} failed verification: stored bytes hash to sha256:{actual}; "
            "the store was altered outside bosun"
        )
    return data


_SMALL_DATA = "SELECT CASE WHEN size <= ? THEN data END FROM refs WHERE sha256 = ?"  # the inline read: small only


class SQLiteRefStore:
    """Blobs in the ``refs`` table of the bosun database.

    With ``writer`` (a file database), writes go through the ``BlobWriter`` thread;
    without it (``:memory:``, tests), through the shared connection.
    """

    def __init__(self, conn: aiosqlite.Connection, writer: BlobWriter | None = None,
                 reader: aiosqlite.Connection | None = None, inline: InlineReader | None = None) -> None:
        self.conn = conn
        self.writer = writer
        self.reader = reader or conn
        self.inline = inline  # small blobs read on the loop's thread, without a hop (store/db.py)

    async def put(self, data: bytes, media_type: str = "text/plain") -> str:
        return (await self.put_many([(data, media_type)]))[0]

    def put_soon(self, data: bytes, media_type: str = "text/plain") -> PendingPut:
        blobs = _blobs([(data, media_type)])
        if self.writer is None:
            return PendingPut(asyncio.ensure_future(self._put_shared_many(blobs)))
        return PendingPut(self.writer.submit(blobs))

    async def put_many(self, items: Iterable[tuple[bytes, str]]) -> list[str]:
        """Store blobs in one transaction; idempotent (same bytes, same ref)."""
        blobs = _blobs(items)
        if not blobs:
            return []
        if self.writer is not None:
            try:
                return await asyncio.wrap_future(self.writer.submit(blobs))
            except sqlite3.IntegrityError:
                raise
            except sqlite3.Error as exc:
                raise storage_error(exc, "store the payload") from exc
        return await self._put_shared_many(blobs)

    def close(self) -> None:
        """Finish and stop the blob writer (the shared connection is the Engine's to close)."""
        if self.writer is not None:
            self.writer.close()

    async def aclose(self) -> None:
        if self.writer is not None:
            await asyncio.to_thread(self.writer.close)  # waits for submitted writes, off the event loop

    async def _put_shared_many(self, blobs: list[Blob]) -> list[str]:
        rows, refs = _rows(blobs)
        await run_many(self.conn, _INSERT, rows, "store the payload")
        return refs

    async def get(self, ref: str) -> bytes:
        """The bytes behind ``ref``, re-hashed: raises IntegrityError rather than return wrong bytes."""
        digest = parse_ref(ref)
        rows = self.inline.fetch(_SMALL_DATA, (INLINE_MAX_BYTES, digest)) if self.inline is not None else None
        if rows is None or (rows and rows[0][0] is None):  # not answered inline, or a large blob
            rows = await fetch(self.reader, "SELECT data FROM refs WHERE sha256 = ?", (digest,), "read the payload")
        if not rows:
            raise NotFound("ref", make_ref(digest), "it was never stored here (check BOSUN_HOME)")
        return await verified(digest, bytes(rows[0][0]))

    async def info(self, ref: str) -> RefInfo:
        digest = parse_ref(ref)
        rows = await fetch(self.reader, "SELECT media_type, size, created_at FROM refs WHERE sha256 = ?", (digest,),
                           "read the payload's size")
        if not rows:
            raise NotFound("ref", make_ref(digest))
        row = rows[0]
        return RefInfo(sha256=digest, media_type=row[0], size=int(row[1]), created_at=float(row[2]))

    async def exists(self, ref: str) -> bool:
        digest = parse_ref(ref)
        return bool(await fetch(self.reader, "SELECT 1 FROM refs WHERE sha256 = ?", (digest,), "look up a payload"))

    async def verify(self, ref: str) -> bool:
        """True when the blob is present and intact."""
        try:
            await self.get(ref)
        except (NotFound, IntegrityError):
            return False
        return True

