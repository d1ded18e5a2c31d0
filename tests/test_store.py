"""The stores on both backends (SQLite, a throwaway PostgreSQL): idempotent content-addressed puts, verified
reads, short refs, embeddings, idempotency records, migrations; then the SQLite blob writer's own tests."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest

from bosun.core.errors import IntegrityError, InvalidInput, NotFound
from bosun.store.backend import Stores, open_stores
from bosun.store.db import SchemaTooNew, open_db
from bosun.store.refs import BlobWriter, SQLiteRefStore, parse_ref
from bosun.store.schema import SCHEMA_VERSION
from tests.pg_cluster import BACKENDS, fresh_database


@pytest.fixture(params=BACKENDS)
async def opened(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Stores, str | None]]:
    """Every store of one backend (store/backend.py), and its database URL (None: SQLite at tmp/b.db)."""
    url = fresh_database() if request.param == "postgresql" else None
    stores = await open_stores(tmp_path / "b.db", url)
    try:
        yield stores, url
    finally:
        await stores.aclose()


def raw_fetch(where: Path | str, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Run ``sql`` (``?`` placeholders) straight on the database, behind bosun's back; commit; return rows."""
    if isinstance(where, Path):
        with sqlite3.connect(where) as raw:
            rows = raw.execute(sql, params).fetchall()
        raw.close()
        return rows
    with psycopg.connect(where, autocommit=True) as conn:
        cur = conn.execute(sql.replace("?", "%s"), params)
        return list(cur.fetchall()) if cur.description else []


async def test_put_is_idempotent_and_content_addressed(opened: tuple[Stores, str | None], tmp_path: Path) -> None:
    stores, url = opened
    store = stores.refs
    data = b"pytest output\nFAILED tests/test_x.py::test_y\n"
    ref1 = await store.put(data)
    ref2 = await store.put(data, "text/plain")
    assert ref1 == ref2 == "mem://sha256:" + hashlib.sha256(data).hexdigest()
    assert await store.get(ref1) == data
    info = await store.info(ref1)
    assert info.size == len(data)
    assert raw_fetch(url or tmp_path / "b.db", "SELECT COUNT(*) FROM refs") == [(1,)]


async def test_put_many_is_one_batch(opened: tuple[Stores, str | None]) -> None:
    store = opened[0].refs
    refs = await store.put_many([(f"payload {i}".encode(), "text/plain") for i in range(100)])
    assert len(set(refs)) == 100
    assert all([await store.exists(r) for r in refs[:5]])
    assert [await store.get(r) for r in refs[:3]] == [b"payload 0", b"payload 1", b"payload 2"]


async def test_flipped_byte_in_the_database_is_an_integrity_error(opened: tuple[Stores, str | None],
                                                                  tmp_path: Path) -> None:
    stores, url = opened
    data = b"A" * 4096
    ref = await stores.refs.put(data)
    # alter the stored blob behind bosun's back, as disk corruption or a stray tool would
    flipped = bytearray(data)
    flipped[1234] ^= 0x01
    table = "ref_chunks" if url else "refs"
    raw_fetch(url or tmp_path / "b.db", f"UPDATE {table} SET data = ?", (bytes(flipped),))
    with pytest.raises(IntegrityError, match="failed verification"):
        await stores.refs.get(ref)
    assert await stores.refs.verify(ref) is False


async def test_unknown_and_malformed_refs(opened: tuple[Stores, str | None]) -> None:
    store = opened[0].refs
    with pytest.raises(NotFound):
        await store.get("mem://sha256:" + "ab" * 32)
    with pytest.raises(InvalidInput, match="ref"):
        await store.get("mem://sha256:xyz")
    assert await store.exists("ab" * 32) is False


async def test_short_refs_resolve_and_complete_by_prefix(opened: tuple[Stores, str | None]) -> None:
    stores = opened[0]
    refs = [parse_ref(r) for r in await stores.refs.put_many([(f"blob {i}".encode(), "text/plain")
                                                               for i in range(40)])]
    one = refs[0]
    assert await stores.ref_index.resolve("mem://sha256:" + one[:16]) == one
    assert await stores.ref_index.complete(one[:12], 5) == [one]
    # 40 refs over 16 leading hex digits: some digit leads several (pigeonhole); they come back sorted, capped
    shared = next(d for d in "0123456789abcdef" if sum(r.startswith(d) for r in refs) > 1)
    assert await stores.ref_index.complete(shared, 2) == sorted(r for r in refs if r.startswith(shared))[:2]
    unknown = next(p for p in ("0" * 12, "f" * 12) if not any(r.startswith(p) for r in refs))
    with pytest.raises(NotFound):
        await stores.ref_index.resolve(unknown)


async def test_embeddings_and_idempotency_records_round_trip(opened: tuple[Stores, str | None]) -> None:
    import numpy as np

    from bosun.store.tasks import NewEvent

    stores = opened[0]
    vec = np.arange(8, dtype=np.float32)
    await stores.embeddings.put_many("m", [("k1", vec), ("k2", vec * 2)])
    await stores.embeddings.put_many("m", [("k1", vec * 3)])  # a re-embed replaces
    got = await stores.embeddings.get_many("m", ["k1", "k2", "missing"])
    assert set(got) == {"k1", "k2"} and got["k1"].tolist() == (vec * 3).tolist()
    assert await stores.embeddings.get_many("other-model", ["k1"]) == {}
    await stores.tasks.setup()
    await stores.tasks.append("t1", [NewEvent("task_started", {"objective": "o"})], 0, "key-1")
    record = await stores.idempotency.get("key-1")
    assert record is not None and (record.task_id, record.seq, record.answer) == ("t1", 1, None)
    await stores.idempotency.keep_answer("key-1", "fp", "first answer")
    await stores.idempotency.keep_answer("key-1", "fp", "second answer")  # the first answer is kept
    record = await stores.idempotency.get("key-1")
    assert record is not None and record.answer == "first answer"
    await stores.idempotency.prune(older_than_s=-1)
    assert await stores.idempotency.get("key-1") is None


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


async def test_migrations_are_recorded_and_refuse_a_newer_database(opened: tuple[Stores, str | None],
                                                                   tmp_path: Path) -> None:
    stores, url = opened
    where: Path | str = url or tmp_path / "b.db"
    assert raw_fetch(where, "SELECT COUNT(*) FROM schema_migrations") == [(stores.schema_version,)]
    if url is None:
        assert stores.schema_version == SCHEMA_VERSION
        assert raw_fetch(where, "PRAGMA journal_mode") == [("wal",)]
    await stores.aclose()
    raw_fetch(where, "INSERT INTO schema_migrations VALUES ('9999_from_the_future', 0)")
    with pytest.raises(SchemaTooNew, match="9999_from_the_future"):
        await open_stores(tmp_path / "b.db", url)
    # refused, not corrupted: the newer database is as it was, and opening it again still refuses
    assert raw_fetch(where, "SELECT COUNT(*) FROM schema_migrations") == [(stores.schema_version + 1,)]


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


async def test_recall_one_hop_read_answers_as_resolve_then_get(tmp_path: Path) -> None:
    """``RefResolver.read`` (one reader hop on SQLite) gives what resolve + get give: bytes, errors, integrity."""
    from types import SimpleNamespace
    from typing import Any, cast

    from bosun.server.services.recall import RefResolver

    stores = await open_stores(tmp_path / "b.db", None)
    try:
        reader = RefResolver(cast(Any, SimpleNamespace(store_set=stores, refs=stores.refs)))
        refs = [parse_ref(r) for r in await stores.refs.put_many([(f"blob {i}".encode(), "text/plain")
                                                                   for i in range(40)])]
        one = refs[0]
        for spelling in ("mem://sha256:" + one[:16], one, "sha256:" + one[:20].upper()):
            assert await reader.read(spelling) == (one, await stores.refs.get(one))
        unknown = next(p for p in ("0" * 12, "f" * 12) if not any(r.startswith(p) for r in refs))
        with pytest.raises(NotFound, match="no stored payload"):
            await reader.read(unknown)
        with pytest.raises(InvalidInput, match="ref"):
            await reader.read("mem://sha256:xyz")
        raw_fetch(tmp_path / "b.db", "UPDATE refs SET data = ? WHERE sha256 = ?", (b"tampered", one))
        with pytest.raises(IntegrityError, match="failed verification"):
            await reader.read("mem://sha256:" + one[:16])
    finally:
        await stores.aclose()


async def test_small_reads_are_answered_inline_and_large_ones_on_the_reader(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The inline reader (store/db.py) answers small point reads on the loop's thread with what the threaded
    reader answers; a blob over INLINE_MAX_BYTES, a failing inline read, or none at all take the reader."""
    from types import SimpleNamespace
    from typing import Any, cast

    import bosun.store.idempotency as idem_mod
    import bosun.store.refindex as refindex_mod
    import bosun.store.refs as refs_mod
    from bosun.server.services.recall import RefResolver
    from bosun.store import db as store_db

    hops: list[str] = []
    real_fetch = store_db.fetch

    async def counted(conn: Any, sql: str, params: Any = (), operation: str = "read the store") -> list[Any]:
        hops.append(sql.split()[1])
        return await real_fetch(conn, sql, params, operation)

    for module in (refs_mod, refindex_mod, store_db):
        monkeypatch.setattr(module, "fetch", counted)
    stores = await open_stores(tmp_path / "b.db", None)
    try:
        reader = RefResolver(cast(Any, SimpleNamespace(store_set=stores, refs=stores.refs)))
        small = [parse_ref(r) for r in await stores.refs.put_many([(f"blob {i}".encode(), "text/plain")
                                                                    for i in range(40)])]
        big_bytes = b"0123456789abcdef" * (store_db.INLINE_MAX_BYTES // 16 + 1)
        big = parse_ref(await stores.refs.put(big_bytes))
        for digest, data in [(d, f"blob {i}".encode()) for i, d in enumerate(small[:5])] + [(big, big_bytes)]:
            hops.clear()
            assert await reader.read("mem://sha256:" + digest[:16]) == (digest, data)
            assert await stores.refs.get(digest) == data
            assert len(hops) == (0 if digest != big else 2)  # the big one: its bytes on the reader, both times
        unknown = next(p for p in ("0" * 12, "f" * 12) if not any(r.startswith(p) for r in [*small, big]))
        hops.clear()
        with pytest.raises(NotFound, match="no stored payload"):
            await reader.read(unknown)
        with pytest.raises(NotFound):
            await stores.refs.get("ab" * 32)
        assert hops == []
        # tampered bytes fail verification inline too
        raw_fetch(tmp_path / "b.db", "UPDATE refs SET data = ? WHERE sha256 = ?", (b"tampered", small[0]))
        with pytest.raises(IntegrityError, match="failed verification"):
            await reader.read("mem://sha256:" + small[0][:16])
        # an inline reader that cannot answer (closed here; busy in life) sends every read to the reader
        inline = stores.refs.inline  # type: ignore[attr-defined]
        assert inline is not None and inline.fetch("SELECT no_such_column FROM refs") is None
        inline.close()
        hops.clear()
        assert await reader.read("mem://sha256:" + small[1][:16]) == (small[1], b"blob 1")
        assert await stores.refs.get(small[2]) == b"blob 2"
        assert await stores.idempotency.get("no-such-key") is None
        assert hops == ["sha256,", "data", "key,"]
        assert idem_mod.fetch_inline is store_db.fetch_inline
    finally:
        await stores.aclose()


async def test_a_home_whose_path_holds_uri_characters_reads_its_own_store(tmp_path: Path) -> None:
    """The read-only connections open ``file:`` URIs: "?", "#" and "%" in the path are encoded, so the
    inline reader and the reader read this store (not a file cut at the "?") and create nothing else."""
    from bosun.store.db import open_inline_reader
    from bosun.store.sqlite_uri import readonly_uri

    home = tmp_path / "odd?name#with%20chars"
    home.mkdir()
    stores = await open_stores(home / "b.db", None)
    try:
        ref = parse_ref((await stores.refs.put_many([(b"payload", "text/plain")]))[0])
        assert await stores.refs.get(ref) == b"payload"
        inline = open_inline_reader(home / "b.db")
        assert inline is not None
        try:
            rows = inline.fetch("SELECT COUNT(*) FROM refs")
            assert rows is not None and rows[0][0] == 1
        finally:
            inline.close()
    finally:
        await stores.aclose()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["odd?name#with%20chars"]
    assert readonly_uri("/a b/c?d#e%f") == "file:/a%20b/c%3Fd%23e%25f?mode=ro"
