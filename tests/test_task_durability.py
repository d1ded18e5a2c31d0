"""Many agents and killed daemons: no update lost or applied twice, the journal replays to the same seal."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from mcp import Client

from bosun.core.embedding import HashEmbedder
from bosun.core.task.replay import rebuild
from bosun.core.task.seal import hashes
from bosun.core.task.state import Event
from bosun.server.app import create_server
from bosun.server.config import Config
from bosun.server.engine import Engine
from bosun.server.transport.serve import bind_socket, http_app
from tests.pg_cluster import BACKENDS, fresh_database, with_backend

AGENTS = 20
UPDATES_EACH = 2


def _sc(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content[0].text
    assert result.structured_content is not None
    return result.structured_content


@pytest.fixture(params=BACKENDS)
def config(request: pytest.FixtureRequest, config: Config) -> Config:
    """The in-process daemon runs on SQLite and on a throwaway PostgreSQL (tests/pg_cluster.py)."""
    return with_backend(config, request.param)


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest) -> str | None:
    """None: the spawned daemon keeps SQLite in its home; else a fresh PostgreSQL database."""
    return fresh_database() if request.param == "postgresql" else None


@pytest.fixture
async def http_url(config: Config) -> AsyncIterator[str]:
    """A real streamable-HTTP bosun on a free loopback port, in this process (HashEmbedder)."""
    engine = Engine(config, embedder_factory=lambda _c: HashEmbedder(64))
    sock = bind_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(http_app(create_server(engine), "127.0.0.1", None),
                                           log_level="warning", access_log=False, lifespan="on"))
    server.capture_signals = lambda: __import__("contextlib").nullcontext()  # type: ignore[method-assign]
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    yield f"http://127.0.0.1:{port}/mcp"
    server.should_exit = True
    await task


async def test_twenty_concurrent_agents_lose_and_duplicate_nothing(http_url: str) -> None:
    async with Client(http_url) as lead:
        st = _sc(await lead.call_tool("plan", {"mode": "start", "objective": "one task, many agents"}))
    tid = st["task_id"]
    conflicts: list[tuple[int, int, str]] = []  # (based_on, current, seal) as reported

    async def agent(i: int) -> None:
        async with Client(http_url) as c:
            for j in range(UPDATES_EACH):
                cur = _sc(await c.call_tool("plan", {"mode": "status", "task_id": tid}))["version"]
                while True:
                    r = await c.call_tool("plan", {"mode": "update", "task_id": tid, "based_on_version": cur,
                                                   "decisions": [f"agent{i} update{j}"], "agent": f"agent{i}"})
                    if not r.is_error:
                        break
                    text = str(getattr(r.content[0], "text", ""))
                    m = re.search(r"current_version=(\d+) seal=sha256:([0-9a-f]{64})", text)
                    assert "conflict" in text and m, text
                    conflicts.append((cur, int(m.group(1)), m.group(2)))
                    cur = int(m.group(1))

    await asyncio.gather(*(agent(i) for i in range(AGENTS)))
    async with Client(http_url) as c:
        final = _sc(await c.call_tool("plan", {"mode": "resume", "task_id": tid}))
    decisions = final["resume"]["decisions"]
    expected = {f"agent{i} update{j}" for i in range(AGENTS) for j in range(UPDATES_EACH)}
    assert len(decisions) == len(expected) and set(decisions) == expected  # none lost, none twice
    assert final["version"] == 1 + len(expected)  # no event other than the accepted updates
    for based_on, current, _seal in conflicts:
        assert current > based_on  # every conflict was a real one, and it said where the task was


def _wait_daemon(home: Path, proc: subprocess.Popen[bytes], timeout: float = 90.0) -> str:
    deadline = time.monotonic() + timeout
    path = home / "daemon.json"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"daemon exited early: {proc.stderr.read().decode() if proc.stderr else ''}")
        try:
            data = json.loads(path.read_text())
            if data.get("pid") == proc.pid:
                return str(data["url"])
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    raise AssertionError("daemon did not start in time")


def _spawn(home: Path, database_url: str | None) -> subprocess.Popen[bytes]:
    env = dict(os.environ, BOSUN_HOME=str(home))
    env.pop("BOSUN_DATABASE_URL", None)
    if database_url:
        env["BOSUN_DATABASE_URL"] = database_url
    return subprocess.Popen([sys.executable, "-m", "bosun", "serve", "--home", str(home), "--port", "0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)


def _journal(home: Path, task_id: str, database_url: str | None) -> list[Event]:
    sql = "SELECT seq, kind, payload_json, agent, created_at FROM task_events WHERE task_id = ? ORDER BY seq"
    if database_url:
        import psycopg

        with psycopg.connect(database_url) as pg:
            rows = pg.execute(sql.replace("?", "%s"), (task_id,)).fetchall()
    else:
        with sqlite3.connect(home / "bosun.db") as db:
            rows = db.execute(sql, (task_id,)).fetchall()
    return [Event(task_id, r[0], r[1], json.loads(r[2]), r[3], r[4]) for r in rows]


async def test_sigkill_mid_stream_loses_no_returned_update(home: Path, database_url: str | None) -> None:
    proc = _spawn(home, database_url)
    returned: list[tuple[str, int, str]] = []  # (text, version, seal) of every update that returned
    tid = ""
    try:
        url = await asyncio.to_thread(_wait_daemon, home, proc)
        async with Client(url) as c:
            tid = _sc(await c.call_tool("plan", {"mode": "start", "objective": "survive a kill"}))["task_id"]
            for i in range(1000):
                r = _sc(await c.call_tool("plan", {"mode": "update", "task_id": tid,
                                                   "constraints": [f"c{i}"], "start_step": f"s{i}"}))
                returned.append((f"c{i}", r["version"], r["seal"]))
                if len(returned) == 25:  # kill while the next update is on the wire
                    asyncio.get_running_loop().call_soon(os.kill, proc.pid, signal.SIGKILL)
    except (Exception, BaseExceptionGroup):  # the connection dies with the daemon
        pass
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL and len(returned) >= 25

    proc = _spawn(home, database_url)
    try:
        url = await asyncio.to_thread(_wait_daemon, home, proc)
        async with Client(url) as c:
            _text, last_version, last_seal = returned[-1]
            st = _sc(await c.call_tool("plan", {"mode": "status", "task_id": tid, "seal": last_seal}))
            res = _sc(await c.call_tool("plan", {"mode": "resume", "task_id": tid}))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    constraints = res["resume"]["constraints"]
    for text, _version, _seal in returned:
        assert constraints.count(text) == 1  # every update that returned is there, once
    assert st["version"] >= last_version
    # the seal the agent last got is either current or an ancestor (an update in flight may have committed)
    assert st["drift"]["verdict"] in ("ok", "normal_growth")
    replay = rebuild(_journal(home, tid, database_url))
    assert replay.version == st["version"] and "sha256:" + replay.seal == st["seal"]
    assert hashes(replay) == st["hashes"]
    assert replay.constraints == constraints
