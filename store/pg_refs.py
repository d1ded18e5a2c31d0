"""Content-addressed blobs on PostgreSQL, streamed in 1 MiB chunks both ways.

A blob is a ``refs`` row plus ``ref_chunks`` rows, written in one transaction (visible exactly
when complete; a second daemon storing the same bytes waits on the primary key and then does
nothing). Writing sends memoryview slices of the caller's bytes, so no second full copy is
made; reading streams the chunks (libpq single-row mode) into one buffer the size of the blob,
hashing as they arrive, and ``BytesIO.getvalue`` hands that buffer out without copying it: the
peak is the blob once plus one chunk (tests/test_pg_refs.py measures it). The hash is checked on
every read, as on SQLite: wrong bytes are an IntegrityError, never an answer.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import time
from collections.abc import Iterable
from pathlib import Path

from bosun.core.errors import IntegrityError, InvalidInput, NotFound
from bosun.store.pg_db import PgDatabase
from bosun.store.refindex import resolve_prefix
from bosun.store.refs import PendingPut, RefInfo, make_ref, parse_ref

CHUNK = 1 << 20
_OFF_LOOP = 1 << 20  # hashing more than this runs in a thread (hashlib releases the GIL)


# a blob of one chunk: its refs row and its chunk in ONE statement (atomic in autocommit); a blob already
# stored (by this daemon or another) inserts nothing
_PUT_ONE = ("WITH r AS (INSERT INTO refs (sha256, media_type, size, chunks, created_at) VALUES (%s, %s, %s, 1, %s) "
            "ON CONFLICT (sha256) DO NOTHING RETURNING sha256) "
            "INSERT INTO ref_chunks (sha256, n, data) SELECT sha256, 0, %b FROM r")


def _digest(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


class PgRefStore:
    """The RefStore protocol on PostgreSQL."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db
        self._pending: set[asyncio.Future[list[str]]] = set()

    async def put(self, data: bytes, media_type: str = "text/plain") -> str:
        return (await self.put_many([(data, media_type)]))[0]

    def put_soon(self, data: bytes, media_type: str = "text/plain") -> PendingPut:
        items = _checked([(data, media_type)])
        future = asyncio.ensure_future(self._store(items))
        self._pending.add(future)
        future.add_done_callback(self._pending.discard)
        return PendingPut(future)

    async def put_many(self, items: Iterable[tuple[bytes, str]]) -> list[str]:
        """Store blobs in one transaction; idempotent (same bytes, same ref)."""
        checked = _checked(items)
        return await self._store(checked) if checked else []

    async def _store(self, items: list[tuple[memoryview, str]]) -> list[str]:
        digests = [(await asyncio.to_thread(_digest, v)) if len(v) > _OFF_LOOP else _digest(v) for v, _ in items]
        now = time.time()
        if len(items) == 1 and len(items[0][0]) <= CHUNK:  # the common case: one statement, one round trip
            (view, media), digest = items[0], digests[0]
            await self.db.run(_PUT_ONE, (digest, media, len(view), now, view), "store the payload", blobs=True)
            return [make_ref(digest)]
        async with self.db.connection("store the payload", wrote=True, blobs=True) as conn:
            async with conn.transaction():
                for (view, media), digest in zip(items, digests, strict=True):
                    n_chunks = max(1, -(-len(view) // CHUNK))
                    cur = await conn.execute(
                        "INSERT INTO refs (sha256, media_type, size, chunks, created_at) VALUES (%s, %s, %s, %s, %s) "
                        "ON CONFLICT (sha256) DO NOTHING RETURNING 1", (digest, media, len(view), n_chunks, now))
                    if await cur.fetchone() is None:
                        continue  # stored before (by us or another daemon): same bytes, nothing to do
                    for i in range(n_chunks):  # one chunk in flight at a time: never a copy of the whole blob
                        await conn.execute("INSERT INTO ref_chunks (sha256, n, data) VALUES (%s, %s, %b)",
                                           (digest, i, view[i * CHUNK:(i + 1) * CHUNK]), prepare=True)
        return [make_ref(d) for d in digests]

    async def put_file(self, path: Path, digest: str, media_type: str = "text/plain") -> str:
        """Store the file at ``path`` (sha256 ``digest``) read 1 MiB at a time, never whole: a huge observe's
        scrubbed output. Re-hashed as it is read; IntegrityError (and nothing stored) when it is not ``digest``."""
        size = path.stat().st_size
        n_chunks = max(1, -(-size // CHUNK))
        async with self.db.connection("store the payload", wrote=True, blobs=True) as conn:
            async with conn.transaction():
                cur = await conn.execute(
                    "INSERT INTO refs (sha256, media_type, size, chunks, created_at) VALUES (%s, %s, %s, %s, %s) "
                    "ON CONFLICT (sha256) DO NOTHING RETURNING 1", (digest, media_type, size, n_chunks, time.time()))
                if await cur.fetchone() is not None:  # else stored before: same bytes, nothing to do
                    hasher = hashlib.sha256()
                    with open(path, "rb") as fh:
                        for i in range(n_chunks):
                            piece = await asyncio.to_thread(fh.read, CHUNK)
                            hasher.update(piece)
                            await conn.execute("INSERT INTO ref_chunks (sha256, n, data) VALUES (%s, %s, %b)",
                                               (digest, i, piece), prepare=True)
                        whole = fh.tell() == size and not fh.read(1)
                    if hasher.hexdigest() != digest or not whole:  # rolls the transaction back
                        raise IntegrityError(f"the file hashes to sha256:{hasher.hexdigest()}, not sha256:{digest}: "
                                             "it changed while it was stored")
        return make_ref(digest)

    async def get(self, ref: str) -> bytes:
        """The bytes behind ``ref``, streamed and re-hashed: IntegrityError rather than wrong bytes."""
        digest = parse_ref(ref)
        hasher = hashlib.sha256()
        buf = io.BytesIO()
        size = -1
        async with self.db.connection("read the payload") as conn:
            cur = conn.cursor(binary=True)  # bytea as bytes on the wire, not hex text twice its size
            stream = cur.stream("SELECT r.size, c.data FROM refs r JOIN ref_chunks c ON c.sha256 = r.sha256 "
                                "WHERE r.sha256 = %s ORDER BY c.n", (digest,))
            async for total, chunk in stream:
                if size < 0:
                    size = int(total)
                    if size > 0:  # one allocation of the final size: no regrowth copies
                        buf.seek(size - 1)
                        buf.write(b"\0")
                        buf.seek(0)
                if len(chunk) > _OFF_LOOP // 4:
                    await asyncio.to_thread(hasher.update, chunk)
                else:
                    hasher.update(chunk)
                buf.write(chunk)
                del chunk
        if size < 0:
            raise NotFound("ref", make_ref(digest), "it was never stored here (check BOSUN_DATABASE_URL)")
        actual = hasher.hexdigest()
        if actual != digest or buf.tell() != size:
            raise IntegrityError(
                f"ref {make_ref(digest)} failed verification: stored bytes hash to sha256:{actual}; "
                "the store was altered outside bosun"
            )
        return buf.getvalue()  # the buffer itself (exactly sized), not a copy

    async def info(self, ref: str) -> RefInfo:
        digest = parse_ref(ref)
        rows = await self.db.fetch("SELECT media_type, size, created_at FROM refs WHERE sha256 = %s", (digest,),
                                   "read the payload's size")
        if not rows:
            raise NotFound("ref", make_ref(digest))
        media, size, created = rows[0]
        return RefInfo(sha256=digest, media_type=str(media), size=int(size), created_at=float(created))

    async def exists(self, ref: str) -> bool:
        digest = parse_ref(ref)
        return bool(await self.db.fetch("SELECT 1 FROM refs WHERE sha256 = %s", (digest,), "look up a payload"))

    async def verify(self, ref: str) -> bool:
        try:
            await self.get(ref)
        except (NotFound, IntegrityError):
            return False
        return True

    async def aclose(self) -> None:
        """Finish the writes already started (put_soon) before the pool closes."""
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)


def _checked(items: Iterable[tuple[bytes | bytearray | memoryview, str]]) -> list[tuple[memoryview, str]]:
    """Views of what the caller wants stored, validated before any work starts (no copies)."""
    out: list[tuple[memoryview, str]] = []
    for data, media_type in items:
        if not isinstance(data, bytes | bytearray | memoryview):
            raise InvalidInput("data", f"must be bytes, got {type(data).__name__}")
        out.append((memoryview(bytes(data) if isinstance(data, bytearray) else data).cast("B"), media_type))
    return out


class PgRefIndex:
    """Short refs on PostgreSQL: a range scan on the bytewise-sorted primary key."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    async def resolve(self, ref: str, field: str = "ref") -> str:
        return await resolve_prefix(self, ref, field)

    async def complete(self, hexpart: str, limit: int) -> list[str]:
        rows = await self.db.fetch("SELECT sha256 FROM refs WHERE sha256 >= %s AND sha256 < %s ORDER BY sha256 "
                                   "LIMIT %s", (hexpart, hexpart + "g", int(limit)), "resolve a short ref")
        return [str(r[0]) for r in rows]
