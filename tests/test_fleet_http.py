"""Fleet leftovers of issue 13: per-call deadlines (BOSUN_CALL_TIMEOUT_S).

The deadline's timer is fired by hand (``Deadline.schedule`` is replaced), so no test depends on
timing: a call is held on an event, the deadline fires, and the answer and the journal are checked.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from bosun.server.app import create_server
from bosun.server.config import Config
from bosun.server.engine import Engine
from bosun.server.idempotency import META_KEY, Deadline


class HandFiredTimer:
    """Stands in for the loop's timer: records the deadline callbacks; the test fires them."""

    def __init__(self) -> None:
        self.pending: list[Callable[[], None]] = []

    def __call__(self, _delay: float, fire: Callable[[], None]) -> Any:
        self.pending.append(fire)
        timer = self

        class Handle:
            def cancel(self) -> None:
                if fire in timer.pending:
                    timer.pending.remove(fire)

        return Handle()

    async def fire_when_armed(self, count: int = 1) -> None:
        """Wait until ``count`` calls are running under a deadline, then let every deadline pass."""
        while len(self.pending) < count:
            await anyio.sleep(0.005)
        for fire in list(self.pending):
            fire()


def _events(engine: Engine, task_id: str) -> list[str]:
    with sqlite3.connect(engine.config.db_path) as conn:
        return [str(k) for (k,) in conn.execute("SELECT kind FROM task_events WHERE task_id = ? ORDER BY seq",
                                                (task_id,))]


@pytest.fixture
async def served(engine: Engine) -> AsyncIterator[tuple[Client, Deadline, HandFiredTimer]]:
    async with Client(create_server(engine)) as client:
        deadline = engine.admission.deadline
        timer = HandFiredTimer()
        deadline.schedule = timer
        yield client, deadline, timer


async def _start(client: Client) -> str:
    started = await client.call_tool("plan", {"mode": "start", "objective": "deadlines", "steps": ["a"]})
    assert started.structured_content is not None
    return str(started.structured_content["task_id"])


def test_bosun_call_timeout_s_is_read_with_a_default_and_0_turns_it_off(tmp_path: Path) -> None:
    assert Config.from_env({}, home=tmp_path).call_timeout_s == 150.0
    assert Config.from_env({"BOSUN_CALL_TIMEOUT_S": "2.5"}, home=tmp_path).call_timeout_s == 2.5
    assert Config.from_env({"BOSUN_CALL_TIMEOUT_S": "0"}, home=tmp_path).call_timeout_s == 0


async def test_a_read_past_its_deadline_is_answered_naming_the_tool_and_the_daemon_keeps_serving(
        served: tuple[Client, Deadline, HandFiredTimer], engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    client, deadline, timer = served
    never = anyio.Event()

    async def stuck(*_a: Any, **_k: Any) -> Any:
        await never.wait()

    monkeypatch.setattr(engine.recall, "recall", stuck)
    answers: list[Any] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: _append(answers, client.call_tool("recall", {"ref": "0" * 16})))
        await timer.fire_when_armed()
    (answer,) = answers
    assert answer.is_error
    text = answer.content[0].text
    assert "recall" in text and "timed out" in text and "BOSUN_CALL_TIMEOUT_S" in text and "nothing was applied" in text
    assert deadline.timed_out == 1
    tid = await _start(client)  # the daemon keeps serving
    assert _events(engine, tid) == ["task_started"]


async def _append(into: list[Any], call: Any) -> None:
    into.append(await call)


async def test_a_write_cut_before_it_started_applies_nothing_and_its_key_stays_free(
        served: tuple[Client, Deadline, HandFiredTimer], engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    client, _deadline, timer = served
    tid = await _start(client)
    never = anyio.Event()
    real_store = engine.tasks.store

    async def store_not_ready() -> Any:  # the journal's store, reached by every write before its statement
        await never.wait()

    monkeypatch.setattr(engine.tasks, "store", store_not_ready)
    args = {"task_id": tid, "kind": "decision", "text": "cut before the write"}
    answers: list[Any] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: _append(answers, client.call_tool("observe", args, meta={META_KEY: "k-cut"})))
        await timer.fire_when_armed()
    assert answers[0].is_error and "observe: timed out" in answers[0].content[0].text
    assert _events(engine, tid) == ["task_started"]
    monkeypatch.setattr(engine.tasks, "store", real_store)
    again = await client.call_tool("observe", args, meta={META_KEY: "k-cut"})  # the retry applies, once
    assert not again.is_error
    assert _events(engine, tid) == ["task_started", "decision_added"]


async def test_a_write_already_started_finishes_past_its_deadline_with_its_real_answer(
        served: tuple[Client, Deadline, HandFiredTimer], engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    client, deadline, timer = served
    tid = await _start(client)
    store = await engine.tasks.store()
    real_append = store.append
    in_write = anyio.Event()
    release = anyio.Event()

    async def slow_append(*a: Any, **k: Any) -> Any:
        in_write.set()
        await release.wait()
        return await real_append(*a, **k)

    monkeypatch.setattr(store, "append", slow_append)
    answers: list[Any] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: _append(answers, client.call_tool(
            "observe", {"task_id": tid, "kind": "decision", "text": "finish me"})))
        await in_write.wait()
        await timer.fire_when_armed()  # the deadline passes while the write is under way
        assert deadline.overran == 1
        release.set()
    (answer,) = answers
    assert not answer.is_error and answer.structured_content["recorded"] == "decision_added"
    assert _events(engine, tid) == ["task_started", "decision_added"]
    assert deadline.timed_out == 0


async def test_a_client_cancel_is_not_mistaken_for_the_deadline(
        served: tuple[Client, Deadline, HandFiredTimer], engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    client, deadline, _timer = served
    never = anyio.Event()

    async def stuck(*_a: Any, **_k: Any) -> Any:
        await never.wait()

    monkeypatch.setattr(engine.recall, "recall", stuck)
    with anyio.move_on_after(0.2):  # the client gives up (its own timeout); the deadline never fired
        await client.call_tool("recall", {"ref": "0" * 16})
    assert deadline.timed_out == 0
    assert not (await client.call_tool("plan", {"mode": "start", "objective": "still serving"})).is_error
