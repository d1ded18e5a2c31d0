"""Store a blob from a file without holding it: the huge-observe path's ``RefStore.put``.

``SQLiteRefStore.put`` takes the bytes whole, and SQLite then copies them (the bound parameter,
the record it builds): a 100 MB put rose the daemon's RSS by ~370 MB. This writes the row with
SQLite's incremental blob I/O from a connection of its own: the row is inserted with a zero blob
and filled 1 MiB per write, in one transaction (a row being filled is never seen; a failure leaves
nothing). The zero blob costs no memory because ``refs.data`` is the table's last column
(migration ``refs_0002_data_last``): SQLite keeps a trailing zero blob as a count, but expanded it
in memory when a column after it held data (+200 MB for a 100 MB put, measured). The transaction
holds SQLite's write lock while the file is copied (~2 s for 100 MB on a loaded machine): other
writers wait within the 5 s busy timeout; readers (WAL) do not wait.

PostgreSQL's store streams a blob in 1 MiB chunks: ``PgRefStore.put_file`` reads the file a chunk at a
time (it used to get a read-only mmap, whose pages counted in the daemon's RSS while mapped). Any
other store gets the bytes.
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import time
from pathlib import Path

from bosun.core.errors import IntegrityError
from bosun.store.refs import RefStore, SQLiteRefStore, make_ref

CHUNK = 1 << 20


async def put_file(refs: RefStore, path: Path, digest: str, media_type: str) -> str:
    """Store the file at ``path`` (sha256 ``digest``, computed while it was written) and return its ref."""
    from bosun.store.db import storage_error

    if isinstance(refs, SQLiteRefStore) and refs.writer is not None:
        try:
            return await asyncio.to_thread(sqlite_put_file, refs.writer.path, path, digest, media_type)
        except sqlite3.Error as exc:
            raise storage_error(exc, "store the payload") from exc
    if type(refs).__name__ == "PgRefStore":  # read 1 MiB at a time (an mmap's pages counted in the daemon's RSS)
        ref = await refs.put_file(path, digest, media_type)  # type: ignore[attr-defined]
    else:
        ref = await refs.put(await asyncio.to_thread(path.read_bytes), media_type)
    if ref != make_ref(digest):
        raise IntegrityError(f"the stored payload hashes to {ref}, not sha256:{digest}: the spool file changed")
    return ref


def sqlite_db(refs: RefStore) -> str | None:
    """The database file of a file-backed SQLite ref store (None for any other store)."""
    return refs.writer.path if isinstance(refs, SQLiteRefStore) and refs.writer is not None else None


def sqlite_put_file(db: str, path: Path, digest: str, media_type: str) -> str:
    """Store ``path`` in the ``refs`` table of ``db`` under ``digest`` (nothing when it is there already);
    re-hashed as it is copied: IntegrityError, and nothing stored, when it is not ``digest``."""
    size = path.stat().st_size
    conn = sqlite3.connect(db, timeout=5.0, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("BEGIN IMMEDIATE")
        try:
            if not conn.execute("SELECT 1 FROM refs WHERE sha256 = ?", (digest,)).fetchone():
                row = conn.execute("INSERT INTO refs (sha256, media_type, size, data, created_at) "
                                   "VALUES (?, ?, ?, zeroblob(?), ?)",
                                   (digest, media_type, size, size, time.time())).lastrowid
                assert row is not None
                hasher = hashlib.sha256()
                with open(path, "rb") as fh, conn.blobopen("refs", "data", row) as blob:
                    for _ in range(-(-size // CHUNK)):
                        piece = fh.read(CHUNK)
                        hasher.update(piece)
                        blob.write(piece)
                    whole = fh.tell() == size and not fh.read(1)
                if hasher.hexdigest() != digest or not whole:  # rolled back below: nothing stored
                    raise IntegrityError(f"the file hashes to sha256:{hasher.hexdigest()}, not sha256:{digest}: "
                                         "it changed while it was stored")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return make_ref(digest)
    finally:
        conn.close()
