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


# -- large bodies: measured while they arrive, held once ---------------------------------------------

KEY_TAILS = ["[", '"', "\\", "}"]


def _nested(rng: Any, depth: int) -> Any:
    """Random JSON with strings full of the bytes that confuse a scanner: quotes, backslashes, brackets."""
    if depth > 10 or rng.random() < 0.3:
        return "".join(rng.choice(['a', '\\', '"', '[', ']', '{', '}', '\\\\', '\n', 'é']) for _ in range(rng.randint(0, 8)))
    if rng.random() < 0.5:
        return [_nested(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {"k" + str(i) + rng.choice(KEY_TAILS): _nested(rng, depth + 1) for i in range(rng.randint(0, 3))}


def _depth_by_parsing(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((_depth_by_parsing(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth_by_parsing(v) for v in value.values()), default=0)
    return 0


def test_depth_measured_in_pieces_matches_the_parsed_depth_wherever_the_pieces_split() -> None:
    import json
    import random

    from bosun.server.transport.json_scan import DepthScan, json_depth

    rng = random.Random(7)
    for _ in range(100):
        value = _nested(rng, 0)
        body = json.dumps(value).encode()
        want = _depth_by_parsing(value)
        assert json_depth(body) == want
        for cut in (1, 2, 3, 7):
            scan = DepthScan()
            for at in range(0, len(body), cut):
                scan.feed(body[at:at + cut])
            assert scan.deepest == want, (cut, body)


def test_a_large_body_is_spooled_to_an_unlinked_private_file_and_handed_on_whole(tmp_path: Path) -> None:
    import os

    from bosun.server.transport.body_spool import BodyBuffer

    buffer = BodyBuffer(tmp_path / "spool", spool_above=1000)
    pieces = [bytes([65 + i % 26]) * 700 for i in range(10)]
    for piece in pieces:
        buffer.add(piece)
    spooled = buffer._file
    assert spooled is not None  # past the threshold the chunks went to a file
    assert os.fstat(spooled.fileno()).st_mode & 0o777 == 0o600
    assert list((tmp_path / "spool").iterdir()) == []  # unlinked: nothing is left behind
    handed = list(buffer.pieces())
    assert b"".join(handed) == b"".join(pieces)
    assert buffer._file is None


def test_a_small_body_stays_in_memory_and_a_single_chunk_is_not_copied(tmp_path: Path) -> None:
    from bosun.server.transport.body_spool import BodyBuffer

    buffer = BodyBuffer(tmp_path / "spool", spool_above=1000)
    chunk = b'{"jsonrpc": "2.0"}'
    buffer.add(chunk)
    (handed,) = list(buffer.pieces())
    assert handed is chunk
    assert not (tmp_path / "spool").exists()


async def test_the_guard_hands_a_spooled_body_to_the_app_once_and_refuses_deep_nesting_early(tmp_path: Path) -> None:
    from bosun.server.transport.http_guard import HttpGuard
    from bosun.server.transport.json_scan import MAX_DEPTH

    seen: list[bytes] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        parts = [await receive()]
        while parts[-1].get("more_body"):
            parts.append(await receive())
        seen.append(b"".join(p["body"] for p in parts))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    guard = HttpGuard(app, loopback=True, max_body=10 << 20, spool_dir=tmp_path / "spool")
    body = b'{"result": "' + b"x" * (3 << 20) + b'"}'
    pieces = [body[at:at + 65536] for at in range(0, len(body), 65536)]

    async def run(pieces: list[bytes]) -> list[dict[str, Any]]:
        queue = [{"type": "http.request", "body": p, "more_body": i < len(pieces) - 1} for i, p in enumerate(pieces)]
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return queue.pop(0) if queue else {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": [(b"host", b"127.0.0.1:1")]}
        await guard(scope, receive, send)
        return sent

    sent = await run(pieces)
    assert sent[0]["status"] == 200 and seen == [body]
    deep = b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1)
    refused = await run([deep[:40], deep[40:], b" " * 10])
    assert refused[0]["status"] == 400 and len(seen) == 1


def test_the_depth_limit_scans_only_bodies_that_could_be_too_deep_and_is_exact_when_it_does() -> None:
    from bosun.server.transport.json_scan import DepthLimit

    call = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"recall","arguments":{"ref":"ab"}}}'
    shallow = DepthLimit(3)
    shallow.feed(call)
    assert not shallow.exceeded and not shallow._scanning  # 3 opening brackets: no scan needed
    many_but_flat = DepthLimit(3)
    many_but_flat.feed(b'{"a": [1], "b": [2], "c": ')
    many_but_flat.feed(b'[3], "d": "[[[[["}')
    assert many_but_flat._scanning and not many_but_flat.exceeded
    deep = DepthLimit(3)
    deep.feed(b'{"a": [[')
    deep.feed(b"[1]]]}")
    assert deep.exceeded


async def test_a_call_waits_for_a_slot_only_when_all_are_taken_and_is_refused_past_the_queue() -> None:
    from bosun.server.idempotency import Admission

    admission = Admission(max_inflight=1, max_queued=0, queue_timeout_s=30)
    release = anyio.Event()
    answers: list[Any] = []

    async def held(_ctx: Any) -> str:
        await release.wait()
        return "first"

    async def quick(_ctx: Any) -> str:
        return "second"

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: _append(answers, admission.run(None, held)))  # type: ignore[arg-type]
        while not admission._slots.locked():
            await anyio.sleep(0)
        refused = await admission.run(None, quick)  # type: ignore[arg-type]
        release.set()
    assert refused.is_error and "busy" in refused.content[0].text and "nothing was applied" in refused.content[0].text
    assert answers == ["first"]
    assert await admission.run(None, quick) == "second"  # type: ignore[arg-type]


def test_the_fingerprint_of_a_call_with_a_huge_argument_is_the_hash_of_its_canonical_json(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import hashlib
    import json
    import random

    from bosun.server import idempotency

    monkeypatch.setattr(idempotency, "BIG_TEXT", 5)  # every string over 5 characters is hashed in slices
    rng = random.Random(3)
    for _ in range(300):
        arguments = {"result": _nested(rng, 0), "tool": 'té"x\\\n' * rng.randint(0, 3), "n": [1, 2.5, None, True]}
        params = {"name": "observe", "arguments": arguments}
        text = json.dumps({"name": "observe", "arguments": arguments}, sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False, default=str)
        assert idempotency.fingerprint(params) == hashlib.sha256(text.encode()).hexdigest()
