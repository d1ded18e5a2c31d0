"""Exactly-once calls (issue 13): a repeated idempotency key gets the first answer, never a second effect."""

from __future__ import annotations

import sqlite3
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError

from bosun.server.app import create_server
from bosun.server.engine import Engine
from bosun.server.idempotency import META_KEY

KEY = {META_KEY: "k-0001"}


def _journal(engine: Engine, task_id: str) -> list[tuple[int, str, str | None]]:
    with sqlite3.connect(engine.config.db_path) as conn:
        return [(int(s), str(k), key) for s, k, key in conn.execute(
            "SELECT seq, kind, idem_key FROM task_events WHERE task_id = ? ORDER BY seq", (task_id,))]


async def _start(client: Client) -> str:
    started = await client.call_tool("plan", {"mode": "start", "objective": "exactly once", "steps": ["a"]})
    assert not started.is_error
    assert started.structured_content is not None
    return str(started.structured_content["task_id"])


async def test_a_repeated_key_gets_the_first_answer_and_journals_once(client: Client, engine: Engine) -> None:
    tid = await _start(client)
    args: dict[str, Any] = {"task_id": tid, "kind": "decision", "text": "use sqlite"}
    first = await client.call_tool("observe", args, meta=KEY)
    again = await client.call_tool("observe", args, meta=KEY)
    assert not first.is_error and not again.is_error
    assert again.structured_content == first.structured_content
    assert [key for _, _, key in _journal(engine, tid)].count("k-0001") == 1
    assert len(_journal(engine, tid)) == 2  # task_started + the one decision


async def test_without_a_key_every_call_applies(client: Client, engine: Engine) -> None:
    tid = await _start(client)
    args: dict[str, Any] = {"task_id": tid, "kind": "decision", "text": "use sqlite"}
    await client.call_tool("observe", args)
    await client.call_tool("observe", args)
    assert len(_journal(engine, tid)) == 3


async def test_a_key_reused_for_other_arguments_is_refused(client: Client, engine: Engine) -> None:
    tid = await _start(client)
    await client.call_tool("observe", {"task_id": tid, "kind": "decision", "text": "a"}, meta=KEY)
    other = await client.call_tool("observe", {"task_id": tid, "kind": "decision", "text": "b"}, meta=KEY)
    assert other.is_error and "different call" in other.content[0].text  # type: ignore[union-attr]
    assert len(_journal(engine, tid)) == 2


async def test_same_key_at_once_applies_once(client: Client, engine: Engine) -> None:
    tid = await _start(client)
    args: dict[str, Any] = {"task_id": tid, "kind": "decision", "text": "together"}
    answers: list[Any] = []

    async def call() -> None:
        answers.append((await client.call_tool("observe", args, meta=KEY)).structured_content)

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(call)
    assert len(_journal(engine, tid)) == 2
    assert all(a == answers[0] for a in answers)


async def test_answer_not_kept_says_already_applied_at_which_version(engine: Engine) -> None:
    async with Client(create_server(engine)) as client:
        tid = await _start(client)
        args: dict[str, Any] = {"task_id": tid, "kind": "decision", "text": "kept?"}
        await client.call_tool("observe", args, meta=KEY)
        # the daemon died between the journal commit and keeping the answer
        await engine.conn.execute_fetchall("UPDATE idempotency SET answer = NULL, fingerprint = NULL")
        again = await client.call_tool("observe", args, meta=KEY)
    assert not again.is_error
    assert again.structured_content is not None
    assert again.structured_content["already_applied"] is True
    assert again.structured_content["task_id"] == tid and again.structured_content["version"] == 2
    assert len(_journal(engine, tid)) == 2


async def test_a_malformed_key_is_a_protocol_error(client: Client) -> None:
    tid = await _start(client)
    with pytest.raises(MCPError, match=META_KEY):
        await client.call_tool("observe", {"task_id": tid, "kind": "decision", "text": "x"}, meta={META_KEY: ""})
