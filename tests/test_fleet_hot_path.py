"""The small-call hot path (issue 13's throughput): what was made cheaper answers as before.

- The SDK's ``Mcp-Param-*`` header check is skipped only for tool schemas that declare no header
  (``server/app.py``), where it can only pass.
- Telemetry appends through a descriptor kept open, and still follows the file when another process
  rotates or removes it (``server/telemetry.py``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.shared.inbound import validate_mcp_param_headers
from pydantic import Field

from bosun.server import telemetry
from bosun.server.app import create_server, skip_unannotated_header_checks
from bosun.server.engine import Engine


def test_header_check_lookup_answers_none_only_for_schemas_without_a_header(engine: Engine) -> None:
    mcp = create_server(engine)
    lowlevel: Any = getattr(mcp, "_lowlevel_server")  # noqa: B009 (the SDK attribute the hook replaces)
    names = [t.name for t in mcp._tool_manager.list_tools()]
    assert len(names) >= 10
    headers = {"mcp-param-ref": "x", "mcp-param-region": "eu", "content-type": "application/json"}
    for name in names:
        schema = mcp._tool_manager.get_tool(name).parameters  # type: ignore[union-attr]
        assert lowlevel.get_tool_input_schema(name) is None
        # what the SDK's check answers with the real schema: nothing to reject, whatever the headers
        assert validate_mcp_param_headers(schema, {"ref": "y"}, headers) is None
    assert lowlevel.get_tool_input_schema("no_such_tool") is None

    other: MCPServer[Any] = MCPServer("annotated")

    @other.tool()
    def routed(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
        """A tool that declares a header."""
        return region

    @other.tool()
    def plain(text: str) -> str:
        """A tool that does not."""
        return text

    skip_unannotated_header_checks(other)
    low: Any = getattr(other, "_lowlevel_server")  # noqa: B009
    declared = low.get_tool_input_schema("routed")
    assert declared is not None and declared["properties"]["region"]["x-mcp-header"] == "Region"
    assert validate_mcp_param_headers(declared, {"region": "eu"}, {"mcp-param-region": "us"}) is not None
    assert low.get_tool_input_schema("plain") is None


def test_telemetry_follows_its_file_across_rotation_and_removal(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "t.jsonl"
    telemetry.bind(True, target, tmp_path)
    try:
        telemetry.record_tool("a", 1.0, False)
        os.replace(target, str(target) + ".1")  # another process (a hook) rotated the live file
        telemetry.record_tool("b", 1.0, False)
        target.unlink()  # or removed it
        telemetry.record_tool("c", 1.0, False)
        assert [e["tool"] for e in telemetry.read_events_of(target)] == ["c"]
        assert [e["tool"] for e in telemetry.read_events(target)] == ["a", "c"]  # b went to the removed file
        assert (target.stat().st_mode & 0o777) == 0o600
        other = tmp_path / "other.jsonl"
        telemetry.bind(True, other, tmp_path)  # a new binding writes its own file
        telemetry.record_tool("d", 1.0, False)
        assert [e["tool"] for e in telemetry.read_events(other)] == ["d"]
    finally:
        telemetry.unbind()
