"""Every tool error reads one way (``<field>: <what is wrong>; accepted: ...``, no SDK prefix), and names the
likeliest mistake first: the task, then the id, then the other arguments. The client raises ``ToolCallError``
for every refusal and ``ConnectionFailed`` with the URL and how to start the daemon."""

from __future__ import annotations

import re
import socket
from typing import Any

import pytest
from mcp import Client
from mcp.types import CallToolResult, TextContent

from bosun.client import AsyncBosun, Bosun, ConnectionFailed, ToolCallError
from bosun.server.app import create_server
from bosun.server.engine import Engine

FORM = re.compile(r"^[A-Za-z_][\w.\[\]]*: \S")  # "<field>: <what is wrong>..."


def _text(res: CallToolResult) -> str:
    first = res.content[0]
    return first.text if isinstance(first, TextContent) else ""


async def _error(client: Client, name: str, args: dict[str, Any]) -> str:
    res = await client.call_tool(name, args)
    assert res.is_error, (name, args)
    return _text(res)


async def _task(client: Client) -> str:
    res = await client.call_tool("plan", {"mode": "start", "objective": "o", "steps": ["a", "b"]})
    return str((res.structured_content or {})["task_id"])


async def test_every_kind_of_refusal_has_one_form_and_no_sdk_prefix(client: Client) -> None:
    tid = await _task(client)
    calls: list[tuple[str, dict[str, Any], str]] = [
        ("plan", {"mode": "bogus"}, "mode"),  # the argument guard (schema)
        ("recall", {"ref": "mem://sha256:" + "0" * 64, "nope": 1}, "nope"),  # unknown argument
        ("recall", {"ref": "nope"}, "ref"),  # the service's InvalidInput
        ("recall", {"ref": "mem://sha256:" + "0" * 64}, "ref"),  # NotFound
        ("plan", {"mode": "status", "task_id": "t_missing"}, "task_id"),
        ("get_policy", {"name": "no-such-policy"}, "name"),
        ("observe", {"task_id": tid, "kind": "result", "result": "x"}, "tool"),
        ("handoff", {"task_id": tid, "mode": "status", "handoff_id": "h_nope"}, "handoff_id"),
        ("select_context", {"goal": "g", "candidates": [{"id": "a"}]}, "candidates[0]"),
    ]
    for name, args, field in calls:
        message = await _error(client, name, args)
        assert not message.startswith("Error executing tool"), message
        assert FORM.match(message) and message.startswith(f"{field}: "), (name, message)
        assert "(accepted:" not in message, message


async def test_an_unknown_tool_names_the_accepted_ones(client: Client) -> None:
    from mcp import MCPError

    with pytest.raises(MCPError, match=r"^name: unknown tool 'recal'; accepted: .*recall"):
        await client.call_tool("recal", {})


async def test_observe_on_a_missing_task_names_the_task_not_a_missing_argument(client: Client) -> None:
    message = await _error(client, "observe", {"task_id": "t_missing", "kind": "result", "result": "x"})
    assert message.startswith("task_id: task not found: t_missing"), message


async def test_observe_of_a_file_names_result_where_the_path_goes(client: Client) -> None:
    tid = await _task(client)
    message = await _error(client, "observe", {"task_id": tid, "kind": "file", "result": "../etc/passwd"})
    assert message.startswith("result: "), message


async def test_handoff_names_the_task_then_the_id_then_the_arguments(client: Client) -> None:
    tid = await _task(client)
    missing_task = await _error(client, "handoff", {"task_id": "t_missing", "mode": "complete", "handoff_id": "h_x"})
    assert missing_task.startswith("task_id: task not found: t_missing"), missing_task
    for mode in ("complete", "accept"):  # no agent, no result: the unknown id is still what is named
        unknown = await _error(client, "handoff", {"task_id": tid, "mode": mode, "handoff_id": "h_nope"})
        assert unknown.startswith("handoff_id: handoff not found: h_nope"), unknown
    made = await client.call_tool("handoff", {"task_id": tid, "mode": "create", "objective": "sub"})
    hid = (made.structured_content or {})["handoff_id"]
    assert (await _error(client, "handoff", {"task_id": tid, "mode": "accept", "handoff_id": hid})).startswith("agent: ")
    await client.call_tool("handoff", {"task_id": tid, "mode": "accept", "handoff_id": hid, "agent": "kid"})
    no_result = await _error(client, "handoff", {"task_id": tid, "mode": "complete", "handoff_id": hid, "agent": "kid"})
    assert no_result.startswith("result: is required"), no_result


async def test_the_client_raises_tool_call_error_for_every_refusal(engine: Engine) -> None:
    async with AsyncBosun(create_server(engine)) as b:
        with pytest.raises(ToolCallError) as unknown:
            await b.call("no_such_tool", {})
        assert unknown.value.field == "name" and "accepted:" in unknown.value.message
        with pytest.raises(ToolCallError) as missing:
            await b.observe("t_missing", "result", result="x")
        assert missing.value.field == "task_id"


def test_connection_failed_names_the_url_and_how_to_start_the_daemon() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/mcp"
    with pytest.raises(ConnectionFailed) as err:
        with Bosun(url, timeout=10):
            pass
    message = str(err.value)
    assert url in message and "start it with `bosun serve`" in message
    assert "TaskGroup" not in message, message


async def test_a_wrong_shape_is_answered_with_the_shape_the_argument_takes(client: Client) -> None:
    tid = await _task(client)
    message = await _error(client, "handoff", {"task_id": tid, "mode": "create", "objective": "x", "checks": "present"})
    assert message == "checks: expected a JSON array, got a string 'present'; accepted: [{field, op, value}]"

