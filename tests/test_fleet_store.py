"""The connection policy (issue 13): reads never make writes fail, busy is retried, storage failures are
tool errors that say what failed and whether a retry is safe; the fleet configuration block."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import pytest
from mcp import Client

from bosun.core.errors import StorageError
from bosun.server.config import Config
from bosun.server.engine import Engine
from bosun.server.idempotency import Admission
from bosun.store import db as store_db
from tests.pg_cluster import BACKENDS, with_backend


@pytest.fixture(params=BACKENDS)
def config(request: pytest.FixtureRequest, config: Config) -> Config:
    """The engine tests here run on SQLite and on a throwaway PostgreSQL (tests/pg_cluster.py)."""
    return with_backend(config, request.param)


async def _start(client: Client) -> str:
    started = await client.call_tool("plan", {"mode": "start", "objective": "fleet"})
    assert started.structured_content is not None
    return str(started.structured_content["task_id"])


async def test_short_ref_reads_and_journal_writes_side_by_side_never_fail(client: Client, engine: Engine) -> None:
    """The issue's failure: recall by 16-hex short ref beside observes and plan updates ("database is locked")."""
    tids = [await _start(client) for _ in range(6)]
    body = "\n".join(f"line {i}: a build log" for i in range(3000))
    stored = await client.call_tool("observe", {"task_id": tids[0], "kind": "result", "tool": "cat", "result": body})
    assert stored.structured_content is not None
    short = stored.structured_content["ref"]
    assert len(short.rsplit(":", 1)[1]) == 16
    failures: list[str] = []

    async def agent(tid: str, n: int) -> None:
        for i in range(8):
            for name, args in (
                ("observe", {"task_id": tid, "kind": "result", "tool": "t", "result": f"{n}-{i}\n" + body}),
                ("recall", {"ref": short, "op": "grep", "pattern": "line 1", "task_id": tid}),
                ("observe", {"task_id": tid, "kind": "decision", "text": f"decision {n}-{i}"}),
            ):
                out = await client.call_tool(name, args)
                if out.is_error:
                    failures.append(out.content[0].text)  # type: ignore[union-attr]

    await asyncio.gather(*(agent(tid, n) for n, tid in enumerate(tids)))
    assert failures == []


async def test_busy_is_retried_and_other_failures_become_storage_errors() -> None:
    attempts: list[int] = []

    async def flaky() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise sqlite3.OperationalError("database is locked")
        return "done"

    assert await store_db.with_retry(flaky, "write") == "done" and len(attempts) == 3

    async def full() -> None:
        raise sqlite3.OperationalError("database or disk is full")

    with pytest.raises(StorageError) as caught:
        await store_db.with_retry(full, "append to the task journal")
    assert caught.value.retry_safe and "disk is full" in str(caught.value)

    async def conflict() -> None:
        raise sqlite3.IntegrityError("task_events: stale or out-of-order seq")

    with pytest.raises(sqlite3.IntegrityError):  # a conflict is the caller's answer, not a storage failure
        await store_db.with_retry(conflict, "write")


async def test_a_full_disk_is_a_tool_error_that_says_retry_is_safe(client: Client, engine: Engine,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    tid = await _start(client)
    if engine.config.database_url:  # PostgreSQL: the server answers "disk full" to the journal insert
        import psycopg
        from psycopg import errors as pg_errors

        real_execute = psycopg.AsyncConnection.execute

        async def pg_disk_full(self: Any, query: Any, params: Any = None, **kw: Any) -> Any:
            if str(query).startswith("INSERT INTO task_events"):
                raise pg_errors.DiskFull("could not extend file: No space left on device")
            return await real_execute(self, query, params, **kw)

        monkeypatch.setattr(psycopg.AsyncConnection, "execute", pg_disk_full)
    else:
        real = store_db.run

        async def disk_full(conn: Any, sql: str, params: Any = (), operation: str = "write") -> None:
            if sql.startswith("INSERT INTO task_events"):
                return await store_db.with_retry(_raise_full, operation)
            return await real(conn, sql, params, operation)

        monkeypatch.setattr("bosun.store.tasks.run", disk_full)
    out = await client.call_tool("observe", {"task_id": tid, "kind": "decision", "text": "will not fit"})
    assert out.is_error
    text = out.content[0].text  # type: ignore[union-attr]
    assert "storage" in text and "disk is full" in text and "retrying is safe" in text
    assert "Traceback" not in text and "OperationalError" not in text and "DiskFull" not in text


async def _raise_full() -> None:
    raise sqlite3.OperationalError("database or disk is full")


async def test_a_flood_is_refused_with_busy_retry_after() -> None:
    admission = Admission(max_inflight=1, max_queued=1, queue_timeout_s=30)
    release = asyncio.Event()
    entered = asyncio.Event()

    async def slow(_: Any) -> str:
        entered.set()
        await release.wait()
        return "ok"

    first = asyncio.create_task(admission.run(None, slow))  # type: ignore[arg-type]
    await entered.wait()
    second = asyncio.create_task(admission.run(None, slow))  # type: ignore[arg-type]  # waits for the slot
    await asyncio.sleep(0)
    refused = await admission.run(None, slow)  # type: ignore[arg-type]  # no slot, queue full
    assert refused.is_error and "busy" in refused.content[0].text and "retry after" in refused.content[0].text
    release.set()
    assert await first == "ok" and await second == "ok"
    assert admission.refused == 1


def test_fleet_configuration_block() -> None:
    cfg = Config.from_env({"BOSUN_MAX_INFLIGHT": "8", "BOSUN_MAX_QUEUED": "16", "BOSUN_QUEUE_TIMEOUT_S": "2.5",
                           "BOSUN_SESSION_IDLE_TIMEOUT_S": "120", "BOSUN_MAX_SESSIONS": "50"})
    assert (cfg.max_inflight, cfg.max_queued, cfg.queue_timeout_s) == (8, 16, 2.5)
    assert (cfg.session_idle_timeout_s, cfg.max_sessions) == (120.0, 50)
    default = Config.from_env({})
    assert default.session_idle_timeout_s < 1800 and default.max_sessions < 10_000  # tighter than the SDK's
