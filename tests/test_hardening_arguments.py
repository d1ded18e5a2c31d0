"""Issue 14, items 1 and 6: strict arguments with errors written for a person, internal errors
reported by id only, and the right JSON-RPC codes (through real in-memory sessions)."""

from __future__ import annotations

import logging
import re
from types import SimpleNamespace
from typing import Any

import pytest
from mcp import Client, MCPError

from bosun.server.app import create_server
from bosun.server.engine import Engine
from bosun.server.tools import TOOL_MODULES


def _text(result: Any) -> str:
    return str(result.content[0].text)


async def _start(client: Client) -> tuple[str, int]:
    started = await client.call_tool("plan", {"mode": "start", "objective": "ship it", "steps": ["a", "b"]})
    assert not started.is_error, _text(started)
    sc = started.structured_content
    assert sc is not None
    return str(sc["task_id"]), int(sc["version"])


async def test_a_misspelt_argument_is_refused_naming_it_and_the_closest_known_one(client: Client) -> None:
    task_id, version = await _start(client)
    for _ in range(2):  # move the task on so version 1 is stale
        done = await client.call_tool("plan", {"mode": "update", "task_id": task_id, "decisions": ["x"]})
        assert not done.is_error, _text(done)
    typo = await client.call_tool("plan", {"mode": "update", "task_id": task_id, "based_on_versoin": version,
                                           "decisions": ["silently applied?"]})
    assert typo.is_error
    assert "based_on_versoin" in _text(typo) and "did you mean 'based_on_version'" in _text(typo)
    status = await client.call_tool("plan", {"mode": "status", "task_id": task_id})
    assert "silently applied?" not in _text(status)  # nothing was applied


@pytest.mark.parametrize(("tool", "args", "field"), [
    ("recall", {"ref": "mem://sha256:" + "0" * 64, "op": "grep", "pattern": "x", "context": -1}, "context"),
    ("recall", {"ref": "mem://sha256:" + "0" * 64, "op": "grep", "pattern": "x", "max_matches": -5},
     "max_matches"),
    ("recall", {"ref": "mem://sha256:" + "0" * 64, "op": "range", "start": 1, "end": -3}, "end"),
    ("select_context", {"goal": "g", "candidates": ["a b c"], "budget_tokens": -1}, "budget_tokens"),
    ("plan", {"mode": "start", "objective": "o", "budget_tokens": -10}, "budget_tokens"),
])
async def test_negative_counts_are_out_of_range(client: Client, tool: str, args: dict[str, Any], field: str) -> None:
    result = await client.call_tool(tool, args)
    assert result.is_error
    assert _text(result).startswith(f"{field}: ") and "out of range" in _text(result), _text(result)


async def test_validation_messages_are_for_a_person(client: Client) -> None:
    bad_enum = await client.call_tool("plan", {"mode": "begin"})
    assert bad_enum.is_error
    text = _text(bad_enum)
    assert text.startswith("mode: ") and "'start'" in text and "http" not in text and "pydantic" not in text
    wrong_type = await client.call_tool("plan", {"mode": "start", "objective": "o", "budget_tokens": "lots"})
    assert wrong_type.is_error and _text(wrong_type).startswith("budget_tokens: expected an integer")
    missing = await client.call_tool("recall", {"op": "head"})
    assert missing.is_error and _text(missing).startswith("ref: required")


async def test_arguments_that_are_not_an_object_are_a_protocol_error_naming_the_field(engine: Engine) -> None:
    from bosun.server.surface import argument_guard, build_tools

    tools = build_tools([fn for module in TOOL_MODULES for fn in module.TOOLS])
    guard = argument_guard(tools)

    async def never(_: Any) -> Any:
        raise AssertionError("a malformed call must not reach the SDK")

    ctx = SimpleNamespace(method="tools/call", params={"name": "recall", "arguments": '{"ref": "x"}'})
    with pytest.raises(MCPError) as exc:
        await guard(ctx, never)  # type: ignore[arg-type]
    assert exc.value.error.code == -32602 and exc.value.error.message.startswith("arguments: ")


async def test_an_unknown_prompt_is_invalid_params(client: Client) -> None:
    with pytest.raises(MCPError) as exc:
        await client.get_prompt("task-resum", {"task_id": "t_x"})
    assert exc.value.error.code == -32602 and "task-resume" in exc.value.error.message


async def test_prompt_arguments_are_checked_like_tool_arguments(client: Client) -> None:
    with pytest.raises(MCPError) as exc:
        await client.get_prompt("task-resume", {})
    assert exc.value.error.code == -32602 and exc.value.error.message.startswith("task_id: required")
    with pytest.raises(MCPError) as exc:
        await client.get_prompt("task-resume", {"task_ld": "t_x"})
    assert exc.value.error.code == -32602 and "did you mean 'task_id'" in exc.value.error.message


async def test_an_internal_failure_returns_an_error_id_not_the_exception_text(
        engine: Engine, caplog: pytest.LogCaptureFixture) -> None:
    token = "ghp_" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8"

    async def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError(f"sqlite at /home/alice/.bosun/bosun.db is locked by pid 4242 (payload {token})")

    async with Client(create_server(engine)) as client:
        engine.recall.recall = broken  # type: ignore[method-assign]
        with caplog.at_level(logging.ERROR, logger="bosun.server"):
            result = await client.call_tool("recall", {"ref": "mem://sha256:" + "0" * 64})
    assert result.is_error
    text = _text(result)
    assert "alice" not in text and "RuntimeError" not in text and "locked" not in text
    match = re.search(r"internal error ([0-9a-f]{8})", text)
    assert match, text
    logged = [r.getMessage() for r in caplog.records if match.group(1) in r.getMessage()]
    assert logged and "locked by pid 4242" in logged[0] and "Traceback" in logged[0]  # the log keeps it,
    assert token not in logged[0]  # scrubbed


async def test_listed_schemas_declare_that_no_other_argument_is_accepted(client: Client) -> None:
    for listed in (await client.list_tools()).tools:
        assert listed.input_schema.get("additionalProperties") is False, listed.name
