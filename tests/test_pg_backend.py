"""What only the PostgreSQL backend has to prove: two daemons on one database keep every guarantee
(optimistic concurrency, idempotency keys, change notices through LISTEN/NOTIFY), blobs stream
in chunks without a second full copy, concurrent start-ups migrate once, failures are clear.

Runs on the throwaway cluster of tests/pg_cluster.py (skips without one, fails under CI).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest

from bosun.core.embedding import HashEmbedder
from bosun.core.errors import StorageError
from bosun.server.config import Config, ConfigError
from bosun.server.engine import Engine
from bosun.server.services.tasks import VersionConflict
from bosun.store.backend import open_stores
from bosun.store.idempotency import CALL_KEY, AlreadyApplied, CallKey
from bosun.store.pg_refs import CHUNK
from bosun.store.pg_schema import PG_SCHEMA_VERSION
from bosun.store.tasks import NewEvent
from tests.pg_cluster import fresh_database, pg_url  # noqa: F401  (the fixture)


def _engine(tmp_path: Path, name: str, url: str) -> Engine:
    """One daemon's engine: its own BOSUN_HOME, the shared database."""
    config = Config(home=tmp_path / name, database_url=url, policy_poll_s=0)
    return Engine(config, embedder_factory=lambda _c: HashEmbedder(64))


@pytest.fixture
async def daemons(tmp_path: Path, pg_url: str) -> AsyncIterator[tuple[Engine, Engine]]:  # noqa: F811
    a, b = _engine(tmp_path, "a", pg_url), _engine(tmp_path, "b", pg_url)
    await a.open(watch_policies=False)
    await b.open(watch_policies=False)
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()


async def _wait_for(predicate: object, timeout: float = 20.0) -> None:
    """Poll ``predicate()`` until true (notifications are asynchronous; no fixed sleep decides the test)."""
    async def loop() -> None:
        while not predicate():  # type: ignore[operator]
            await asyncio.sleep(0.01)

    await asyncio.wait_for(loop(), timeout)


async def test_a_write_through_daemon_b_notifies_daemon_a(daemons: tuple[Engine, Engine]) -> None:
    a, b = daemons
    heard_a: list[str] = []
    heard_b: list[str] = []
    a.tasks.changes.add(heard_a.append)
    b.tasks.changes.add(heard_b.append)
    st = await b.tasks.start("shared objective")
    await b.tasks.append(st.task_id, "decision_added", {"text": "through b"})
    await _wait_for(lambda: heard_a.count(st.task_id) >= 2)
    assert heard_b == [st.task_id, st.task_id]  # b's own listeners: once per write, not again from NOTIFY
    # a reads the state b wrote (its cache catches up from the journal)
    assert (await a.tasks.get(st.task_id)).decisions == ["through b"]
    await a.tasks.append(st.task_id, "decision_added", {"text": "through a"})
    await _wait_for(lambda: heard_b.count(st.task_id) >= 3)
    await asyncio.sleep(0.2)  # a notice from a's own write would have arrived by now: none may
    assert heard_a.count(st.task_id) == 3  # two heard from b, one of its own


async def test_a_stale_version_from_the_other_daemon_is_a_conflict_and_nothing_is_lost(
        daemons: tuple[Engine, Engine]) -> None:
    a, b = daemons
    st = await a.tasks.start("objective")
    assert (await b.tasks.get(st.task_id)).version == 1  # b caches version 1
    await a.tasks.append(st.task_id, "constraint_added", {"text": "from a"}, expected_version=1)
    with pytest.raises(VersionConflict) as info:
        await b.tasks.append(st.task_id, "constraint_added", {"text": "from b"}, expected_version=1)
    assert info.value.current == 2
    state = await b.tasks.append(st.task_id, "constraint_added", {"text": "from b"}, expected_version=2)
    assert state.constraints == ["from a", "from b"]
    assert (await a.tasks.get(st.task_id)).seal == state.seal


async def test_concurrent_updates_split_across_two_daemons_lose_nothing(daemons: tuple[Engine, Engine]) -> None:
    a, b = daemons
    st = await a.tasks.start("many writers")
    conflicts = 0

    async def writer(engine: Engine, name: str) -> None:
        nonlocal conflicts  # counted: the test must really have raced
        for i in range(15):
            while True:
                version = (await engine.tasks.get(st.task_id)).version
                try:
                    await engine.tasks.append(st.task_id, "decision_added", {"text": f"{name}-{i}"},
                                              expected_version=version)
                    break
                except VersionConflict:
                    conflicts += 1

    await asyncio.gather(*(writer(e, f"{name}{k}") for e, name in ((a, "a"), (b, "b")) for k in range(3)))
    final = await b.tasks.get(st.task_id)
    expected = {f"{d}{k}-{i}" for d in "ab" for k in range(3) for i in range(15)}
    assert sorted(final.decisions) == sorted(expected) and final.version == 1 + len(expected)
    assert [e.seq for e in await a.tasks.events(st.task_id)] == list(range(1, final.version + 1))
    assert conflicts > 0  # six writers on one task did collide, across the two daemons too


async def test_an_idempotency_key_used_through_one_daemon_holds_on_the_other(daemons: tuple[Engine, Engine]) -> None:
    a, b = daemons
    st = await a.tasks.start("objective")
    token = CALL_KEY.set(CallKey("call-42"))
    try:
        await a.tasks.append(st.task_id, "decision_added", {"text": "once"})
    finally:
        CALL_KEY.reset(token)
    token = CALL_KEY.set(CallKey("call-42"))  # the same call, re-sent to the other daemon
    try:
        with pytest.raises(AlreadyApplied):
            await b.tasks.append(st.task_id, "decision_added", {"text": "once"})
    finally:
        CALL_KEY.reset(token)
    assert b.idempotency is not None
    record = await b.idempotency.get("call-42")
    assert record is not None and (record.task_id, record.seq) == (st.task_id, 2)
    assert (await b.tasks.get(st.task_id)).decisions == ["once"]


async def test_the_database_refuses_truncating_the_journal(pg_url: str, tmp_path: Path) -> None:  # noqa: F811
    stores = await open_stores(tmp_path / "unused.db", pg_url)
    try:
        await stores.tasks.append("t", [NewEvent("task_started", {"objective": "o"})], 0)
    finally:
        await stores.aclose()
    with psycopg.connect(pg_url, autocommit=True) as raw:
        with pytest.raises(psycopg.Error, match="append-only"):
            raw.execute("TRUNCATE task_events")
        assert raw.execute("SELECT COUNT(*) FROM task_events").fetchone() == (1,)


async def test_large_refs_stream_in_chunks_without_a_second_copy(pg_url: str, tmp_path: Path) -> None:  # noqa: F811
    stores = await open_stores(tmp_path / "unused.db", pg_url)
    size = 24 * CHUNK + 12345  # not a multiple of the chunk size
    data = os.urandom(size)
    try:
        tracemalloc.start()
        try:
            ref = await stores.refs.put(data)
            _, put_peak = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            got = await stores.refs.get(ref)
            _, get_peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert got == data and ref == "mem://sha256:" + hashlib.sha256(data).hexdigest()
        # the write holds chunks, never a copy of the blob; the read holds the result plus a few chunks
        assert put_peak < 4 * CHUNK, put_peak
        assert get_peak < size + 4 * CHUNK, get_peak
        info = await stores.refs.info(ref)
        assert info.size == size
        with psycopg.connect(pg_url) as raw:
            assert raw.execute("SELECT COUNT(*), MAX(length(data)) FROM ref_chunks").fetchone() == (25, CHUNK)
        empty = await stores.refs.put(b"")
        assert await stores.refs.get(empty) == b""
        pending = stores.refs.put_soon(b"written while the caller works")
        assert await stores.refs.get(await pending.ref()) == b"written while the caller works"
    finally:
        await stores.aclose()


async def test_a_missing_chunk_is_an_integrity_error(pg_url: str, tmp_path: Path) -> None:  # noqa: F811
    from bosun.core.errors import IntegrityError

    stores = await open_stores(tmp_path / "unused.db", pg_url)
    try:
        ref = await stores.refs.put(b"x" * (2 * CHUNK + 1))
        with psycopg.connect(pg_url, autocommit=True) as raw:
            raw.execute("DELETE FROM ref_chunks WHERE n = 1")
        with pytest.raises(IntegrityError):
            await stores.refs.get(ref)
    finally:
        await stores.aclose()


async def test_daemons_starting_together_migrate_once(tmp_path: Path) -> None:
    url = fresh_database()
    opened = await asyncio.gather(*(open_stores(tmp_path / "unused.db", url) for _ in range(4)))
    try:
        assert {s.schema_version for s in opened} == {PG_SCHEMA_VERSION}
        with psycopg.connect(url) as raw:
            assert raw.execute("SELECT COUNT(*) FROM schema_migrations").fetchone() == (PG_SCHEMA_VERSION,)
    finally:
        for s in opened:
            await s.aclose()


async def test_an_unreachable_server_is_a_clear_error_without_the_password(tmp_path: Path) -> None:
    with pytest.raises(StorageError) as info:
        await open_stores(tmp_path / "unused.db", "postgresql://bosun:s3cret@127.0.0.1:1/bosun?connect_timeout=2")
    assert "cannot connect" in str(info.value) and "s3cret" not in str(info.value)


def test_database_url_configuration() -> None:
    assert Config.from_env({}).database_url is None
    url = "postgresql://bosun@db.internal:5432/bosun"
    assert Config.from_env({"BOSUN_DATABASE_URL": url}).database_url == url
    with pytest.raises(ConfigError, match="BOSUN_DATABASE_URL") as info:
        Config.from_env({"BOSUN_DATABASE_URL": "mysql://root:hunter2@db/bosun"})
    assert "hunter2" not in str(info.value)


async def test_health_names_the_backend_without_the_password(daemons: tuple[Engine, Engine]) -> None:
    store = daemons[0].health()["store"]
    assert store["backend"] == "postgresql" and store["schema_version"] == PG_SCHEMA_VERSION
    with pytest.raises(RuntimeError, match="no SQLite connection"):
        _ = daemons[0].conn


def test_serve_database_url_flag_puts_the_daemon_on_postgresql(tmp_path: Path, pg_url: str) -> None:  # noqa: F811
    import json
    import signal
    import subprocess
    import sys
    import time
    import urllib.error
    import urllib.request

    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k != "BOSUN_DATABASE_URL"}
    proc = subprocess.Popen([sys.executable, "-m", "bosun", "serve", "--home", str(home), "--port", "0",
                             "--database-url", pg_url], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 90
        url = None
        while url is None and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            try:
                data = json.loads((home / "daemon.json").read_text())
                url = data["url"] if data.get("pid") == proc.pid else None
            except (OSError, ValueError):
                time.sleep(0.05)
        assert url is not None, "the daemon did not start"
        try:  # 503 while the model loads: the body is the same report
            with urllib.request.urlopen(url.rsplit("/mcp", 1)[0] + "/healthz", timeout=10) as resp:
                body = resp.read()
        except urllib.error.HTTPError as exc:
            body = exc.read()
        store = json.loads(body)["store"]
        assert store["backend"] == "postgresql" and "url" in store
        assert not (home / "bosun.db").exists()  # nothing went to SQLite
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


async def test_a_read_survives_a_dropped_pooled_connection(pg_url: str, tmp_path: Path) -> None:  # noqa: F811
    """The server ended the pooled connection (a restart, a proxy timeout): the next read still answers."""
    stores = await open_stores(tmp_path / "unused.db", pg_url)
    try:
        await stores.tasks.append("t", [NewEvent("task_started", {"objective": "o"})], 0)
        with psycopg.connect(pg_url, autocommit=True) as raw:
            ended = raw.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = "
                                "current_database() AND pid <> pg_backend_pid() AND application_name LIKE 'bosun:%'"
                                ).fetchall()
        assert ended
        assert await stores.tasks.version("t") == 1
    finally:
        await stores.aclose()


async def test_the_other_daemons_write_brings_this_daemons_cache_up_to_date(daemons: tuple[Engine, Engine]) -> None:
    """An agent holding the version daemon B answered updates through daemon A (which cached the task
    before): the notice has caught A's cache up, so the update is applied, not refused as stale."""
    a, b = daemons
    st = await a.tasks.start("objective")  # a caches version 1
    heard: list[str] = []
    a.tasks.changes.add(heard.append)
    after_b = await b.tasks.append(st.task_id, "decision_added", {"text": "via b"}, expected_version=1)
    await _wait_for(lambda: st.task_id in heard)
    state = await a.tasks.append(st.task_id, "decision_added", {"text": "via a"},
                                 expected_version=after_b.version)
    assert state.decisions == ["via b", "via a"] and state.version == 3


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_a_manifest_subscription_on_daemon_a_hears_an_update_made_through_daemon_b(
        tmp_path: Path, pg_url: str) -> None:  # noqa: F811
    import anyio
    from mcp import Client
    from mcp.types import ResourceUpdatedNotification

    from bosun.server.app import create_server

    a, b = _engine(tmp_path, "a", pg_url), _engine(tmp_path, "b", pg_url)
    updated: list[str] = []
    arrived = anyio.Event()

    async def on_message(message: object) -> None:
        root = getattr(message, "root", message)
        if isinstance(root, ResourceUpdatedNotification):
            updated.append(str(root.params.uri))
            arrived.set()

    await b.open(watch_policies=False)
    try:
        async with Client(create_server(a), mode="legacy", message_handler=on_message) as watcher:
            st = await b.tasks.start("watched from a, written through b")
            uri = f"bosun://task/{st.task_id}/manifest"
            await watcher.subscribe_resource(uri)
            await b.tasks.append(st.task_id, "decision_added", {"text": "use blue-green"})
            with anyio.fail_after(20):
                await arrived.wait()
            assert updated == [uri]
            manifest = await watcher.read_resource(uri)
            assert f"task={st.task_id} v=2 " in str(manifest.contents[0])  # a reads what b wrote
    finally:
        await b.close()


async def test_a_task_id_too_long_for_a_notice_is_still_appended_and_heard(daemons: tuple[Engine, Engine]) -> None:
    a, b = daemons
    long_id = "t_" + "x" * 9000  # a NOTIFY payload stops at 8000 bytes
    cached = (await a.tasks.start("cached on a")).task_id
    heard: list[str] = []
    a.tasks.changes.add(heard.append)
    st = await b.tasks.start("long id", task_id=long_id)
    assert st.version == 1 and (await a.tasks.get(long_id)).version == 1
    await _wait_for(lambda: cached in heard)  # heard as "some task changed": every task a holds is news


async def test_only_blob_writes_skip_the_flush_wait(pg_url: str, tmp_path: Path) -> None:  # noqa: F811
    """Blobs commit without waiting for the WAL flush; the journal (which makes them durable) waits."""
    from bosun.store.pg_db import PgDatabase

    db = PgDatabase(pg_url)
    await db.open()
    try:
        async with db.connection("check", blobs=True) as conn:
            assert await (await conn.execute("SHOW synchronous_commit")).fetchone() == ("off",)
        assert await db.fetch("SHOW synchronous_commit") == [("on",)]
    finally:
        await db.close()


async def test_the_listener_reconnects_and_reports_what_it_may_have_missed(daemons: tuple[Engine, Engine],
                                                                           pg_url: str) -> None:  # noqa: F811
    a, b = daemons
    st = await a.tasks.start("held by a")
    heard: list[str] = []
    a.tasks.changes.add(heard.append)
    with psycopg.connect(pg_url, autocommit=True) as raw:
        ended = raw.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                            (a.store_set.tasks.db.origin + ":listen",)).fetchall()  # type: ignore[attr-defined]
    assert ended == [(True,)]
    await _wait_for(lambda: st.task_id in heard)  # reconnected: every task a holds is reported as changed
    other = await b.tasks.start("written after the reconnect")
    await _wait_for(lambda: other.task_id in heard)  # and b's writes are heard again
