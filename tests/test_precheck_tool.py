"""precheck and handoff over MCP: order of checks, journal catch-up, invariants reload, bad input."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError
from mcp.types import CallToolResult, TextContent

from bosun.core.actions import args_hash
from bosun.server.engine import Engine

RULES = """
[[invariant]]
id = "tests-before-commit"
when = { tool = "git.commit" }
require = { state = "tests_passed" }
message = "Cannot commit while tests are failing"
"""


def text(res: CallToolResult) -> str:
    first = res.content[0]
    return first.text if isinstance(first, TextContent) else ""


async def call(client: Client, name: str, /, **args: Any) -> dict[str, Any]:
    res = await client.call_tool(name, args)
    assert not res.is_error, text(res)
    return res.structured_content or {}


async def error(client: Client, name: str, /, **args: Any) -> str:
    res = await client.call_tool(name, args)
    assert res.is_error
    return text(res)


async def start(client: Client, engine: Engine, budget_tokens: int | None = None,
                constraints: list[str] | None = None) -> str:
    await client.list_tools()  # the client has opened the engine
    state = await engine.tasks.start("fix the bug", constraints=constraints or [], plan=["reproduce", "fix"],
                                         budget={"tokens": budget_tokens} if budget_tokens else {})
    return state.task_id


async def result(engine: Engine, task_id: str, tool: str, args: dict[str, Any], output: str, ref: str | None = None,
                 tokens: int = 50) -> None:
    sig = hashlib.sha256(output.encode()).hexdigest()
    await engine.tasks.append(task_id, "tool_result", {
        "tool": tool, "args_hash": args_hash(args), "args": args, "sha256": sig, "bytes": len(output),
        "tokens": tokens, "ref": ref, "offloaded": ref is not None, "result_signature": sig})


@pytest.fixture(autouse=True)
def _rules(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    path = tmp_path / "invariants.toml"
    path.write_text(RULES)
    monkeypatch.setenv("BOSUN_INVARIANTS", str(path))
    return path


async def test_allow_then_duplicate_answered_with_the_ref(client: Client, engine: Engine) -> None:
    tid = await start(client, engine)
    args = {"command": "cat src/app.py"}
    first = await call(client, "precheck", task_id=tid, tool="bash", args=args)
    assert first["verdict"] == "allow" and "drift" in first
    ref = await engine.refs.put(b"print('hello')\n" * 100, "text/plain")
    await result(engine, tid, "bash", args, "print('hello')\n" * 100, ref=ref, tokens=700)
    again = await call(client, "precheck", task_id=tid, tool="bash", args=args)
    assert again["verdict"] == "suggest_alternative" and again["rule"] == "duplicate:duplicate"
    assert again["ref"] == ref and again["saved_tokens"] == 700
    await result(engine, tid, "bash", {"command": "sed -i 's/hello/bye/' src/app.py"}, "")
    after_edit = await call(client, "precheck", task_id=tid, tool="bash", args=args)
    assert after_edit["verdict"] == "allow"


async def test_invariant_blocks_first_and_reloads_when_the_file_changes(client: Client, engine: Engine,
                                                                         _rules: Path) -> None:
    tid = await start(client, engine)
    out = await call(client, "precheck", task_id=tid, tool="git.commit", args={"message": "x"})
    assert out["verdict"] == "block" and out["rule"] == "invariant:tests-before-commit"
    assert "tests_passed" in out["required_action"]
    await engine.tasks.append(tid, "state_flag", {"name": "tests_passed", "value": True})
    assert (await call(client, "precheck", task_id=tid, tool="git.commit", args={"message": "x"}))["verdict"] == "allow"
    # a broken edit keeps the last good rules and says so
    _rules.write_text(RULES + '\n[[invariant]]\nid = "bad"\nwhen = { tool = "x[" }\nmessage = "m"\n')
    broken = await call(client, "precheck", task_id=tid, tool="git.push", args={})
    assert "invariant[1].when.tool" in broken["invariants_error"] and ".toml:10:" in broken["invariants_error"]
    # a good edit is picked up
    _rules.write_text(RULES + '\n[[invariant]]\nid = "no-push"\nwhen = { tool = "git.push" }\nverdict = "warn"\n'
                      'message = "ask first"\n')
    warned = await call(client, "precheck", task_id=tid, tool="git.push", args={})
    assert warned["verdict"] == "warn" and warned["rule"] == "invariant:no-push" and "invariants_error" not in warned


async def test_budget_blocks_naming_the_numbers(client: Client, engine: Engine) -> None:
    tid = await start(client, engine, budget_tokens=1000)
    await result(engine, tid, "bash", {"command": "cat big.log"}, "x" * 10, tokens=850)
    soft = await call(client, "precheck", task_id=tid, tool="bash", args={"command": "ls"})
    assert soft["verdict"] == "warn" and soft["rule"] == "budget:soft_tokens" and "850" in soft["reasons"][0]
    await result(engine, tid, "bash", {"command": "cat big2.log"}, "y" * 10, tokens=200)
    hard = await call(client, "precheck", task_id=tid, tool="bash", args={"command": "ls"})
    assert hard["verdict"] == "block" and "1,050" in hard["reasons"][0] and "1,000" in hard["reasons"][0]


async def test_repeated_failure_blocks_through_the_journal(client: Client, engine: Engine) -> None:
    tid = await start(client, engine)
    args = {"command": "python reproduce.py"}
    for _ in range(3):
        await engine.tasks.append(tid, "tool_failure", {
            "tool": "bash", "args_hash": args_hash(args), "args": args,
            "error_signature": "ImportError: cannot import name <q>", "error": "ImportError: cannot import name 'x'"})
    out = await call(client, "precheck", task_id=tid, tool="bash", args=args)
    assert out["verdict"] == "block" and out["rule"] == "loop:repeated_failure" and out["required_action"]


async def test_bad_input_is_a_clear_error(client: Client, engine: Engine) -> None:
    tid = await start(client, engine)
    assert "task not found" in await error(client, "precheck", task_id="t_nope", tool="bash", args={})
    assert "tool: not a tool name" in await error(client, "precheck", task_id=tid, tool="rm -rf /", args={})
    assert "args: too large" in await error(client, "precheck", task_id=tid, tool="bash",
                                            args={"command": "x" * 300_000})
    with pytest.raises(MCPError, match=r"name: unknown tool 'prechek'; accepted: "):
        await client.call_tool("prechek", {"task_id": tid, "tool": "bash"})


async def test_handoff_lifecycle_and_errors(client: Client, engine: Engine) -> None:
    tid = await start(client, engine, constraints=["do not change the public API"])
    ref = await engine.refs.put(b"failing test output", "text/plain")
    created = await call(client, "handoff", task_id=tid, mode="create", objective="make test_x pass", inputs=[ref],
                         checks=[{"field": "tests_passed", "op": "equals", "value": True},
                                 {"field": "files_changed", "op": "nonempty"}], budget={"tokens": 5000})
    hid = created["handoff_id"]
    assert created["contract"]["constraints"] == ["do not change the public API"]
    seal_before = created["drift"]["seal"]
    assert (await call(client, "handoff", task_id=tid, mode="accept", handoff_id=hid, agent="child-1"))["status"] == "accepted"
    assert "already accepted by child-1" in await error(client, "handoff", task_id=tid, mode="accept", handoff_id=hid,
                                                        agent="child-2")
    assert "only that agent" in await error(client, "handoff", task_id=tid, mode="complete", handoff_id=hid,
                                            agent="child-2", result={"tests_passed": True})
    version = (await engine.tasks.get(tid)).version
    assert "result" in await error(client, "handoff", task_id=tid, mode="complete", handoff_id=hid, agent="child-1")
    assert (await engine.tasks.get(tid)).version == version  # nothing stored half-way
    done = await call(client, "handoff", task_id=tid, mode="complete", handoff_id=hid, agent="child-1",
                      result={"tests_passed": False, "files_changed": ["a.py"]})
    assert done["passed"] is False and done["failures"][0]["check"] == "tests_passed:equals"
    assert done["seal"] != seal_before  # folded into the parent's seal
    state = await engine.tasks.get(tid)
    assert state.handoffs[hid]["status"] == "completed" and any(hid in d for d in state.decisions)
    stored = json.loads(await engine.refs.get(done["result_ref"]))
    assert stored["files_changed"] == ["a.py"]
    status = await call(client, "handoff", task_id=tid, mode="status")
    assert status["handoffs"][0]["passed"] is False
    assert "inputs[0]" in await error(client, "handoff", task_id=tid, mode="create", objective="x",
                                      inputs=["mem://sha256:" + "0" * 64])
    assert "already completed" in await error(client, "handoff", task_id=tid, mode="complete", handoff_id=hid,
                                              agent="child-1", result={"tests_passed": True})


async def test_end_to_end_with_observe(client: Client, engine: Engine) -> None:
    """The real observe tool journals results; precheck reads them (same call identity, same ref)."""
    tid = await start(client, engine)
    read = {"command": "cat src/app.py"}
    assert (await call(client, "precheck", task_id=tid, tool="bash", args=read))["verdict"] == "allow"
    res = await client.call_tool("observe", {"task_id": tid, "kind": "result", "tool": "bash", "args": read,
                                             "result": "def main():\n    return 1\n" * 400})
    assert not res.is_error, text(res)
    dup = await call(client, "precheck", task_id=tid, tool="bash", args=read)
    assert dup["verdict"] == "suggest_alternative" and str(dup["ref"]).startswith("mem://sha256:")
    assert (await engine.refs.get(dup["ref"])).startswith(b"def main()")
    # an edit observed through observe makes the re-read legitimate again
    edit = {"command": "sed -i 's/return 1/return 2/' src/app.py"}
    await client.call_tool("observe", {"task_id": tid, "kind": "result", "tool": "bash", "args": edit, "result": ""})
    assert (await call(client, "precheck", task_id=tid, tool="bash", args=read))["verdict"] == "allow"
    # the same failing command observed three times is blocked on the fourth try
    run = {"command": "python reproduce.py"}
    for _ in range(3):
        res = await client.call_tool("observe", {"task_id": tid, "kind": "failure", "tool": "bash", "args": run,
                                                 "result": "Traceback (most recent call last):\n  File \"r.py\", "
                                                           "line 3\nImportError: cannot import name 'x' from 'app'"})
        assert not res.is_error, text(res)
    blocked = await call(client, "precheck", task_id=tid, tool="bash", args=run)
    assert blocked["verdict"] == "block" and blocked["rule"] == "loop:repeated_failure"


async def test_racing_accepts_one_wins_and_nothing_is_half_stored(client: Client, engine: Engine) -> None:
    import asyncio

    tid = await start(client, engine)
    hid = (await call(client, "handoff", task_id=tid, mode="create", objective="write the docs"))["handoff_id"]
    results = await asyncio.gather(
        client.call_tool("handoff", {"task_id": tid, "mode": "accept", "handoff_id": hid, "agent": "a"}),
        client.call_tool("handoff", {"task_id": tid, "mode": "accept", "handoff_id": hid, "agent": "b"}),
    )
    assert sorted(r.is_error for r in results) == [False, True]
    state = await engine.tasks.get(tid)
    assert state.event_counts.get("handoff_accepted") == 1
    winner = state.handoffs[hid]["agent"]
    loser = next(r for r in results if r.is_error)
    assert f"already accepted by {winner}" in text(loser)
