"""A huge observe over HTTP (issue 13): answered from files, outside the SDK's request path, alike.

A daemon's HTTP app runs in a thread with ``BOSUN_BIG_OBSERVE_BYTES`` lowered to 2 MiB, so a
3 MB result takes the file path (``transport/big_call.py`` -> ``services/observe.py`` ->
``offload_worker.py``); the same payload observed in memory by a second engine (the normal path)
must give the same stub: ref, sizes, outline, redaction counts. Both wire eras, a keyed repeat,
and a body that is not an observe (it goes to the SDK whole).
"""

from __future__ import annotations

import json
import random
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from mcp import Client

import bosun.server.services.observe as observe_module
import bosun.server.transport.big_call as big_call
from bosun.core.embedding import HashEmbedder
from bosun.server.app import create_server
from bosun.server.config import Config
from bosun.server.engine import Engine
from bosun.server.idempotency import META_KEY
from bosun.server.transport.serve import http_app

BIG = 2 << 20
SECRETS = ["AKIAIOSFODNN7EXAMPLE", "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
           "API_KEY=Zx9Qw8Er7Ty6Ui5Op4As3Df2", 'password = "hunter2hunter2"',
           "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nq7R8a1B2\n-----END RSA PRIVATE KEY-----"]


def payload(size: int, seed: int = 7) -> str:
    """Log lines with secrets, non-ASCII text, quotes, backslashes and control characters to escape."""
    rng = random.Random(seed)
    lines: list[str] = []
    total = 0
    while total < size:
        i = len(lines)
        if rng.random() < 0.01:
            lines.append(rng.choice(SECRETS) + "\n")
        else:
            lines.append(f"{i:07d} INFO worker-{i % 7} \"quoted\" path=C:\\tmp\\{i} é✓ \U0001f600 took={i % 97}ms\t\n")
        total += len(lines[-1])
    lines.insert(len(lines) // 2, "Traceback (most recent call last):\nValueError: broken \x01 here\n")
    return "".join(lines)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[str, Config]]:
    """A daemon's whole HTTP app (guard, SDK, bosun) with the huge-observe path from 2 MiB."""
    home = tmp_path / "home"
    config = Config(home=home, policies=[], big_observe_bytes=BIG)
    engine = Engine(config, embedder_factory=lambda _c: HashEmbedder(64))
    app = http_app(create_server(engine), "127.0.0.1", None, 64 << 20, spool_dir=home / "spool",
                   big_observe=config.big_observe_bytes)
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(500):
        if server.started:
            break
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/mcp", config
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture
def worker_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the observes that went through the offload worker (the file path)."""
    runs: list[int] = []
    real = observe_module.run_worker

    async def counted(request: dict[str, Any]) -> dict[str, Any]:
        runs.append(1)
        return await real(request)

    monkeypatch.setattr(observe_module, "run_worker", counted)
    return runs


async def _in_memory_answer(tmp_path: Path, text: str) -> dict[str, Any]:
    engine = Engine(Config(home=tmp_path / "other", policies=[]), embedder_factory=lambda _c: HashEmbedder(64))
    async with Client(create_server(engine)) as client:
        tid = (await client.call_tool("plan", {"mode": "start", "objective": "o"})).structured_content["task_id"]
        got = await client.call_tool("observe", {"task_id": tid, "kind": "result", "tool": "cat",
                                                 "args": {"path": "big.log"}, "result": text})
        assert not got.is_error, got.content
        return dict(got.structured_content or {})


@pytest.mark.parametrize(("mode", "size"), [("auto", 3 << 20), ("legacy", 3 << 20), ("auto", 5 << 20)])
async def test_a_huge_observe_takes_the_file_path_and_answers_as_the_normal_path(
        daemon: tuple[str, Config], worker_runs: list[int], tmp_path: Path, mode: str, size: int,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """3 MB: the worker shapes the whole text; 5 MB (over ``outline_window.WINDOWED_ABOVE``): from windows."""
    daemon_url, _ = daemon
    windowed: list[bool] = []
    counted = observe_module.run_worker

    async def noted(request: dict[str, Any]) -> dict[str, Any]:
        got = await counted(request)
        windowed.append(bool(got["windowed"]))
        return got

    monkeypatch.setattr(observe_module, "run_worker", noted)
    text = payload(size)
    async with Client(daemon_url, mode=mode) as client:  # type: ignore[arg-type]
        tid = (await client.call_tool("plan", {"mode": "start", "objective": "o"})).structured_content["task_id"]
        got = await client.call_tool("observe", {"task_id": tid, "kind": "result", "tool": "cat",
                                                 "args": {"path": "big.log"}, "result": text})
        assert not got.is_error, got.content
        big = dict(got.structured_content or {})
        recalled = await client.call_tool("recall", {"ref": big["ref"], "op": "range", "start": 1, "end": 3})
        assert not recalled.is_error
    assert worker_runs == [1] and windowed == [size > 4 << 20]
    normal = await _in_memory_answer(tmp_path, text)
    assert normal["redacted"] > 0
    for key in ("ref", "bytes", "tokens", "lines", "kind", "outline", "recall", "redacted", "offloaded"):
        assert big[key] == normal[key], key


async def test_a_keyed_huge_observe_sent_twice_is_applied_once(daemon: tuple[str, Config],
                                                               worker_runs: list[int]) -> None:
    daemon_url, config = daemon
    text = payload(3 << 20, seed=11)
    async with Client(daemon_url) as client:
        tid = (await client.call_tool("plan", {"mode": "start", "objective": "o"})).structured_content["task_id"]
        args = {"task_id": tid, "kind": "result", "tool": "cat", "result": text}
        first = await client.call_tool("observe", args, meta={META_KEY: "big-1"})
        again = await client.call_tool("observe", args, meta={META_KEY: "big-1"})
        other = await client.call_tool("observe", {**args, "tool": "head"}, meta={META_KEY: "big-1"})
    assert not first.is_error and first.structured_content == again.structured_content
    assert other.is_error and "different call" in other.content[0].text  # type: ignore[union-attr]
    assert worker_runs == [1]
    with sqlite3.connect(config.db_path) as conn:
        results = conn.execute("SELECT COUNT(*) FROM task_events WHERE task_id = ? AND kind = 'tool_result'",
                               (tid,)).fetchone()[0]
    assert results == 1


def test_a_huge_body_that_is_not_an_observe_result_goes_to_the_sdk_whole(tmp_path: Path) -> None:
    def handoff(message: dict[str, Any]) -> Any:
        body = tmp_path / "body"
        body.write_bytes(json.dumps(message).encode())
        with open(body, "rb") as fh:
            return big_call.extract(fh, body.stat().st_size, tmp_path / "spool")

    text = "x" * 100_000
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "observe", "arguments": {"task_id": "t", "kind": "result", "result": text}}}
    got = handoff(call)
    assert got is not None and json.loads(got.envelope)["params"]["arguments"]["result"] == got.value.token
    assert got.value.path.read_text() == text
    got.value.release()
    assert not got.value.path.exists()
    decision = json.loads(json.dumps(call))
    decision["params"]["arguments"]["kind"] = "decision"
    assert handoff(decision) is None
    as_text = json.loads(json.dumps(call))
    as_text["params"]["arguments"] = {"task_id": "t", "kind": "result", "result": "r", "text": text}
    assert handoff(as_text) is None
    assert handoff({**call, "method": "tools/list"}) is None


@pytest.mark.parametrize("window", [7, 13, 64, 1000])
def test_the_result_string_is_decoded_in_pieces_exactly_as_json_loads_decodes_it_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, window: int) -> None:
    monkeypatch.setattr(big_call, "WINDOW", window)
    rng = random.Random(window)
    alphabet = ["a", "é", "✓", "\U0001f600", "\\", '"', "\n", "\t", "\x01", "\ud83d", "/", "\u2028"]
    for _ in range(40):
        value = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 300)))
        raw = json.dumps(value, ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass")
        body = tmp_path / "b"
        body.write_bytes(raw)
        with open(body, "rb") as fh, open(tmp_path / "out", "wb") as out:
            big_call.decode_string(fh, 1, len(raw) - 1, out)
        assert (tmp_path / "out").read_bytes().decode("utf-8", "surrogatepass") == json.loads(raw)


async def test_a_big_bosun_run_output_is_observed_from_its_spool_file_as_in_memory(
        tmp_path: Path, worker_runs: list[int]) -> None:
    """``/v1/observe`` (bosun run) of a spool over the threshold: the file path, the same answer and journal,
    invalid UTF-8 and a head+tail cut (over BOSUN_MAX_PAYLOAD_BYTES) included."""
    data = payload(300_000, seed=3).encode() + b"\xff\xfe not UTF-8 \xe2\x9c\n"
    answers: dict[int, dict[str, Any]] = {}
    events: dict[int, dict[str, Any]] = {}
    for big in (1024, 0):  # the file path, then in memory
        config = Config(home=tmp_path / f"h{big}", policies=[], big_observe_bytes=big, max_payload_bytes=200_000)
        engine = Engine(config, embedder_factory=lambda _c: HashEmbedder(64))
        async with Client(create_server(engine)):
            spool = config.home / "spool"
            spool.mkdir(parents=True, exist_ok=True)
            (spool / "run-1-a.out").write_bytes(data)
            answers[big] = await engine.observe.observe_spool(None, "shell-1", "make test", "run-1-a.out", 2)
        with sqlite3.connect(config.db_path) as conn:
            row = conn.execute("SELECT payload_json FROM task_events WHERE kind = 'tool_failure'").fetchone()
        events[big] = json.loads(row[0])
    assert worker_runs == [1]
    assert answers[1024]["partial"] == answers[0]["partial"] == {"bytes": len(data), "spool": "run-1-a.out"}
    for key in ("ref", "bytes", "tokens", "lines", "kind", "outline", "recall", "redacted", "offloaded"):
        assert answers[1024][key] == answers[0][key], key
    for key in ("sha256", "bytes", "tokens", "error_signature", "error", "exit_code", "redactions", "content_kind"):
        assert events[1024][key] == events[0][key], key


def test_bosun_big_observe_bytes_is_read_with_a_default_and_0_turns_it_off(tmp_path: Path) -> None:
    assert Config.from_env({}, home=tmp_path).big_observe_bytes == 8 << 20
    assert Config.from_env({"BOSUN_BIG_OBSERVE_BYTES": "0"}, home=tmp_path).big_observe_bytes == 0
    assert Config.from_env({"BOSUN_BIG_OBSERVE_BYTES": "1048576"}, home=tmp_path).big_observe_bytes == 1 << 20


def test_spool_files_a_killed_daemon_left_are_swept_and_live_ones_kept(tmp_path: Path) -> None:
    import os

    old, live, other = tmp_path / "value-old", tmp_path / "scrubbed-live", tmp_path / "run-1-a.out"
    for path in (old, live, other):
        path.write_text("x")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    os.utime(other, (time.time() - 7200, time.time() - 7200))
    big_call.sweep(tmp_path)
    assert not old.exists() and live.exists() and other.exists()
