"""The SQLite put from a file (issue 13): ``refs.data`` is the table's last column, so a zero blob is never
allocated; a store made before that migration is rebuilt and stays readable."""

from __future__ import annotations

import hashlib
import sqlite3
import time
from pathlib import Path

import pytest

from bosun.core.errors import IntegrityError
from bosun.server.blob_file import put_file, sqlite_put_file
from bosun.store.backend import open_stores
from bosun.store.refs import make_ref
from bosun.store.schema import MIGRATIONS
from tests.pg_cluster import BACKENDS, fresh_database


def columns(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        names = [row[1] for row in conn.execute("PRAGMA table_info(refs)")]
    conn.close()
    return names


async def test_a_store_from_before_the_migration_is_rebuilt_with_its_blobs_readable(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    old = [(name, sql) for name, sql in MIGRATIONS if name != "refs_0002_data_last"]
    blobs = [b"first payload\n", bytes(range(256)) * 40, b""]
    with sqlite3.connect(db) as conn:  # the schema and rows an older bosun left
        conn.execute("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
        for name, sql in old:
            conn.executescript(sql)
            conn.execute("INSERT INTO schema_migrations VALUES (?, ?)", (name, time.time()))
        for i, blob in enumerate(blobs):
            conn.execute("INSERT INTO refs (sha256, media_type, size, data, created_at) VALUES (?, ?, ?, ?, ?)",
                         (hashlib.sha256(blob).hexdigest(), "text/plain", len(blob), blob, 1000.0 + i))
    conn.close()
    assert columns(db)[-1] == "created_at"
    stores = await open_stores(db, None)
    try:
        for i, blob in enumerate(blobs):
            ref = make_ref(hashlib.sha256(blob).hexdigest())
            assert await stores.refs.get(ref) == blob
            info = await stores.refs.info(ref)
            assert info is not None and (info.size, info.created_at) == (len(blob), 1000.0 + i)
        assert await stores.refs.put(b"after the migration") == make_ref(hashlib.sha256(b"after the migration").hexdigest())
    finally:
        await stores.aclose()
    assert columns(db) == ["sha256", "media_type", "size", "created_at", "data"]


async def test_a_blob_put_from_a_file_reads_back_whole_and_is_stored_once(tmp_path: Path) -> None:
    stores = await open_stores(tmp_path / "b.db", None)
    await stores.aclose()
    data = b"".join(f"line {i}: \xc3\xa9 payload\n".encode() for i in range(300_000))  # several 1 MiB writes
    path = tmp_path / "scrubbed"
    path.write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    for _ in range(2):  # the second put finds it there
        assert sqlite_put_file(str(tmp_path / "b.db"), path, digest, "text/plain") == make_ref(digest)
    stores = await open_stores(tmp_path / "b.db", None)
    try:
        assert await stores.refs.get(make_ref(digest)) == data
    finally:
        await stores.aclose()
    with sqlite3.connect(tmp_path / "b.db") as conn:
        assert conn.execute("SELECT COUNT(*) FROM refs").fetchone() == (1,)
    conn.close()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_put_file_stores_a_file_in_chunks_once_and_refuses_one_that_changed(tmp_path: Path,
                                                                                backend: str) -> None:
    url = fresh_database() if backend == "postgresql" else None
    stores = await open_stores(tmp_path / "b.db", url)
    try:
        data = b"".join(f"row {i}: \xc3\xa9\n".encode() for i in range(400_000))  # several 1 MiB chunks
        path = tmp_path / "scrubbed"
        path.write_bytes(data)
        digest = hashlib.sha256(data).hexdigest()
        for _ in range(2):  # the second put finds it stored
            assert await put_file(stores.refs, path, digest, "text/plain") == make_ref(digest)
        assert await stores.refs.get(make_ref(digest)) == data
        other = hashlib.sha256(b"what the file held when it was hashed").hexdigest()
        with pytest.raises(IntegrityError):
            await put_file(stores.refs, path, other, "text/plain")
        assert not await stores.refs.exists(make_ref(other))
    finally:
        await stores.aclose()
