"""Server-wide behaviour: what every tool answer looks like to the model."""

from __future__ import annotations

import json

import pytest
from mcp import Client


async def test_tool_answers_are_compact_json_with_structured_content_intact(client: Client) -> None:
    result = await client.call_tool("plan", {"mode": "start", "objective": "ship the release notes",
                                             "steps": ["draft", "review"]})
    assert not result.is_error, result.content[0].text
    text = result.content[0].text
    assert "\n  " not in text  # no indentation: every byte is paid for in the agent's context
    assert json.loads(text) == result.structured_content


async def test_secrets_in_task_text_are_scrubbed_before_they_are_journaled(client: Client) -> None:
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    started = await client.call_tool("plan", {"mode": "start", "objective": f"rotate {token} today",
                                              "constraints": [f"never print {token}"]})
    assert not started.is_error, started.content[0].text
    task_id = started.structured_content["task_id"]  # type: ignore[index]
    updated = await client.call_tool("plan", {"mode": "update", "task_id": task_id,
                                              "decisions": [f"use the token {token} only via env"]})
    assert not updated.is_error, updated.content[0].text
    resumed = await client.call_tool("plan", {"mode": "resume", "task_id": task_id})
    everything = json.dumps([started.structured_content, updated.structured_content, resumed.structured_content])
    assert token not in everything
    assert "rotate" in everything  # the rest of the text survives


async def test_the_tool_list_is_lean_and_says_what_each_tool_does_to_state(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {"route", "get_policy", "plan", "precheck", "observe", "recall", "checkpoint", "handoff",
                          "select_context", "audit", "filter_sources"}
    for name, t in tools.items():
        schema = json.dumps(t.input_schema)
        assert '"title"' not in schema.replace('"title":{', ""), name  # no pydantic titles
        assert '{"type":"null"}' not in schema.replace(" ", ""), name  # optional = omitted, not anyOf-null
        assert t.output_schema is None and t.annotations is not None, name
    for name in ("route", "get_policy", "precheck", "select_context", "audit", "filter_sources"):
        assert tools[name].annotations.read_only_hint is True, name  # type: ignore[union-attr]
    for name in ("recall", "observe", "plan", "handoff", "checkpoint"):  # recall journals when given a task
        ann = tools[name].annotations
        assert ann is not None and not ann.read_only_hint and ann.destructive_hint is False, name


async def test_an_unknown_tool_is_a_protocol_error_and_a_bad_resource_keeps_its_message(client: Client) -> None:
    from mcp import MCPError

    with pytest.raises(MCPError) as exc:
        await client.call_tool("no_such_tool", {})
    assert exc.value.error.code == -32602 and "recall" in exc.value.error.message
    with pytest.raises(MCPError) as exc:
        await client.read_resource("bosun://task/t_missing/manifest")
    assert exc.value.error.code == -32602 and "t_missing" in exc.value.error.message
