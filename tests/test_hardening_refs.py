"""Issue 14, item 7: one ref form. The short ref observe shows (``mem://sha256:`` + 16 hex) and
the full one are accepted by every tool, resource and handoff that takes a ref."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pytest
from mcp import Client, MCPError

BIG = "".join(f"step {i}: compiled module_{i}.o in {i % 7} ms\n" for i in range(1500))


async def _task_and_short_ref(client: Client) -> tuple[str, str]:
    started = await client.call_tool("plan", {"mode": "start", "objective": "build", "steps": ["compile"]})
    assert started.structured_content is not None
    task_id = str(started.structured_content["task_id"])
    observed = await client.call_tool("observe", {"task_id": task_id, "kind": "result", "tool": "make", "result": BIG})
    sc: Any = observed.structured_content
    assert sc is not None and sc["offloaded"] is True, observed.content[0].text
    return task_id, str(sc["ref"])


def _spellings(short: str) -> list[str]:
    digest = hashlib.sha256(BIG.encode()).hexdigest()
    hex16 = short.rsplit(":", 1)[1]
    assert digest.startswith(hex16)
    return [short, "sha256:" + hex16, hex16, "mem://sha256:" + digest, digest]


async def test_handoff_inputs_take_the_ref_observe_shows_and_store_the_full_one(client: Client) -> None:
    task_id, short = await _task_and_short_ref(client)
    for spelling in _spellings(short):
        made = await client.call_tool("handoff", {"task_id": task_id, "mode": "create", "objective": "review the log",
                                                  "inputs": [spelling]})
        assert not made.is_error, made.content[0].text
        sc: Any = made.structured_content
        assert sc["contract"]["inputs"] == ["mem://sha256:" + hashlib.sha256(BIG.encode()).hexdigest()]


async def test_select_context_ref_candidates_take_the_short_ref(client: Client) -> None:
    _, short = await _task_and_short_ref(client)
    for spelling in _spellings(short):
        result = await client.call_tool("select_context", {"goal": "which module compiled slowest",
                                                           "candidates": [{"id": "log", "ref": spelling}],
                                                           "budget_tokens": 100_000})
        assert not result.is_error, result.content[0].text


async def test_the_ref_resource_takes_the_short_ref(client: Client) -> None:
    _, short = await _task_and_short_ref(client)
    for spelling in [*_spellings(short), short]:  # the last: the ref pasted whole, mem:// and all
        uri = f"bosun://ref/{spelling}" if spelling is short else f"bosun://ref/{spelling.removeprefix('mem://')}"
        read = await client.read_resource(uri)
        blob: Any = read.contents[0]
        assert base64.b64decode(blob.blob) == BIG.encode()


async def test_an_unknown_short_ref_is_a_clear_error_everywhere(client: Client) -> None:
    task_id, _ = await _task_and_short_ref(client)
    missing = "mem://sha256:" + "0123456789abcdef"
    made = await client.call_tool("handoff", {"task_id": task_id, "mode": "create", "objective": "o",
                                              "inputs": [missing]})
    assert made.is_error and "0123456789abcdef" in made.content[0].text and "64" not in made.content[0].text
    with pytest.raises(MCPError) as exc:
        await client.read_resource("bosun://ref/sha256:0123456789abcdef")
    assert exc.value.error.code == -32602 and "0123456789abcdef" in exc.value.error.message
