"""The content-addressed store: idempotent puts, verified reads, migrations."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from bosun.core.errors import IntegrityError, InvalidInput, NotFound
from bosun.store.db import SchemaTooNew, open_db
from bosun.store.refs import BlobWriter, SQLiteRefStore, parse_ref
from bosun.store.schema import SCHEMA_VERSION


async def test_put_is_idempotent_and_content_addressed(tmp_path: Path) -> None:
    conn = await open_db(tmp_path / "b.db")
    store = SQLiteRefStore(conn)
    data = b"pytest output\nFAILED tests/test_x.py::test_y\n"
    ref1 = await store.put(data)
    ref2 = await store.put(data, "text/plain")
    assert ref1 == ref2 == "mem://sha256:" + hashlib.sha256(data).hexdigest()
    assert await store.get(ref1) == data
    info = await store.info(ref1)
    assert info.size == len(data)
    async with conn.execute("SELECT COUNT(*) FROM refs") as cur:
        assert (await cur.fetchone())[0] == 1
    await conn.close()


async def test_put_many_is_one_batch(tmp_path: Path) -> None:
    conn = await open_db(tmp_path / "b.db")
    store = SQLiteRefStore(conn)
    refs = await store.put_many([(f"payload {i}".encode(), "text/plain") for i in range(100)])
    assert len(set(refs)) == 100
    assert all([await store.exists(r) for r in refs[:5]])
    await conn.close()


async def test_flipped_byte_in_the_database_is_an_integrity_error(tmp_path: Path) -> None:
    path = tmp_path / "b.db"
    conn = await open_db(path)
    store = SQLiteRefStore(conn)
    data = b"A" * 4096
    ref = await store.put(data)
    await conn.close()
    # alter the stored blob behind bosun's back, as disk corruption or a stray tool would
    raw = sqlite3.connect(path)
    blob = bytearray(raw.execute("SELECT data FROM refs").fetchone()[0])
    blob[1234] ^= 0x01
    raw.execute("UPDATE refs SET data = ?", (bytes(blob),))
    raw.commit()
    raw.close()
    conn = await open_db(path)
    store = SQLiteRefStore(conn)
    with pytest.raises(IntegrityError, match="failed verification"):
        await store.get(ref)
    assert await store.verify(ref) is False
    await conn.close()


async def test_unknown_and_malformed_refs(tmp_path: Path) -> None:
    conn = await open_db(tmp_path / "b.db")
    store = SQLiteRefStore(conn)
    with pytest.raises(NotFound):
        await store.get("mem://sha256:" + "ab" * 32)
    with pytest.raises(InvalidInput, match="ref"):
        await store.get("mem://sha256:xyz")
    await conn.close()


async def test_blob_writer_stores_on_its_thread_and_the_shared_connection_reads(tmp_path: Path) -> None:
    """put / put_many / put_soon through the writer thread: committed when they return, readable at once."""
    path = tmp_path / "b.db"
    conn = await open_db(path)
    store = SQLiteRefStore(conn, BlobWriter(str(path)))
    data = b"x" * 300_000 + b"\nFAILED tests/test_a.py\n"
    pending = store.put_soon(data, "text/plain; charset=utf-8")
    ref = await pending.ref()
    assert pending.done() and ref == "mem://sha256:" + hashlib.sha256(data).hexdigest()
    assert await store.get(ref) == data
    assert (await store.info(ref)).media_type == "text/plain; charset=utf-8"
    assert await store.put(data) == ref  # idempotent through the writer too
    many = await store.put_many([(f"blob {i}".encode(), "text/plain") for i in range(50)])
    soon = [store.put_soon(f"soon {i}".encode()) for i in range(20)]  # queued, all committed in order
    refs = [await p.ref() for p in soon]
    assert all([await store.exists(r) for r in many + refs])
    async with conn.execute("SELECT COUNT(*) FROM refs") as cur:
        assert (await cur.fetchone())[0] == 1 + 50 + 20
    store.close()
    with pytest.raises(RuntimeError, match="closed"):
        store.put_soon(b"late")
    store.close()  # closing twice is harmless
    await conn.close()


async def test_a_pending_put_survives_the_caller_failing(tmp_path: Path) -> None:
    """A caller that fails before awaiting its write still gets it committed (settle), never half-written."""
    path = tmp_path / "b.db"
    conn = await open_db(path)
    store = SQLiteRefStore(conn, BlobWriter(str(path)))
    pending = store.put_soon(b"bytes of a result whose outline failed")
    await pending.settle()
    assert await store.exists("mem://sha256:" + hashlib.sha256(b"bytes of a result whose outline failed").hexdigest())
    with pytest.raises(InvalidInput, match="data"):
        store.put_soon("not bytes")  # type: ignore[arg-type]
    store.close()
    await conn.close()


async def test_writes_from_the_writer_and_the_shared_connection_interleave(tmp_path: Path) -> None:
    """Two connections write one WAL database: neither write is lost, neither waits forever."""
    import asyncio

    path = tmp_path / "b.db"
    conn = await open_db(path)
    store = SQLiteRefStore(conn, BlobWriter(str(path)))
    shared = SQLiteRefStore(conn)

    async def via_writer(i: int) -> str:
        return await store.put_soon(f"writer {i} ".encode() * 5000).ref()

    try:
        refs = await asyncio.gather(*[via_writer(i) for i in range(30)],
                                    *[shared.put(f"shared {i}".encode()) for i in range(30)])
        assert len(set(refs)) == 60
        assert all([await shared.verify(r) for r in refs])
    finally:  # an open connection's thread would keep the test process alive
        store.close()
        await conn.close()


async def test_the_wal_is_checkpointed_once_writes_pause(tmp_path: Path) -> None:
    """The blob writer's second thread copies the WAL back when writes pause, off the write path."""
    import asyncio

    path = tmp_path / "b.db"
    conn = await open_db(path)
    writer = BlobWriter(str(path))
    store = SQLiteRefStore(conn, writer)
    for i in range(5):
        await store.put_soon(f"{i} ".encode() * 100_000).ref()
    for _ in range(100):
        await asyncio.sleep(writer.IDLE_S)
        if writer.checkpoints:
            break
    assert writer.checkpoints >= 1
    with sqlite3.connect(path) as raw:
        busy, frames, copied = raw.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    assert busy == 0 and frames == copied  # nothing left to copy back
    store.close()  # the checkpointer thread is waiting: close ends it
    assert not writer._checkpointer.is_alive()
    await conn.close()


def test_parse_ref_accepts_every_spelling() -> None:
    digest = "ab" * 32
    for spelling in (f"mem://sha256:{digest}", f"sha256:{digest}", f"bosun://ref/{digest}", digest.upper()):
        assert parse_ref(spelling) == digest


async def test_migrations_are_recorded_and_refuse_a_newer_database(tmp_path: Path) -> None:
    path = tmp_path / "b.db"
    conn = await open_db(path)
    async with conn.execute("SELECT COUNT(*) FROM schema_migrations") as cur:
        assert (await cur.fetchone())[0] == SCHEMA_VERSION
    async with conn.execute("PRAGMA journal_mode") as cur:
        assert (await cur.fetchone())[0] == "wal"
    await conn.execute("INSERT INTO schema_migrations VALUES ('9999_from_the_future', 0)")
    await conn.close()
    with pytest.raises(SchemaTooNew, match="9999_from_the_future"):
        await open_db(path)


async def test_concurrent_writes_on_the_shared_connection_never_misuse_it(tmp_path: Path) -> None:
    """Cursors of fire-and-forget statements must be freed on aiosqlite's thread: freed on the
    event loop's, they reset a statement the worker is using (SQLite: "API misuse"), which
    60 concurrent puts hit in ~1 of 8 rounds."""
    import asyncio

    conn = await open_db(tmp_path / "b.db")
    shared = SQLiteRefStore(conn)
    try:
        for round_ in range(20):
            refs = await asyncio.gather(*[shared.put(f"round {round_} blob {i} ".encode() * 500) for i in range(60)])
            assert len(set(refs)) == 60
    finally:
        await conn.close()
