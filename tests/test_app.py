"""Server-wide behaviour: what every tool answer looks like to the model."""

from __future__ import annotations

import json

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
