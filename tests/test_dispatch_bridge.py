"""BOSUN_TOOLS=dispatch through ``bosun stdio`` (issue 37): the documented mcpServers path lists and calls the one
dispatch tool, as ``serve`` and ``--standalone`` do, while another host on the same daemon keeps every tool."""

from __future__ import annotations

from pathlib import Path

from mcp import Client, StdioServerParameters
from mcp.types import TextContent

from tests.helpers_proc import BOSUN, env_for, serve_pids, stop


def _text(result: object) -> str:
    first = getattr(result, "content", [None])[0]
    return first.text if isinstance(first, TextContent) else ""


async def test_dispatch_through_the_bridge_lists_and_calls_one_tool(tmp_path: Path) -> None:
    home = tmp_path / "home"
    dispatch = StdioServerParameters(command=BOSUN[0], args=[*BOSUN[1:], "stdio"],
                                     env=env_for(home, BOSUN_TOOLS="dispatch"))
    narrow = StdioServerParameters(command=BOSUN[0], args=[*BOSUN[1:], "stdio"],
                                   env=env_for(home, BOSUN_TOOLS="dispatch,plan,recall"))
    wide = StdioServerParameters(command=BOSUN[0], args=[*BOSUN[1:], "stdio"], env=env_for(home))
    try:
        async with Client(dispatch) as client:
            tools = (await client.list_tools()).tools
            assert [t.name for t in tools] == ["bosun"]
            assert "precheck(" in (tools[0].description or "") and "recall(" in (tools[0].description or "")
            started = await client.call_tool("bosun", {"tool": "plan", "args": {"mode": "start",
                                                                               "objective": "fix the parser"}})
            assert not started.is_error and "SEAL=sha256:" in _text(started), _text(started)
            docs = await client.call_tool("bosun", {"tool": "docs", "args": {"tool": "recall"}})
            assert not docs.is_error and "recall" in _text(docs)
            bad = await client.call_tool("bosun", {"tool": "nope", "args": {}})
            assert bad.is_error and "unknown op" in _text(bad)
        async with Client(narrow) as client:
            tools = (await client.list_tools()).tools
            assert [t.name for t in tools] == ["bosun"] and "precheck(" not in (tools[0].description or "")
            refused = await client.call_tool("bosun", {"tool": "precheck", "args": {}})
            assert refused.is_error and "unknown op" in _text(refused)
        async with Client(wide) as client:  # the same daemon: the hidden dispatch tool is not listed here
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"recall", "plan", "observe", "precheck"} <= names and "bosun" not in names
    finally:
        for pid in serve_pids(home):
            stop(pid)
