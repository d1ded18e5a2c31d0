"""plan over the in-memory MCP client (both wire eras): the drift table from real call sequences,
bad input, optimistic concurrency, resources and the task-resume prompt."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from mcp import Client

from bosun.core.task.manifest import MAX_TOKENS
from bosun.core.tokens import estimate_tokens
from bosun.server.engine import Engine

MORE = {"complete", "lessons", "memory", "flags", "why", "revise", "rules", "declare", "close", "project", "overhead"}


def _args(args: dict[str, Any]) -> dict[str, Any]:
    """The rarer plan fields travel in ``more`` (the tool's listing budget)."""
    more = {k: args.pop(k) for k in list(args) if k in MORE}
    return {**args, "more": more} if more else args


def _sc(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content[0].text
    assert result.structured_content is not None
    return result.structured_content


def _err(result: Any) -> str:
    assert result.is_error, result.structured_content
    return str(result.content[0].text)


async def _start(client: Client, **extra: Any) -> dict[str, Any]:
    args = {"mode": "start", "objective": "fix the PowerShell profile bug",
            "steps": ["reproduce", "find the faulty line", "patch", "run tests"],
            "constraints": ["never edit tests/"], "decisions": ["keep UTF-8 without BOM"],
            "rules": "Rule 1: ask before deleting files.", "agent": "alice"}
    args.update(extra)
    return _sc(await client.call_tool("plan", _args(args)))


async def _update(client: Client, task_id: str, **args: Any) -> dict[str, Any]:
    return _sc(await client.call_tool("plan", _args({"mode": "update", "task_id": task_id, **args})))


async def _status(client: Client, task_id: str, seal: str) -> dict[str, Any]:
    return _sc(await client.call_tool("plan", {"mode": "status", "task_id": task_id, "seal": seal}))


async def test_start_returns_a_deterministic_manifest_within_budget(client: Client) -> None:
    st = await _start(client)
    manifest = st["manifest"]
    assert manifest.endswith("SEAL=" + st["seal"]) and st["seal"].startswith("sha256:")
    assert f"task={st['task_id']}" in manifest and "plan=0/4" in manifest
    assert estimate_tokens(manifest) <= MAX_TOKENS
    again = _sc(await client.call_tool("plan", {"mode": "resume", "task_id": st["task_id"]}))
    assert again["manifest"] == manifest  # same state, same bytes
    long = await _start(client, objective="x" * 300 + " and then a lot more words " * 40,
                        steps=["a very long step description " * 30])
    assert estimate_tokens(long["manifest"]) <= MAX_TOKENS


async def test_drift_table_from_real_call_sequences(client: Client) -> None:
    a = await _start(client)
    tid, seal_a = a["task_id"], a["seal"]
    h0 = (await _status(client, tid, seal_a))["hashes"]

    # same seal: ok
    assert (await _status(client, tid, seal_a))["drift"]["verdict"] == "ok"

    # another agent appends a decision: normal growth, prefix hash unchanged
    b = await _update(client, tid, decisions=["patch the loader, not the profile"], agent="bob",
                      based_on_version=a["version"])
    seal_b = b["seal"]
    st = await _status(client, tid, seal_a)
    assert st["drift"]["verdict"] == "normal_growth" and st["drift"]["changed"] == ["tail"]
    assert st["hashes"]["prefix_hash"] == h0["prefix_hash"] and st["hashes"]["tail_hash"] != h0["tail_hash"]
    assert st["seal"] == seal_b and "semantic_break" not in st["drift"]

    # the plan is replaced: minor drift (zone B)
    c = await _update(client, tid, steps=["reproduce", "bisect the profile", "patch", "run tests"], agent="bob")
    st = await _status(client, tid, seal_b)
    assert st["drift"]["verdict"] == "minor_drift" and st["drift"]["changed"] == ["zoneB"]
    assert st["hashes"]["prefix_hash"] != h0["prefix_hash"]

    # the rules (part of the head) change: critical drift, full re-prefill
    d = await _update(client, tid, rules="Rule 1: never delete files.", agent="bob")
    st = await _status(client, tid, c["seal"])
    assert st["drift"]["verdict"] == "critical_drift" and st["drift"]["cause"] == "head_changed"
    assert "head" in st["drift"]["changed"]

    # a pinned decision is rewritten: critical semantic drift for anyone who carried it
    e = await _update(client, tid, agent="bob", revise=[{"collection": "decisions", "index": 0,
                                                          "text": "write UTF-8 with BOM", "reason": "PS 5.1"}])
    st = await _status(client, tid, d["seal"])
    drift = st["drift"]
    assert drift["verdict"] == "critical_drift" and drift["semantic_break"] is True
    assert drift["cause"] == "pinned_rewrite" and drift["rewritten"][0]["collection"] == "decisions"
    # ...but the agent that already holds the post-rewrite seal is fine
    assert (await _status(client, tid, e["seal"]))["drift"]["verdict"] == "ok"


async def test_head_recorded_by_observe_path_is_critical(client: Client, engine: Engine) -> None:
    a = await _start(client)
    svc = engine.tasks
    rep = await svc.record_head(a["task_id"], "head", "You are a coding agent. Current time: 2026-11-29 10:00:01")
    assert rep["changed"] and rep["volatile"][0]["kind"] == "timestamp"
    st = await _status(client, a["task_id"], a["seal"])
    assert st["drift"]["verdict"] == "critical_drift" and st["drift"]["cause"] == "head_changed"
    contract = await svc.record_head(a["task_id"], "contract", '{"tools": ["read", "write"]}')
    st2 = await _status(client, a["task_id"], rep["seal"])
    assert contract["changed"] and st2["drift"]["verdict"] == "minor_drift"


async def test_rewrite_of_an_item_the_agent_never_saw_is_not_a_semantic_break(client: Client) -> None:
    a = await _start(client)
    tid = a["task_id"]
    await _update(client, tid, constraints=["no network"])
    await _update(client, tid, revise=[{"collection": "constraints", "index": 1, "text": "no network except PyPI",
                                        "reason": "we need one package"}])
    st = await _status(client, tid, a["seal"])  # a never had constraint #1
    assert st["drift"]["verdict"] == "normal_growth" and "semantic_break" not in st["drift"]


async def test_unknown_seal_is_critical(client: Client) -> None:
    a = await _start(client)
    other = await _start(client, objective="another task")
    st = await _status(client, a["task_id"], other["seal"])
    assert st["drift"]["verdict"] == "critical_drift" and st["drift"]["cause"] == "unknown_seal"


async def test_stale_update_is_rejected_with_the_current_seal(client: Client) -> None:
    a = await _start(client)
    tid = a["task_id"]
    b = await _update(client, tid, decisions=["d1"], based_on_version=a["version"])
    text = _err(await client.call_tool("plan", {"mode": "update", "task_id": tid, "decisions": ["d2"],
                                                "based_on_version": a["version"]}))
    assert "conflict" in text and f"current_version={b['version']}" in text and b["seal"] in text
    st = _sc(await client.call_tool("plan", {"mode": "resume", "task_id": tid}))
    assert st["resume"]["decisions"] == ["keep UTF-8 without BOM", "d1"] and st["version"] == b["version"]


async def test_bad_input_gets_a_clear_error(client: Client) -> None:
    a = await _start(client)
    tid = a["task_id"]
    assert "task not found: t_missing" in _err(await client.call_tool("plan", {"mode": "status",
                                                                               "task_id": "t_missing"}))
    assert "seal: not a sha256 seal" in _err(await client.call_tool(
        "plan", {"mode": "status", "task_id": tid, "seal": "sha256:abc"}))
    assert "objective: is immutable" in _err(await client.call_tool(
        "plan", {"mode": "update", "task_id": tid, "objective": "something else"}))
    assert "update carries nothing" in _err(await client.call_tool("plan", {"mode": "update", "task_id": tid}))
    assert "reason" in _err(await client.call_tool("plan", {"mode": "update", "task_id": tid, "more": {"revise": [
        {"collection": "decisions", "index": 0, "text": "changed"}]}}))
    assert "revise[0].index" in _err(await client.call_tool("plan", {"mode": "update", "task_id": tid, "more": {"revise": [
        {"collection": "decisions", "index": 7, "text": "changed", "reason": "r"}]}}))
    assert "declare.bogus" in _err(await client.call_tool("plan", {"mode": "update", "task_id": tid,
                                                                   "more": {"declare": {"bogus": 3}}}))
    assert "objective: is required" in _err(await client.call_tool("plan", {"mode": "start"}))
    closed = await _update(client, tid, close="done")
    assert closed["status"] == "done" and "manifest" not in closed
    with pytest.raises(Exception, match="closed"):
        await client.read_resource(f"bosun://task/{tid}/manifest")
    assert "closed" in _err(await client.call_tool("plan", {"mode": "update", "task_id": tid,
                                                            "decisions": ["late"]}))


async def test_resources_prompt_and_status_pressure(client: Client) -> None:
    a = await _start(client, budget_tokens=1000)
    tid = a["task_id"]
    await _update(client, tid, declare={"window": 200_000, "history": 12_000}, start_step="reproduce")
    res = await client.read_resource(f"bosun://task/{tid}/manifest")
    manifest = res.contents[0].text  # type: ignore[union-attr]
    assert manifest.startswith(f"BOSUN/1 task={tid}") and 'now="reproduce"' in manifest
    status = json.loads((await client.read_resource(f"bosun://task/{tid}/status")).contents[0].text)  # type: ignore[union-attr]
    zones = status["pressure"]["zones"]
    assert zones["C"]["declared"] == {"history": 12_000} and "tool_output" in zones["C"]["unknown"]
    assert zones["A"]["measured"]["rules"] > 0 and "system_head" in zones["A"]["unknown"]
    assert status["pressure"]["window"] == 200_000 and 0 < status["pressure"]["pressure"] < 1
    assert status["budget"]["status"] == "ok" and status["seal"] == manifest.rsplit("sha256:", 1)[1]
    assert "net_tokens" in status["ledger"]
    prompt = await client.get_prompt("task-resume", {"task_id": tid})
    text = prompt.messages[0].content.text  # type: ignore[union-attr]
    assert "never edit tests/" in text and manifest in text and "Active: reproduce" in text


async def test_memory_lessons_and_resume_view(client: Client) -> None:
    a = await _start(client, lessons=["run pwsh -NoProfile to reproduce"],
                     memory=[{"scope": "project", "key": "shell", "text": "pwsh 7.4"}])
    tid = a["task_id"]
    await _update(client, tid, complete=["reproduce"], memory=[{"scope": "global", "key": "k", "text": "v"}])
    r = _sc(await client.call_tool("plan", {"mode": "resume", "task_id": tid, "seal": a["seal"]}))
    res = r["resume"]
    assert res["plan"]["completed"] == ["reproduce"] and res["lessons"] == ["run pwsh -NoProfile to reproduce"]
    assert {m["scope"] for m in res["memory"]} == {"project", "global"}
    assert res["recent"][0]["kind"] == "task_started"
    assert "scope" in _err(await client.call_tool("plan", {"mode": "update", "task_id": tid, "more": {"memory": [
        {"scope": "galaxy", "key": "k", "text": "v"}]}}))


def test_seal_hash_is_plain_sha256_of_documented_bytes() -> None:
    # prefix_hash = sha256(head_hash + zoneB_hash) over the ASCII hex strings (README recipe)
    from bosun.core.task.seal import prefix_hash

    h, b = "a" * 64, "b" * 64
    assert prefix_hash(h, b) == hashlib.sha256((h + b).encode()).hexdigest()


async def test_head_and_contract_through_observe(client: Client) -> None:
    """The head/contract rows of the drift table, recorded by the observe tool (issue 5) via record_head."""
    tools = {t.name for t in (await client.list_tools()).tools}
    if "observe" not in tools:
        pytest.skip("observe tool not registered")
    a = await _start(client)
    tid = a["task_id"]
    r = await client.call_tool("observe", {"task_id": tid, "kind": "contract", "text": "tools: bash(command), edit(path, text)"})
    assert not r.is_error, _err(r) if r.is_error else ""
    st = await _status(client, tid, a["seal"])
    assert st["drift"]["verdict"] == "minor_drift" and st["drift"]["changed"] == ["zoneB"]
    r = await client.call_tool("observe", {"task_id": tid, "kind": "head",
                                           "text": "You are a careful agent. Session started 2026-11-29T09:00:00Z"})
    assert not r.is_error, _err(r) if r.is_error else ""
    st2 = await _status(client, tid, st["seal"])
    assert st2["drift"]["verdict"] == "critical_drift" and st2["drift"]["cause"] == "head_changed"


async def test_json_looking_text_stays_text(client: Client) -> None:
    """The SDK pre-parses JSON-looking strings for non-str parameters; plan's text fields are plain str."""
    a = await _start(client, rules='{"rule": "ask before deleting"}', decisions=['{"db": "sqlite"}'])
    r = _sc(await client.call_tool("plan", {"mode": "resume", "task_id": a["task_id"]}))
    assert r["resume"]["decisions"][-1] == '{"db": "sqlite"}'
