"""docs/reference.md is the reference the daemon serves (bosun://docs/tools), regenerated from the tool schemas."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from mcp import Client

from bosun.server.app import create_server
from bosun.server.engine import Engine

ROOT = Path(__file__).resolve().parents[1]


def _render() -> str:
    spec = importlib.util.spec_from_file_location("make_reference_doc", ROOT / "bench" / "make_reference_doc.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return str(module.render())


def test_committed_reference_is_the_generated_one() -> None:
    assert (ROOT / "docs" / "reference.md").read_text(encoding="utf-8") == _render(), (
        "docs/reference.md is stale: run python bench/make_reference_doc.py")


async def test_the_page_is_what_the_daemon_serves_and_names_every_listed_argument(engine: Engine) -> None:
    page = _render()
    async with Client(create_server(engine)) as client:
        served = await client.read_resource("bosun://docs/tools")
        listed = (await client.list_tools()).tools
    text = "".join(getattr(c, "text", "") for c in served.contents)
    assert page.endswith(text)
    for tool in listed:
        assert f"## {tool.name}\n" in page, tool.name
        section = page.split(f"## {tool.name}\n", 1)[1].split("\n## ", 1)[0]
        for argument in tool.input_schema.get("properties", {}):
            assert f"- `{argument}` (" in section, (tool.name, argument)
