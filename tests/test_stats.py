"""StatsService, the tool-outcome recorder and the local telemetry file, through real MCP calls."""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from bosun.core.embedding import HashEmbedder
from bosun.server import telemetry
from bosun.server.app import create_server
from bosun.server.commands import stats as stats_cmd
from bosun.server.config import Config, ConfigError
from bosun.server.engine import Engine
from bosun.server.services.stats import StatsService
from tests.test_audit_tool import CHUNKS, CONFIG
from tests.test_observe import PYTEST_OUT


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("BOSUN_TELEMETRY", "BOSUN_TELEMETRY_PATH", "BOSUN_HOME"):
        monkeypatch.delenv(name, raising=False)


def _engine(home: Path, **cfg: Any) -> Engine:
    return Engine(Config(home=home, policies=[], **cfg), embedder_factory=lambda _c: HashEmbedder(64))


def _sc(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content[0].text
    return dict(result.structured_content)


@pytest.fixture
async def session(tmp_path: Path) -> AsyncIterator[tuple[Engine, Client, Any]]:
    engine = _engine(tmp_path / "home", token="tok")
    mcp = create_server(engine)
    async with Client(mcp) as client:
        yield engine, client, mcp


async def _work(client: Client) -> dict[str, Any]:
    """A task with an offloaded result, a drop receipt, a sealed precheck, a repeated call and a failed audit."""
    start = _sc(await client.call_tool("plan", {"mode": "start", "objective": "Fix the date parser", "agent": "cc"}))
    tid = start["task_id"]
    args = {"task_id": tid, "kind": "result", "tool": "bash", "args": {"command": "pytest /home/me/secret_dir"},
            "result": PYTEST_OUT}
    big = _sc(await client.call_tool("observe", args))
    drop = _sc(await client.call_tool("observe", {"task_id": tid, "kind": "dropped", "result": big["ref"]}))
    pre = _sc(await client.call_tool("precheck", {"task_id": tid, "tool": "bash",
                                                  "args": {"command": "pytest /home/me/secret_dir"},
                                                  "seal": start["seal"]}))
    audit = _sc(await client.call_tool("audit", {"response": "Aspirin does not lower fever.", "chunks": CHUNKS,
                                                 "config": CONFIG, "as_of": "2024-06-01"}))
    await client.call_tool("route", {"prompt": "zebra-unique-prompt-words about deploying to production"})
    return {"tid": tid, "big": big, "drop": drop, "pre": pre, "audit": audit}


async def test_snapshot_counts_what_the_tools_did(session: tuple[Engine, Client, Any]) -> None:
    engine, client, _ = session
    done = await _work(client)
    snap = await StatsService(engine).snapshot()
    overall = snap["savings"]["overall"]
    assert overall["offloaded_tokens"] == done["big"]["tokens"]
    assert overall["credited_tokens"] == done["drop"]["credited_tokens"] == done["big"]["tokens"]
    assert overall["net_tokens"] == overall["credited_tokens"] - overall["overhead_tokens"] - overall["recalled_tokens"]
    assert snap["savings"]["series"][-1]["credited"] == overall["credited_tokens"]
    assert snap["savings"]["largest_refs"][0]["tokens"] == done["big"]["tokens"]
    [task] = snap["tasks"]
    assert task["objective"] == "Fix the date parser" and task["agents"] == ["cc"] and task["task_id"] == done["tid"]
    assert task["last_drift"] == done["pre"]["drift"]["verdict"]
    verdict = done["pre"]["verdict"]
    assert snap["guard"]["verdicts"] == {verdict: 1}
    if verdict != "allow":
        assert snap["guard"]["top_rules"][0]["rule"] == done["pre"]["rule"]
    assert snap["audits"]["count"] == 1 and snap["audits"]["failed"] == 1
    reasons = {r["reason"] for r in snap["audits"]["top_failure_reasons"]}
    assert reasons == set(done["audit"]["policy_issues"])
    assert snap["routing"]["attempts"] == 1
    tools = {t["tool"]: t["calls"] for t in snap["tools"]}
    assert tools["observe"] == 2 and tools["plan"] == 1
    assert "path" not in snap["daemon"]["store"] and snap["daemon"]["store"]["bytes"] > 0


async def test_telemetry_holds_no_prompt_text_argument_or_path(session: tuple[Engine, Client, Any]) -> None:
    engine, client, _ = session
    await _work(client)
    text = (engine.config.home / telemetry.FILE_NAME).read_text()
    assert text.count("\n") >= 7
    for secret in ("zebra-unique", "secret_dir", "/home/me", "Aspirin", str(engine.config.home)):
        assert secret not in text


async def test_telemetry_off_writes_nothing(tmp_path: Path) -> None:
    engine = _engine(tmp_path / "home", telemetry=False)
    async with Client(create_server(engine)) as client:
        await _work(client)
        snap = await StatsService(engine).snapshot()
    assert not list((tmp_path / "home").glob("telemetry*"))
    assert snap["telemetry"]["enabled"] is False and snap["savings"]["overall"]["offloaded_tokens"] > 0


def test_config_switch(tmp_path: Path) -> None:
    assert Config.from_env({}).telemetry is True
    cfg = Config.from_env({"BOSUN_TELEMETRY": "off", "BOSUN_TELEMETRY_PATH": str(tmp_path / "t.jsonl")})
    assert cfg.telemetry is False and cfg.telemetry_path == tmp_path / "t.jsonl"
    with pytest.raises(ConfigError, match="BOSUN_TELEMETRY"):
        Config.from_env({"BOSUN_TELEMETRY": "maybe"})
    assert telemetry.sink_of(True, None, tmp_path) == str(tmp_path / "telemetry.jsonl")
    assert telemetry.sink_of(False, None, tmp_path) is None


def test_rotation_keeps_two_generations_and_reads_them_in_order(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(telemetry, "MAX_BYTES", 400)
    target = tmp_path / "t.jsonl"
    telemetry.bind(True, target, tmp_path)
    try:
        for i in range(60):
            telemetry.record_tool("observe", float(i), False)
    finally:
        telemetry.unbind()
    files = telemetry.generations(target)
    assert [f.name for f in files][:2] == ["t.jsonl.2", "t.jsonl.1"]
    assert all(f.stat().st_size < 400 + 200 for f in files)
    values = [e["ms"] for e in telemetry.read_events(target)]
    assert values == sorted(values) and values[-1] == 59.0 and len(values) < 60  # the oldest were dropped


async def test_dashboard_routes_need_the_token_and_serve_json(session: tuple[Engine, Client, Any]) -> None:
    engine, client, mcp = session
    done = await _work(client)
    app = mcp.streamable_http_app()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        for path in ("/", "/dashboard", "/dashboard/api/stats", "/dashboard/static/app.js"):
            assert (await http.get(path)).status_code == 401
        auth = {"Authorization": "Bearer tok"}
        assert (await http.get("/", headers=auth)).headers["location"] == "/dashboard"
        page = await http.get("/dashboard", headers=auth)
        assert page.status_code == 200 and "<title>bosun dashboard</title>" in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]
        body = (await http.get("/dashboard/api/stats", headers=auth)).json()
        assert body["tasks"][0]["task_id"] == done["tid"]
        outline = await http.get("/dashboard/api/ref", params={"ref": done["big"]["ref"]}, headers=auth)
        assert outline.status_code == 200 and outline.json()["kind"] == "test"
        assert (await http.get("/dashboard/api/ref", params={"ref": "nope"}, headers=auth)).status_code == 404
        assert (await http.get("/dashboard/static/../__init__.py", headers=auth)).status_code in (401, 404)
    # reading an outline for a person charges no task's ledger
    assert (await engine.ledger.summary(done["tid"]))["recalled_count"] == 0


async def test_stats_command_reads_the_store_without_a_daemon(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    engine = _engine(home)
    async with Client(create_server(engine)) as client:
        done = await _work(client)
    cfg = Config(home=home, policies=[])
    snap = await stats_cmd.local_snapshot(cfg)
    assert snap["daemon"]["reachable"] is False
    assert snap["savings"]["overall"]["credited_tokens"] == done["big"]["tokens"]
    text = stats_cmd.render({**snap, "source": "store"})
    assert f"{done['big']['tokens']:,}" in text and "Fix the date parser" in text and "no daemon" in text
    assert "Audits: 1: 0 passed, 1 failed" in text


def test_stats_command_without_state_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = argparse.Namespace(json=True, tasks=5, home=str(tmp_path / "empty"))
    assert stats_cmd.run(args) == 2
    assert "no bosun state" in capsys.readouterr().err


def test_stats_json_is_the_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import anyio

    home = tmp_path / "home"

    async def work() -> None:
        async with Client(create_server(_engine(home))) as client:
            await _work(client)

    anyio.run(work)
    args = argparse.Namespace(json=True, tasks=5, home=str(home))
    assert stats_cmd.run(args) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["source"] == "store" and body["tasks"][0]["objective"] == "Fix the date parser"


def test_telemetry_reader_reads_on_from_where_it_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bosun.server.services.stats import TelemetryReader

    target = tmp_path / "t.jsonl"
    reader = TelemetryReader()
    assert reader.events(str(target)) == []
    target.write_text('{"event":"tool","tool":"a"}\n{"event":"tool","tool":"b"}\n{"event":"to')
    assert [e["tool"] for e in reader.events(str(target))] == ["a", "b"]  # the torn line waits
    with target.open("a") as fh:
        fh.write('ol","tool":"c"}\n')
    assert [e["tool"] for e in reader.events(str(target))] == ["a", "b", "c"]
    monkeypatch.setattr(telemetry, "MAX_BYTES", 10)
    telemetry.bind(True, target, tmp_path)
    try:
        telemetry.record_tool("d", 1.0, False)  # rotates: the live file becomes .1
    finally:
        telemetry.unbind()
    assert [e["tool"] for e in reader.events(str(target))] == ["a", "b", "c", "d"]


async def test_shared_memory_scopes_are_not_shown_as_tasks(session: tuple[Engine, Client, Any]) -> None:
    engine, client, _ = session
    memory = [{"scope": "project", "key": "k", "text": "the staging database is read-only"},
              {"scope": "global", "key": "g", "text": "run the linter before committing"}]
    tid = _sc(await client.call_tool("plan", {"mode": "start", "objective": "remember things",
                                              "more": {"memory": memory}}))["task_id"]
    listed = {row["task_id"] for row in await engine.tasks.list_tasks(limit=50)}
    assert any(t.startswith("scope:") for t in listed)  # the journals exist...
    snap = await StatsService(engine).snapshot()
    assert [t["task_id"] for t in snap["tasks"]] == [tid]  # ...but only the real task is a task
    assert snap["savings"]["overall"]["tasks"] == 1


def test_the_latency_line_ends_on_a_full_bucket() -> None:
    """The last event joins the last bucket: alone in its own, its latency was the line's last point."""
    events = [{"ts": 1000.0 + i, "delivered_ms": 50.0} for i in range(240)] + [{"ts": 1240.0, "delivered_ms": 0.5}]
    series = StatsService._latency_series(events)
    assert len(series) <= 120
    assert series[-1]["n"] > 1 and series[-1]["p99"] == 50.0


async def test_clients_are_counted_by_who_they_are_not_by_session(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from bosun.server.dashboard.recorder import Recorder

    stats = StatsService(_engine(tmp_path / "home"))
    recorder = Recorder(stats)

    def request(session_id: str, name: str) -> Any:
        info = SimpleNamespace(name=name, version="1.0")
        return SimpleNamespace(method="ping", params={},
                               session=SimpleNamespace(client_params=SimpleNamespace(client_info=info)),
                               request=SimpleNamespace(headers={"mcp-session-id": session_id},
                                                       client=SimpleNamespace(host="10.0.0.7", port=50000)))

    async def call_next(_ctx: Any) -> None:
        return None

    for sid in ("s1", "s2", "s3"):  # one program, three sessions (a library connecting per call, a restarted bridge)
        await recorder(request(sid, "claude-code"), call_next)
    await recorder(request("s4", "cursor"), call_next)
    daemon = stats.daemon()
    assert daemon["sessions_recent"] == 4 and daemon["clients_recent"] == 2
