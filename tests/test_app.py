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
