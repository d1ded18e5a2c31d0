"""bosun.client: typed sync and async methods over an MCP session; errors name the field; the example runs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from bosun.client import AsyncBosun, Bosun, BosunClientError, ConnectionFailed, ToolCallError, daemon_endpoint
from bosun.server.app import create_server
from bosun.server.engine import Engine

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "client_example.py"


async def test_async_select_and_route_return_the_tool_answers(engine: Engine) -> None:
    async with AsyncBosun(create_server(engine)) as b:
        assert b.endpoint == "in-process"
        sel = await b.select_context("retry policy", ["retry with backoff", "lunch menu"], budget_tokens=50)
        assert sel["budget_tokens"] == 50 and sel["candidates"] == 2
        assert all({"id", "rank", "tokens"} <= set(s) for s in sel["selected"])
        out = await b.route("roll back the production deploy")
        assert isinstance(out["hits"], list) and isinstance(out["abstained"], bool)
        policy = await b.get_policy("database-migrations")
        assert policy["name"] == "database-migrations" and policy["text"]


async def test_a_refused_call_raises_naming_the_field(engine: Engine) -> None:
    async with AsyncBosun(create_server(engine)) as b:
        with pytest.raises(ToolCallError) as err:
            await b.select_context("goal", [{"id": "a"}])
        assert err.value.tool == "select_context"
        assert err.value.field == "candidates[0]"
        with pytest.raises(ToolCallError) as err2:
            await b.compass("forecast", [{"name": "weather"}])
        assert err2.value.field == "tools[0].description"


async def test_closed_client_refuses_calls() -> None:
    with pytest.raises(BosunClientError, match="not open"):
        await AsyncBosun("http://127.0.0.1:1/mcp").route("x")
    with pytest.raises(ConnectionFailed, match="expected an http"):
        async with AsyncBosun("ftp://nowhere"):
            pass


def test_daemon_endpoint_reads_url_and_token(tmp_path: Path) -> None:
    assert daemon_endpoint(tmp_path) is None
    (tmp_path / "daemon.json").write_text(json.dumps({"url": "http://127.0.0.1:8790/mcp", "token": "s3"}))
    assert daemon_endpoint(tmp_path) == ("http://127.0.0.1:8790/mcp", "s3")
    (tmp_path / "daemon.json").write_text(json.dumps({"url": "file:///etc/passwd"}))
    assert daemon_endpoint(tmp_path) is None


def test_the_example_runs_with_the_sync_client(engine: Engine) -> None:
    spec = importlib.util.spec_from_file_location("client_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    with Bosun(create_server(engine)) as b:
        out = example.main(b)
    assert set(out) == {"selected", "passed", "counts"}
    assert out["selected"] and set(out["selected"]) <= {"retry", "timeout", "lunch"}
    assert isinstance(out["passed"], bool) and sum(out["counts"].values()) >= 1
