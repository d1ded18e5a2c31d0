"""recall over stored refs, through the in-memory MCP client (both wire eras)."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client, MCPError

from bosun.server.engine import Engine

LOG = "".join(f"line {i}: ok\n" for i in range(1, 501)).replace("line 250: ok", "line 250: ERROR disk full")


async def _put(client: Client, engine: Engine, data: bytes) -> str:
    await client.list_tools()  # the lifespan has opened the engine by now
    return await engine.refs.put(data)


def _sc(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content[0].text
    assert result.structured_content is not None
    return result.structured_content


async def test_head_tail_range_grep(client: Client, engine: Engine) -> None:
    ref = await _put(client, engine, LOG.encode())
    head = _sc(await client.call_tool("recall", {"ref": ref, "op": "head", "lines": 3}))
    assert head["text"] == "line 1: ok\nline 2: ok\nline 3: ok\n"
    assert head["total_lines"] == 500 and head["truncated"] is True
    tail = _sc(await client.call_tool("recall", {"ref": ref, "op": "tail", "lines": 1}))
    assert tail["text"] == "line 500: ok\n"
    rng = _sc(await client.call_tool("recall", {"ref": ref, "op": "range", "start": 10, "end": 11}))
    assert rng["text"] == "line 10: ok\nline 11: ok\n"
    grep = _sc(await client.call_tool("recall", {"ref": ref, "op": "grep", "pattern": "ERROR", "context": 1}))
    assert grep["text"] == "249-line 249: ok\n250:line 250: ERROR disk full\n251-line 251: ok\n"
    assert grep["matches"] == 1


async def test_output_is_bounded_and_says_what_was_cut(client: Client, engine: Engine) -> None:
    ref = await _put(client, engine, LOG.encode())
    raw = _sc(await client.call_tool("recall", {"ref": ref, "op": "raw", "max_tokens": 50}))
    assert raw["truncated"] is True
    assert len(raw["text"]) < len(LOG) / 5
    assert "note" in raw


async def test_bad_arguments_name_the_field(client: Client, engine: Engine) -> None:
    ref = await _put(client, engine, b"abc\n")
    cases = [
        ({"ref": "not-a-ref"}, "ref"),
        ({"ref": ref, "op": "grep"}, "pattern"),
        ({"ref": ref, "op": "grep", "pattern": "("}, "invalid regular expression"),
        ({"ref": ref, "op": "range"}, "start"),
        ({"ref": ref, "op": "range", "start": 0}, "1-based"),
        ({"ref": ref, "op": "head", "max_tokens": 0}, "max_tokens"),
        ({"ref": "mem://sha256:" + "0" * 64}, "not found"),
    ]
    for args, needle in cases:
        result = await client.call_tool("recall", args)
        assert result.is_error, args
        assert needle in result.content[0].text, (args, result.content[0].text)
    # the daemon keeps serving after every bad call
    ok = _sc(await client.call_tool("recall", {"ref": ref, "op": "raw"}))
    assert ok["text"] == "abc\n"


async def test_unknown_tool_is_a_protocol_error(client: Client) -> None:
    with pytest.raises(MCPError) as exc:
        await client.call_tool("no_such_tool", {})
    assert exc.value.error.code == -32602
    assert "recall" in exc.value.error.message


async def test_ref_resource_returns_verified_bytes(client: Client, engine: Engine) -> None:
    ref = await _put(client, engine, b"resource bytes")
    digest = ref.split(":")[-1]
    read = await client.read_resource(f"bosun://ref/{digest}")
    content = read.contents[0]
    data = getattr(content, "blob", None) or getattr(content, "text", None)
    assert data is not None
    import base64

    assert (base64.b64decode(data) if hasattr(content, "blob") else data.encode()) == b"resource bytes"
